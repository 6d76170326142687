use super::check::SignedRequest;
use super::sign::{self, Signed};
use super::*;
use crate::verify::{FixedClock, SignatureScheme, VerifyError};
use http::{HeaderMap, HeaderName, HeaderValue};

const NOW: i64 = 1_800_000_000;
const SEED: [u8; 32] = [7; 32];

fn preset(sender: Sender) -> SenderPreset {
    let mut p = SenderPreset::new(sender);
    match sender {
        Sender::Twilio => p.public_url = Some("https://herald.example.com/webhooks/sms".into()),
        Sender::Discord => {
            let (_, public) = sign::discord(&SEED, "0", b"").unwrap();
            p.public_key = parse_public_key(&public);
        }
        _ => {}
    }
    p
}

fn headers(signed: &Signed) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in &signed.headers {
        h.append(
            HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    h
}

fn body_for(sender: Sender, now: i64) -> Vec<u8> {
    match sender {
        Sender::Linear => {
            format!(r#"{{"type":"Issue","webhookTimestamp":{}}}"#, now * 1000).into_bytes()
        }
        Sender::Twilio => b"MessageSid=SM1&MessageStatus=delivered&To=%2B15550100&Body=".to_vec(),
        _ => br#"{"type":"t","id":"evt_1"}"#.to_vec(),
    }
}

/// Signs as the sender at `signed_at` and verifies at `now`.
fn check(
    sender: Sender,
    secret: &str,
    signed_at: i64,
    body: &[u8],
    sent: &[u8],
    now: i64,
) -> Result<SignatureScheme, VerifyError> {
    let p = preset(sender);
    let signed = match sender {
        Sender::Discord => {
            let ts = signed_at.to_string();
            let (sig, _) = sign::discord(&SEED, &ts, body).unwrap();
            Signed {
                headers: vec![
                    ("X-Signature-Ed25519".into(), sig),
                    ("X-Signature-Timestamp".into(), ts),
                ],
                query: None,
            }
        }
        _ => sign::request(&p, secret, body, signed_at, None).unwrap(),
    };
    let h = headers(&signed);
    let request = SignedRequest {
        headers: &h,
        body: sent,
        query: signed.query.as_deref(),
    };
    verify(&p, "s3cret", &request, &FixedClock(now))
}

#[test]
fn every_preset_accepts_its_own_signature_and_refuses_tampering() {
    for sender in Sender::ALL {
        let body = body_for(sender, NOW);
        let ok = check(sender, "s3cret", NOW, &body, &body, NOW);
        assert!(ok.is_ok(), "{sender}: {ok:?}");
        let mut tampered = body.clone();
        tampered.push(b' ');
        if sender == Sender::Twilio {
            tampered = b"MessageSid=SM2&MessageStatus=delivered".to_vec();
        }
        // A token does not cover the body.
        assert!(
            sender == Sender::Token || check(sender, "s3cret", NOW, &body, &tampered, NOW).is_err(),
            "{sender} took a tampered body"
        );
        if sender != Sender::Discord {
            assert!(
                check(sender, "other", NOW, &body, &body, NOW).is_err(),
                "{sender} took another secret"
            );
        }
    }
}

#[test]
fn timestamped_presets_refuse_a_ten_minute_old_signature() {
    for sender in [
        Sender::Stripe,
        Sender::Slack,
        Sender::Paddle,
        Sender::Discord,
        Sender::StandardWebhooks,
        Sender::Svix,
    ] {
        let body = body_for(sender, NOW - 600);
        let old = check(sender, "s3cret", NOW - 600, &body, &body, NOW);
        assert!(
            matches!(old, Err(VerifyError::StaleTimestamp { .. })),
            "{sender}: {old:?}"
        );
    }
    let body = body_for(Sender::Linear, NOW - 600);
    assert!(matches!(
        check(Sender::Linear, "s3cret", NOW, &body, &body, NOW),
        Err(VerifyError::StaleTimestamp { limit: 60, .. })
    ));
    // Paddle's own window is 5 s unless the route widens it.
    let body = body_for(Sender::Paddle, NOW);
    assert!(check(Sender::Paddle, "s3cret", NOW - 6, &body, &body, NOW).is_err());
    assert!(check(Sender::Paddle, "s3cret", NOW - 5, &body, &body, NOW).is_ok());
}

fn one(name: &'static str, value: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(name, HeaderValue::from_str(value).unwrap());
    h
}

#[test]
fn a_rolled_secret_may_sign_beside_the_old_one() {
    let body = b"{}";
    let ts = NOW.to_string();
    let old = sign::stripe("whsec_old", &ts, body);
    let new = sign::stripe("whsec_new", &ts, body);
    let both = format!("{old},{}", new.split_once(',').unwrap().1);
    let h = one("stripe-signature", &both);
    let req = SignedRequest {
        headers: &h,
        body,
        query: None,
    };
    for secret in ["whsec_old", "whsec_new"] {
        assert!(verify(&preset(Sender::Stripe), secret, &req, &FixedClock(NOW)).is_ok());
    }
    assert!(verify(&preset(Sender::Stripe), "whsec_x", &req, &FixedClock(NOW)).is_err());
    let paddle = format!(
        "{};h1={}",
        sign::paddle("a", &ts, body),
        sign::paddle("b", &ts, body).split_once("h1=").unwrap().1
    );
    let h = one("paddle-signature", &paddle);
    let req = SignedRequest {
        headers: &h,
        body,
        query: None,
    };
    assert!(verify(&preset(Sender::Paddle), "b", &req, &FixedClock(NOW)).is_ok());
    let pd = format!(
        "v1={},v1={}",
        hex::encode(crate::verify::hmac_sha256(b"x", &[body])),
        hex::encode(crate::verify::hmac_sha256(b"y", &[body]))
    );
    let h = one("x-pagerduty-signature", &pd);
    let req = SignedRequest {
        headers: &h,
        body,
        query: None,
    };
    assert!(verify(&preset(Sender::Pagerduty), "y", &req, &FixedClock(NOW)).is_ok());
}

#[test]
fn twilio_signs_the_url_with_and_without_the_default_port() {
    let mut p = preset(Sender::Twilio);
    let body = b"CallSid=CA1&Digits=1234&From=%2B1&From=%2B1";
    let signed = sign::request(&p, "tok", body, NOW, None).unwrap();
    let h = headers(&signed);
    let req = SignedRequest {
        headers: &h,
        body,
        query: None,
    };
    assert!(verify(&p, "tok", &req, &FixedClock(NOW)).is_ok());
    p.public_url = Some("https://herald.example.com:443/webhooks/sms".into());
    assert!(verify(&p, "tok", &req, &FixedClock(NOW)).is_ok());
    // Twilio's validators drop any port.
    p.public_url = Some("https://herald.example.com:8443/webhooks/sms".into());
    assert!(verify(&p, "tok", &req, &FixedClock(NOW)).is_ok());
    p.public_url = Some("https://herald.example.org/webhooks/sms".into());
    assert!(verify(&p, "tok", &req, &FixedClock(NOW)).is_err());
    // A JSON body is covered by bodySHA256 in the query.
    let p = preset(Sender::Twilio);
    let json = br#"{"a":1}"#;
    let signed = sign::request(&p, "tok", json, NOW, None).unwrap();
    let query = signed.query.clone().unwrap();
    assert!(query.starts_with("bodySHA256="));
    let h = headers(&signed);
    let req = SignedRequest {
        headers: &h,
        body: json,
        query: Some(&query),
    };
    assert!(verify(&p, "tok", &req, &FixedClock(NOW)).is_ok());
    let req = SignedRequest {
        headers: &h,
        body: br#"{"a":2}"#,
        query: Some(&query),
    };
    assert!(verify(&p, "tok", &req, &FixedClock(NOW)).is_err());
}

#[test]
fn tokens_and_jira_connect() {
    let p = preset(Sender::Token);
    let ok = |h: &HeaderMap, p: &SenderPreset| {
        verify(
            p,
            "tok",
            &SignedRequest {
                headers: h,
                body: b"",
                query: None,
            },
            &FixedClock(0),
        )
    };
    assert!(ok(&one("authorization", "Bearer tok"), &p).is_ok());
    assert!(ok(&one("authorization", "bearer tok"), &p).is_ok());
    assert!(ok(&one("authorization", "Bearer tok2"), &p).is_err());
    assert!(ok(&one("authorization", "tok"), &p).is_err());
    let mut named = p.clone();
    named.header = Some(HeaderName::from_static("x-alert-token"));
    assert!(ok(&one("x-alert-token", "tok"), &named).is_ok());
    assert!(ok(&one("authorization", "Bearer tok"), &named).is_err());
    let jira = preset(Sender::Jira);
    let err = ok(&one("authorization", "JWT eyJ"), &jira).unwrap_err();
    assert_eq!(err.reason(), "unsupported");
    assert!(err.to_string().contains("admin webhook"), "{err}");
}

#[test]
fn event_types_and_delivery_ids() {
    use serde_json::json;
    let map = |v: serde_json::Value| v.as_object().cloned().unwrap();
    let empty = HeaderMap::new();
    let slack =
        map(json!({"type": "event_callback", "event_id": "Ev1", "event": {"type": "app_mention"}}));
    assert_eq!(
        event_type(Sender::Slack, &empty, &slack),
        json!("app_mention")
    );
    assert_eq!(
        delivery_id(Sender::Slack, &empty, &slack).as_deref(),
        Some("Ev1")
    );
    let shop = {
        let mut h = one("x-shopify-topic", "orders/create");
        h.insert("x-shopify-webhook-id", HeaderValue::from_static("w1"));
        h
    };
    assert_eq!(
        event_type(Sender::Shopify, &shop, &Map::new()),
        json!("orders/create")
    );
    assert_eq!(
        delivery_id(Sender::Shopify, &shop, &Map::new()).as_deref(),
        Some("w1")
    );
    let sms = map(json!({"MessageSid": "SM1", "MessageStatus": "sent"}));
    assert_eq!(
        delivery_id(Sender::Twilio, &empty, &sms).as_deref(),
        Some("SM1:sent")
    );
    assert_eq!(event_type(Sender::Twilio, &empty, &sms), json!("sent"));
    let pd = map(json!({"event": {"id": "E1", "event_type": "incident.triggered"}}));
    assert_eq!(
        event_type(Sender::Pagerduty, &empty, &pd),
        json!("incident.triggered")
    );
    assert_eq!(
        delivery_id(Sender::Pagerduty, &empty, &pd).as_deref(),
        Some("E1")
    );
    let interaction = map(json!({"type": 2, "id": "123", "application_id": "9", "token": "t"}));
    assert_eq!(event_type(Sender::Discord, &empty, &interaction), json!(2));
    assert_eq!(
        discord_followup(&interaction),
        Some(("9".into(), "t".into()))
    );
    assert_eq!(
        event_type(Sender::Sentry, &empty, &Map::new()),
        json!("unknown")
    );
    // Bitbucket Data Center sends X-Request-Id where Cloud sends X-Request-UUID.
    let dc = one("x-request-id", "dc-1");
    assert_eq!(
        delivery_id(Sender::Bitbucket, &dc, &Map::new()).as_deref(),
        Some("dc-1")
    );
    let mut cloud = dc.clone();
    cloud.insert("x-request-uuid", HeaderValue::from_static("cloud-1"));
    assert_eq!(
        delivery_id(Sender::Bitbucket, &cloud, &Map::new()).as_deref(),
        Some("cloud-1")
    );
    let ping = map(json!({"type": 1}));
    assert_eq!(
        handshake(Sender::Discord, &ping).unwrap().answer,
        json!({"type": 1})
    );
    assert!(handshake(Sender::Discord, &interaction).is_none());
    let challenge = map(json!({"type": "url_verification", "challenge": "c"}));
    assert_eq!(
        handshake(Sender::Slack, &challenge).unwrap().answer,
        json!({"challenge": "c"})
    );
    assert!(handshake(Sender::Stripe, &challenge).is_none());
}

#[test]
fn names_round_trip() {
    for sender in Sender::ALL {
        assert_eq!(Sender::parse(sender.name()), Some(sender));
    }
    assert_eq!(Sender::parse("Stripe"), None);
}

#[test]
fn every_bundled_sample_is_signed_accepted_and_named() {
    use crate::event::parse_body;
    for sender in Sender::ALL {
        let mut sample = sample::bundled(sender);
        assert!(!sample.body.is_null(), "{sender}: no sample");
        sample.set_delivery_id(sender, "test-id");
        sample.set_event_type(sender, "test.event");
        if let Some(p) = sample.payload_mut()
            && sender == Sender::Linear
        {
            sign::stamp_linear(p, NOW * 1000);
        }
        let body = sample.body_text();
        let mut h = HeaderMap::new();
        for (k, v) in &sample.headers {
            h.insert(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        let payload = parse_body(body.as_bytes(), None).unwrap();
        let id = delivery_id(sender, &h, &payload);
        if sender == Sender::Twilio {
            assert_eq!(id.as_deref(), Some("test-id"));
        } else if sender != Sender::Token {
            assert_eq!(id.as_deref(), Some("test-id"), "{sender}");
        }
        let event = event_type(sender, &h, &payload);
        if !matches!(sender, Sender::Twilio | Sender::Token | Sender::Discord) {
            assert_eq!(event, serde_json::json!("test.event"), "{sender}");
        }
        if sender == Sender::Discord {
            continue;
        }
        let p = preset(sender);
        let id = sample
            .headers
            .iter()
            .find(|(k, _)| {
                k.eq_ignore_ascii_case("webhook-id") || k.eq_ignore_ascii_case("svix-id")
            })
            .map(|(_, v)| v.clone());
        let signed = sign::request(&p, "s3cret", body.as_bytes(), NOW, id.as_deref()).unwrap();
        for (k, v) in &signed.headers {
            h.insert(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        let req = SignedRequest {
            headers: &h,
            body: body.as_bytes(),
            query: signed.query.as_deref(),
        };
        assert!(
            verify(&p, "s3cret", &req, &FixedClock(NOW)).is_ok(),
            "{sender}"
        );
    }
}
