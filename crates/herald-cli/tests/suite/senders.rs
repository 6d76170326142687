//! Every sender preset (`source:`) over a real socket, each request signed by the
//! sender's own SDK where one exists (tests/senders/sign.py, which also runs the
//! official verifier on the very bytes sent): accepted under the sender's delivery id,
//! the sender's retry accepted once, another event ignored, a tampered body, a wrong
//! secret and a 10-minute-old timestamp refused with 401, handshakes answered inline.

use super::fakes::*;
use super::support::*;
use herald_test_support::{FakeProvider, Scripted};
use herald_webhook::sender::sample::{self, Sample};
use herald_webhook::sender::{Sender, SenderPreset, sign};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

const TWILIO_URL: &str = "https://herald.example.com/webhooks/twilio";
const DISCORD_SEED: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f00112233445566778899aabbccddeeff0";
const OTHER_SEED: &str = "1111111111111111111111111111111111111111111111111111111111111111";

/// One preset's route and the events it takes and ignores.
struct Case {
    sender: Sender,
    secret: &'static str,
    event: &'static str,
    other: &'static str,
    /// Signed by the sender's SDK (else by herald's own signer: token, Standard
    /// Webhooks and Svix, whose schemes other tests check against their vectors).
    sdk: bool,
    timestamped: bool,
}

const CASES: &[Case] = &[
    case(
        Sender::Stripe,
        "whsec_stripe_test_0123456789",
        "payment_intent.succeeded",
        "charge.refunded",
        true,
        true,
    ),
    case(
        Sender::Jira,
        "jira-secret",
        "jira:issue_created",
        "jira:issue_deleted",
        true,
        false,
    ),
    case(
        Sender::Shopify,
        "shopify-secret",
        "orders/create",
        "orders/cancelled",
        true,
        false,
    ),
    case(
        Sender::Slack,
        "slack-signing-secret",
        "app_mention",
        "message",
        true,
        true,
    ),
    case(
        Sender::Linear,
        "linear-secret",
        "Issue",
        "Comment",
        true,
        true,
    ),
    case(
        Sender::Pagerduty,
        "pagerduty-secret",
        "incident.triggered",
        "incident.resolved",
        true,
        false,
    ),
    case(
        Sender::Sentry,
        "sentry-secret",
        "issue",
        "installation",
        true,
        false,
    ),
    case(
        Sender::Paddle,
        "pdl_ntfset_secret",
        "transaction.completed",
        "subscription.canceled",
        true,
        true,
    ),
    case(
        Sender::Bitbucket,
        "bitbucket-secret",
        "repo:push",
        "pullrequest:created",
        true,
        false,
    ),
    case(Sender::Gitea, "gitea-secret", "push", "issues", true, false),
    case(
        Sender::Forgejo,
        "forgejo-secret",
        "push",
        "issues",
        true,
        false,
    ),
    case(
        Sender::Twilio,
        "twilio-auth-token",
        "delivered",
        "sent",
        true,
        false,
    ),
    case(Sender::Discord, DISCORD_SEED, "2", "3", true, true),
    case(Sender::Token, "alert-token", "alert", "other", false, false),
    case(
        Sender::StandardWebhooks,
        "whsec_MDEyMzQ1Njc4OQ",
        "invoice.paid",
        "invoice.voided",
        false,
        true,
    ),
    case(
        Sender::Svix,
        "whsec_MDEyMzQ1Njc4OQ",
        "invoice.paid",
        "invoice.voided",
        false,
        true,
    ),
];

const fn case(
    sender: Sender,
    secret: &'static str,
    event: &'static str,
    other: &'static str,
    sdk: bool,
    timestamped: bool,
) -> Case {
    Case {
        sender,
        secret,
        event,
        other,
        sdk,
        timestamped,
    }
}

fn senders_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/senders")
}

/// Runs sign.py; its JSON answer.
fn sign_py(args: &[&str]) -> Value {
    let out = Command::new("python3")
        .arg(senders_dir().join("sign.py"))
        .args(args)
        .output()
        .expect("python3 runs tests/senders/sign.py");
    assert!(
        out.status.success(),
        "sign.py {args:?} failed (scripts/test installs the senders' SDKs): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn discord_public_key(seed: &str) -> String {
    sign_py(&["discord", "--secret", seed, "--print-public-key"])["public_key"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn preset(case: &Case) -> SenderPreset {
    let mut p = SenderPreset::new(case.sender);
    p.public_url = Some(TWILIO_URL.to_owned());
    p.header =
        (case.sender == Sender::Token).then(|| http::HeaderName::from_static("x-alert-token"));
    p
}

/// The signature headers and the query string for `body` signed at `ts` with `secret`.
fn signed(
    case: &Case,
    secret: &str,
    id: Option<&str>,
    body: &str,
    ts: i64,
) -> (Vec<(String, String)>, Option<String>) {
    if !case.sdk {
        let s = sign::request(&preset(case), secret, body.as_bytes(), ts, id).unwrap();
        return (s.headers, s.query);
    }
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), body).unwrap();
    let ts_text = ts.to_string();
    let mut args = vec![
        case.sender.name(),
        "--secret",
        secret,
        "--body-file",
        file.path().to_str().unwrap(),
        "--timestamp",
        &ts_text,
    ];
    if case.sender == Sender::Twilio {
        args.extend(["--url", TWILIO_URL]);
    }
    let answer = sign_py(&args);
    let headers = answer["headers"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
        .collect();
    let query = answer["url"]
        .as_str()
        .and_then(|u| u.split_once('?'))
        .map(|(_, q)| q.to_owned());
    (headers, query)
}

/// The preset's bundled sample as `event`, with delivery id `id`, stamped at `ts`.
fn sample_for(case: &Case, event: &str, id: &str, ts: i64) -> Sample {
    let mut s = sample::bundled(case.sender);
    s.set_event_type(case.sender, event);
    s.set_delivery_id(case.sender, id);
    if let Some(p) = s.payload_mut()
        && case.sender == Sender::Linear
    {
        sign::stamp_linear(p, ts * 1000);
    }
    s
}

fn routes_yaml(discord_key: &str) -> String {
    let mut out = String::new();
    for c in CASES {
        let name = c.sender.name();
        out.push_str(&format!(
            "        {name}:\n          source: {name}\n          secret: '{}'\n          events: ['{}']\n          prompt: 'event {{__raw__}}'\n",
            c.secret, c.event
        ));
        match c.sender {
            Sender::Twilio => out.push_str(&format!("          public_url: {TWILIO_URL}\n")),
            Sender::Discord => out.push_str(&format!("          public_key: {discord_key}\n")),
            Sender::Token => out.push_str("          header: X-Alert-Token\n"),
            _ => {}
        }
    }
    out
}

async fn send(
    h: &Herald,
    case: &Case,
    sample: &Sample,
    body: &str,
    sig: &(Vec<(String, String)>, Option<String>),
) -> (StatusCode, Value) {
    let mut path = format!("/webhooks/{}", case.sender.name());
    if let Some(q) = &sig.1 {
        path = format!("{path}?{q}");
    }
    let mut req = http_client(Duration::from_secs(10))
        .post(h.url(&path))
        .body(body.to_owned());
    for (k, v) in sample.headers.iter().chain(&sig.0) {
        req = req.header(k.as_str(), v.as_str());
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    let xml = resp
        .headers()
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(b"text/xml"));
    let text = resp.text().await.unwrap();
    // Twilio is answered TwiML; everyone else JSON.
    let value = match xml {
        true => Value::String(text),
        false => {
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text:?}"))
        }
    };
    (status, value)
}

/// The empty TwiML answer a Twilio route gives every verified request.
const EMPTY_TWIML: &str = r#"<?xml version="1.0" encoding="UTF-8"?><Response/>"#;

/// What the sender is answered for an accepted (or duplicate) event.
fn accepted_answer(case: &Case, status: &str, id: &str) -> (StatusCode, Value) {
    match case.sender {
        Sender::Discord => (StatusCode::OK, json!({"type": 5})),
        Sender::Twilio => (StatusCode::OK, json!(EMPTY_TWIML)),
        Sender::Linear | Sender::Paddle if status == "accepted" => {
            (StatusCode::OK, json!({"status": status, "delivery_id": id}))
        }
        _ if status == "accepted" => (
            StatusCode::ACCEPTED,
            json!({"status": status, "delivery_id": id}),
        ),
        _ => (StatusCode::OK, json!({"status": status, "delivery_id": id})),
    }
}

fn shape(s: StatusCode, b: &Value) -> (StatusCode, Value) {
    match b.get("status") {
        Some(st) => (s, json!({"status": st, "delivery_id": b["delivery_id"]})),
        None => (s, b.clone()),
    }
}

async fn check_case(h: &Herald, case: &Case) {
    let name = case.sender.name();
    let now = now();
    let id = format!("{name}-delivery-1");
    let sample = sample_for(case, case.event, &id, now);
    let body = sample.body_text();
    let sig = signed(case, case.secret, Some(&id), &body, now);
    // Accepted, under the sender's delivery id.
    let (s, b) = send(h, case, &sample, &body, &sig).await;
    assert_eq!(
        shape(s, &b),
        accepted_answer(case, "accepted", &id),
        "{name}: {b}"
    );
    // The sender's retry: Stripe signs again, Slack says which retry it is.
    let retry = match case.sender {
        // Stripe and Paddle sign each attempt anew.
        Sender::Stripe | Sender::Paddle => signed(case, case.secret, Some(&id), &body, now + 1),
        _ => sig.clone(),
    };
    let mut retry_sample = sample.clone();
    if case.sender == Sender::Slack {
        retry_sample
            .headers
            .push(("X-Slack-Retry-Num".into(), "1".into()));
        retry_sample
            .headers
            .push(("X-Slack-Retry-Reason".into(), "http_timeout".into()));
    }
    let (s, b) = send(h, case, &retry_sample, &body, &retry).await;
    assert_eq!(
        shape(s, &b),
        accepted_answer(case, "duplicate", &id),
        "{name} retry: {b}"
    );
    // Another event type is ignored.
    let other_id = format!("{name}-delivery-2");
    let other = sample_for(case, case.other, &other_id, now);
    let other_body = other.body_text();
    let other_sig = signed(case, case.secret, Some(&other_id), &other_body, now);
    let (s, b) = send(h, case, &other, &other_body, &other_sig).await;
    if case.sender == Sender::Twilio {
        // Told apart in the inbox only (below): Twilio reads TwiML, not herald's status.
        assert_eq!((s, b), (StatusCode::OK, json!(EMPTY_TWIML)));
    } else if case.sender == Sender::Discord {
        // Discord shows "This interaction failed" for anything but an interaction
        // response: the user alone is told.
        assert_eq!(
            (s, b["type"].clone(), b["data"]["flags"].clone()),
            (StatusCode::OK, json!(4), json!(64))
        );
    } else {
        assert_eq!(
            (s, b["status"].as_str()),
            (StatusCode::OK, Some("ignored")),
            "{name}: {b}"
        );
    }
    // Refused: a tampered body (a token covers no body), another secret, an old timestamp.
    let tampered = match case.sender {
        Sender::Twilio => format!("{body}&Extra=1"),
        _ => body.replacen('{', "{\"injected\": true, ", 1),
    };
    if case.sender != Sender::Token {
        let (s, _) = send(h, case, &sample, &tampered, &sig).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{name}: a tampered body");
    }
    let wrong = if case.sender == Sender::Discord {
        OTHER_SEED
    } else {
        "not-the-secret"
    };
    let (s, _) = send(
        h,
        case,
        &sample,
        &body,
        &signed(case, wrong, Some(&id), &body, now),
    )
    .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{name}: another secret");
    if case.timestamped {
        let old = now - 600;
        let stale_id = format!("{name}-delivery-3");
        let stale = sample_for(case, case.event, &stale_id, old);
        let stale_body = stale.body_text();
        let stale_sig = signed(case, case.secret, Some(&stale_id), &stale_body, old);
        let (s, _) = send(h, case, &stale, &stale_body, &stale_sig).await;
        assert_eq!(
            s,
            StatusCode::UNAUTHORIZED,
            "{name}: a 10-minute-old timestamp"
        );
    }
}

fn start_all() -> (Herald, String) {
    let key = discord_public_key(DISCORD_SEED);
    let h = Herald::start(&config_with_routes(&routes_yaml(&key)));
    (h, key)
}

#[tokio::test]
async fn every_preset_with_the_senders_own_code() {
    let (h, _) = start_all();
    for case in CASES {
        check_case(&h, case).await;
    }
    // Each accepted event is in the inbox once, under the sender's delivery id.
    let inbox = h.inbox();
    for case in CASES {
        let name = case.sender.name();
        let ids: Vec<&str> = inbox
            .iter()
            .filter(|e| e["route"] == name)
            .filter_map(|e| e["delivery_id"].as_str())
            .collect();
        assert_eq!(ids, vec![format!("{name}-delivery-1")], "{name}");
    }
    // The sender's event and delivery headers are kept; a token route's secret is not.
    let entry = |route: &str| inbox.iter().find(|e| e["route"] == route).unwrap();
    assert_eq!(
        entry("shopify")["headers"]["x-shopify-topic"],
        "orders/create"
    );
    assert_eq!(entry("bitbucket")["headers"]["x-event-key"], "repo:push");
    let token_headers = entry("token")["headers"].to_string();
    assert!(!token_headers.contains("alert-token"), "{token_headers}");
    let log = h.log();
    for case in CASES {
        assert!(
            !log.contains(case.secret),
            "{} secret logged",
            case.sender.name()
        );
    }
}

#[tokio::test]
async fn handshakes_are_answered_inline_and_never_enqueued() {
    let (h, _) = start_all();
    let now = now();
    let slack = &CASES[3];
    let challenge = r#"{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
    let sig = signed(slack, slack.secret, None, challenge, now);
    let (s, b) = send(
        &h,
        slack,
        &Sample {
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: Value::Null,
        },
        challenge,
        &sig,
    )
    .await;
    assert_eq!(
        (s, b),
        (
            StatusCode::OK,
            json!({"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"})
        )
    );
    // A forged handshake is refused like any request.
    let forged = signed(slack, "wrong", None, challenge, now);
    let (s, _) = send(
        &h,
        slack,
        &Sample {
            headers: vec![],
            body: Value::Null,
        },
        challenge,
        &forged,
    )
    .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let discord = &CASES[12];
    for (body, want) in [
        (
            r#"{"id":"1","application_id":"2","type":1,"token":"t","version":1}"#,
            json!({"type": 1}),
        ),
        (
            r#"{"id":"3","application_id":"2","type":4,"token":"t","version":1,"data":{"name":"ask"}}"#,
            json!({"type": 8, "data": {"choices": []}}),
        ),
    ] {
        let sig = signed(discord, DISCORD_SEED, None, body, now);
        let (s, b) = send(
            &h,
            discord,
            &Sample {
                headers: vec![],
                body: Value::Null,
            },
            body,
            &sig,
        )
        .await;
        assert_eq!((s, b), (StatusCode::OK, want));
    }
    assert!(h.inbox().is_empty(), "a handshake reached the inbox");
}

#[tokio::test]
async fn jira_connect_webhooks_are_refused_with_the_reason() {
    let routes = "        jira:\n          source: jira\n          secret: s\n";
    let h = Herald::start(&config_with_routes(routes));
    let (s, _) = h
        .post(
            "/webhooks/jira",
            "{}",
            &[("authorization", "JWT eyJhbGciOiJIUzI1NiJ9.e30.x".to_owned())],
        )
        .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let log = h.log_once_it_has("admin webhook");
    assert!(log.contains("JWT"), "{log}");
    // A preset never falls back to header detection: GitHub's signature is not Jira's.
    let (s, _) = h
        .post(
            "/webhooks/jira",
            "{}",
            &[(
                "x-hub-signature-256",
                herald_webhook::verify::sign::github("s", b"{}"),
            )],
        )
        .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_discord_interaction_is_deferred_then_answered_by_editing_it() {
    let provider = FakeProvider::start(vec![Scripted::text("The build is green.")]);
    let discord = Fake::start(Reply::json(200, json!({"id": "m1"})));
    let key = discord_public_key(DISCORD_SEED);
    let routes = format!(
        "        ask:\n          source: discord\n          public_key: {key}\n          prompt: 'Answer {{data.options}}'\n        hello:\n          source: discord\n          public_key: {key}\n          deliver_only: true\n          deliver: discord\n          prompt: 'Hello {{member.user.username}}'\n"
    );
    let config = super::agent_runs::agent_config(&provider.base_url, "", &routes);
    let base = format!("{}/api/v10", discord.base);
    let h = Herald::start_with(&config, &[("DISCORD_BASE_URL", &base)]);
    let body = sample::bundled(Sender::Discord).body_text();
    let interaction: Value = serde_json::from_str(&body).unwrap();
    let case = &CASES[12];
    let sig = signed(case, DISCORD_SEED, None, &body, now());
    let post = |route: &'static str| {
        let headers: Vec<(&str, String)> =
            sig.0.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        let body = body.clone();
        let h = &h;
        async move { h.post(&format!("/webhooks/{route}"), body, &headers).await }
    };
    let (s, b) = post("ask").await;
    assert_eq!((s, b), (StatusCode::OK, json!({"type": 5})));
    let edit = wait_for(Duration::from_secs(20), "the edit of @original", || {
        discord.requests().into_iter().find(|r| r.method == "PATCH")
    })
    .await;
    let app = interaction["application_id"].as_str().unwrap();
    let token = interaction["token"].as_str().unwrap();
    assert_eq!(
        edit.path,
        format!("/api/v10/webhooks/{app}/{token}/messages/@original")
    );
    assert_eq!(edit.body, json!({"content": "The build is green."}));
    assert!(
        edit.headers.get("authorization").is_none(),
        "the interaction token is the credential"
    );
    // A direct route answers with the message itself, at once.
    let (s, b) = post("hello").await;
    let user = interaction["member"]["user"]["username"].as_str().unwrap();
    assert_eq!(
        (s, b),
        (
            StatusCode::OK,
            json!({"type": 4, "data": {"content": format!("Hello {user}")}})
        )
    );
}

#[test]
fn config_check_and_the_start_name_what_is_wrong() {
    // An unknown source stops the start, with did-you-mean.
    let (code, err) = start_expect_failure(&config_with_routes(
        "        pay:\n          source: strpe\n          secret: s\n",
    ));
    assert_ne!(code, 0);
    assert!(
        err.contains("unknown source \"strpe\"") && err.contains("did you mean `stripe`"),
        "{err}"
    );
    // Where: the file, the line and the column of `source:`.
    assert!(err.contains("config.yaml:11:11:"), "{err}");
    // A preset's required setting.
    let (code, err) = start_expect_failure(&config_with_routes(
        "        bot:\n          source: discord\n        sms:\n          source: twilio\n          secret: s\n",
    ));
    assert_ne!(code, 0);
    assert!(
        err.contains("`source: discord` needs `public_key:`"),
        "{err}"
    );
    assert!(
        err.contains("`source: twilio` needs `public_url:`"),
        "{err}"
    );
    // A token in a header herald shows as a delivery id would be shown with it.
    let (code, err) = start_expect_failure(&config_with_routes(
        "        alerts:\n          source: token\n          header: X-Request-ID\n",
    ));
    assert_ne!(code, 0);
    assert!(
        err.contains("a header herald reads as an event type or delivery id"),
        "{err}"
    );
    // The seed's top-level `webhooks: routes:` and a profile route with multiplexing off.
    let home = tempfile::tempdir().unwrap();
    let config = format!(
        "{}webhooks:\n  routes:\n    forum:\n      prompt: x\n",
        config_with_routes("        p:\n          profile: work\n          prompt: x\n")
    );
    std::fs::write(home.path().join("config.yaml"), config).unwrap();
    let (_, out, _) = run_cli(home.path(), &["config", "check"]);
    assert!(
        out.contains("top-level `webhooks: routes:`")
            && out.contains("platforms.webhook.extra.routes"),
        "{out}"
    );
    assert!(out.contains("route `p` has `profile: work`"), "{out}");
    // The start says both too, and serves anyway.
    let h = Herald::start_in(home, &[]);
    let log = h.log_once_it_has("route `p` has `profile: work`");
    assert!(log.contains("top-level `webhooks: routes:`"), "{log}");
}

#[tokio::test]
async fn subscribe_list_and_test_know_the_presets() {
    let h = Herald::start(&config_with_routes("        gh:\n          prompt: x\n"));
    h.point_cli_here();
    let (code, out, _) = h.cli(&["webhook", "subscribe", "pay", "--source", "strpe"]);
    assert_eq!(code, 1);
    assert!(out.contains("did you mean `stripe`"), "{out}");
    let (code, out, _) = h.cli(&["webhook", "subscribe", "bot", "--source", "discord"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("needs `public_key:`"), "{out}");
    let (code, out, err) = h.cli(&[
        "webhook",
        "subscribe",
        "pay",
        "--source",
        "stripe",
        "--secret",
        "whsec_abc",
        "--events",
        "payment_intent.succeeded",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Source: stripe"), "{out}");
    // Twilio makes the secret (the Auth Token): a generated one would never match.
    let sms = [
        "webhook",
        "subscribe",
        "sms",
        "--source",
        "twilio",
        "--public-url",
        TWILIO_URL,
    ];
    let (code, out, _) = h.cli(&sms);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("twilio makes the signing secret itself"),
        "{out}"
    );
    let (code, out, err) = h.cli(&[&sms[..], &["--secret", "twilio-auth-token"]].concat());
    assert_eq!(code, 0, "{out}{err}");
    let (_, out, _) = h.cli(&["webhook", "list"]);
    assert!(
        out.contains("Source:  stripe") && out.contains("Source:  twilio"),
        "{out}"
    );
    assert!(
        out.contains("Source:  (detected from the request's headers)"),
        "{out}"
    );
    // `webhook test` sends the preset's sample, signed as the sender signs.
    let (code, out, err) = h.cli(&["webhook", "test", "pay"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("\"status\":\"accepted\""), "{out}");
    // Twilio is answered TwiML: the inbox says it was taken.
    let (code, out, err) = h.cli(&["webhook", "test", "sms"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Response (200): <?xml"), "{out}");
    // `--payload @FILE`: your own body, its own event type, signed the same way.
    let own = h.home().join("refund.json");
    std::fs::write(
        &own,
        r#"{"id": "evt_own", "type": "charge.refunded", "data": {}}"#,
    )
    .unwrap();
    let at_file = format!("@{}", own.display());
    let (code, out, _) = h.cli(&["webhook", "test", "pay", "--payload", &at_file]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("\"status\":\"ignored\"") && out.contains("charge.refunded"),
        "{out}"
    );
    let (code, out, _) = h.cli(&[
        "webhook",
        "test",
        "pay",
        "--payload",
        &at_file,
        "--event",
        "payment_intent.succeeded",
    ]);
    assert_eq!(code, 0, "{out}");
    // A file past the gateway's body limit is refused before it is read.
    let big = h.home().join("big.json");
    std::fs::write(&big, vec![b' '; 2 * 1024 * 1024]).unwrap();
    let (code, out, _) = h.cli(&[
        "webhook",
        "test",
        "pay",
        "--payload",
        &format!("@{}", big.display()),
    ]);
    assert_eq!(code, 1);
    assert!(out.contains("over the webhook's max_body_bytes"), "{out}");
    let inbox = h.inbox();
    let pay: Vec<&Value> = inbox.iter().filter(|e| e["route"] == "pay").collect();
    assert_eq!(
        pay.len(),
        2,
        "the sample and the file sent as the route's event"
    );
    assert!(
        pay.iter()
            .all(|e| e["event_type"] == "payment_intent.succeeded")
    );
    let sms = inbox.iter().find(|e| e["route"] == "sms").unwrap();
    assert!(
        sms["delivery_id"]
            .as_str()
            .unwrap()
            .starts_with("herald-test-"),
        "{sms}"
    );
    // A hand-edited subscription naming an unknown source is skipped, never detected.
    let file = h.home().join("webhook_subscriptions.json");
    let mut subs: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    subs["pay"]["source"] = json!("strip");
    std::fs::write(&file, subs.to_string()).unwrap();
    let (s, b) = h
        .post(
            "/webhooks/pay",
            "{}",
            &[(
                "stripe-signature",
                sign::stripe("whsec_abc", &now().to_string(), b"{}"),
            )],
        )
        .await;
    assert_eq!(
        (s, b),
        (
            StatusCode::NOT_FOUND,
            json!({"error": "Unknown route: pay"})
        )
    );
    let (_, out, _) = h.cli(&["config", "check"]);
    assert!(
        out.contains("subscription `pay.source` is not served")
            && out.contains("did you mean `stripe`"),
        "{out}"
    );
}

#[test]
fn webhook_test_says_why_discord_cannot_be_sent() {
    let key = "a".repeat(64);
    let home = tempfile::tempdir().unwrap();
    let routes = format!("        bot:\n          source: discord\n          public_key: {key}\n");
    std::fs::write(home.path().join("config.yaml"), config_with_routes(&routes)).unwrap();
    let (code, out, _) = run_cli(home.path(), &["webhook", "test", "bot"]);
    assert_eq!(code, 1);
    assert!(out.contains("private key"), "{out}");
}

#[tokio::test]
async fn insecure_no_auth_never_turns_off_a_public_key_check() {
    let routes = format!(
        "        bot:\n          source: discord\n          public_key: {}\n        open:\n          source: stripe\n",
        "a".repeat(64)
    );
    let config = config_with_routes(&routes)
        .replace(&format!("secret: {SECRET}"), "secret: INSECURE_NO_AUTH");
    let h = Herald::start(&config);
    let (s, _) = h.post("/webhooks/bot", r#"{"type":1}"#, &[]).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    // A secret-keyed preset follows the loopback-only opt-out as every route does.
    let (s, b) = h
        .post("/webhooks/open", r#"{"type":"x","id":"evt_1"}"#, &[])
        .await;
    assert_eq!(
        (s, b["status"].as_str()),
        (StatusCode::ACCEPTED, Some("accepted"))
    );
}

#[tokio::test]
async fn what_real_senders_also_do() {
    let (h, _) = start_all();
    let now = now();
    // Stripe during a secret roll: one header, a v1 for each secret, from Stripe's SDK.
    let stripe = &CASES[0];
    let id = "evt_roll";
    let sample = sample_for(stripe, stripe.event, id, now);
    let body = sample.body_text();
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &body).unwrap();
    let rolled = sign_py(&[
        "stripe",
        "--secret",
        "whsec_the_old_one",
        "--secret2",
        stripe.secret,
        "--body-file",
        file.path().to_str().unwrap(),
        "--timestamp",
        &now.to_string(),
    ]);
    let header = rolled["headers"]["Stripe-Signature"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(header.matches("v1=").count(), 2, "{header}");
    let sig = (vec![("Stripe-Signature".to_owned(), header)], None);
    let (s, b) = send(&h, stripe, &sample, &body, &sig).await;
    assert_eq!(
        (s, b["status"].as_str()),
        (StatusCode::ACCEPTED, Some("accepted")),
        "{b}"
    );
    // Stripe's SDK sets no bound on a timestamp ahead of the receiver's clock.
    let ahead = sample_for(stripe, stripe.event, "evt_ahead", now + 600);
    let ahead_body = ahead.body_text();
    let sig = signed(stripe, stripe.secret, None, &ahead_body, now + 600);
    let (s, b) = send(&h, stripe, &ahead, &ahead_body, &sig).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    // Shopify's event-style webhooks: the same headers without `X-`.
    let shopify = &CASES[2];
    let sample = sample_for(shopify, shopify.event, "unused", now);
    let body = sample.body_text();
    let sig = signed(shopify, shopify.secret, None, &body, now);
    let bare =
        |(k, v): &(String, String)| (k.trim_start_matches("X-").to_ascii_lowercase(), v.clone());
    let events_style = Sample {
        headers: sample
            .headers
            .iter()
            .filter(|(k, _)| !k.eq_ignore_ascii_case("X-Shopify-Event-Id"))
            .map(
                |(k, v)| match k.eq_ignore_ascii_case("X-Shopify-Webhook-Id") {
                    true => ("shopify-webhook-id".to_owned(), "wh-events-1".to_owned()),
                    false => bare(&(k.clone(), v.clone())),
                },
            )
            .collect(),
        body: Value::Null,
    };
    let sig = (sig.0.iter().map(bare).collect(), None);
    let (s, b) = send(&h, shopify, &events_style, &body, &sig).await;
    assert_eq!(
        (s, b["delivery_id"].as_str()),
        (StatusCode::ACCEPTED, Some("wh-events-1")),
        "{b}"
    );
    // Twilio with a JSON body: covered by `bodySHA256` in the URL Twilio's SDK signs.
    let twilio = &CASES[11];
    let json_body = r#"{"MessageSid": "SMjson", "MessageStatus": "delivered"}"#;
    let json_sample = Sample {
        headers: vec![
            ("Content-Type".into(), "application/json".into()),
            ("I-Twilio-Idempotency-Token".into(), "twilio-json-1".into()),
        ],
        body: Value::Null,
    };
    let sig = signed(twilio, twilio.secret, None, json_body, now);
    assert!(
        sig.1
            .as_deref()
            .is_some_and(|q| q.starts_with("bodySHA256=")),
        "{sig:?}"
    );
    let (s, b) = send(&h, twilio, &json_sample, json_body, &sig).await;
    assert_eq!((s, b), (StatusCode::OK, json!(EMPTY_TWIML)));
    let tampered = json_body.replace("SMjson", "SMother");
    let (s, _) = send(&h, twilio, &json_sample, &tampered, &sig).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert!(
        h.inbox()
            .iter()
            .any(|e| e["delivery_id"] == "twilio-json-1")
    );
    // Twilio without an idempotency token: a message's status callbacks are told apart by
    // their status, a repeated one is a duplicate.
    let mut sample = sample::bundled(Sender::Twilio);
    sample
        .headers
        .retain(|(k, _)| !k.eq_ignore_ascii_case("I-Twilio-Idempotency-Token"));
    let before = h.inbox().len();
    for status in ["sent", "delivered", "delivered", "undelivered"] {
        let mut s_ = sample.clone();
        s_.set_event_type(Sender::Twilio, status);
        let body = s_.body_text();
        let sig = signed(twilio, twilio.secret, None, &body, now);
        let (s, b) = send(&h, twilio, &s_, &body, &sig).await;
        assert_eq!((s, b), (StatusCode::OK, json!(EMPTY_TWIML)), "{status}");
    }
    // Only "delivered" is in the route's events: once, under the SID and the status.
    let inbox = h.inbox();
    let sid = "SM0e3f1b2c4d5a6978e0f1a2b3c4d5e6f7";
    let ids: Vec<&str> = inbox
        .iter()
        .filter(|e| e["route"] == "twilio")
        .filter_map(|e| e["delivery_id"].as_str())
        .collect();
    assert!(
        ids.contains(&format!("{sid}:delivered").as_str()),
        "{ids:?}"
    );
    assert_eq!(inbox.len(), before + 1);
}

/// With an Interactions Endpoint URL on the application, Discord posts the chat door's
/// approval button presses to a `source: discord` route: the route hands the press to
/// the Discord chat door (a deferred update within Discord's 3 s), which lets the
/// command run and edits the message; the start names the route the endpoint serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discord_button_press_at_the_interactions_endpoint_reaches_the_chat_door() {
    use herald_test_support::discord::{FakeDiscord, TOKEN};
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("one.txt");
    std::fs::write(&file, "x").unwrap();
    let args = json!({"command": format!("rm -f {}", file.display())}).to_string();
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("c1", "terminal", args.as_str())]),
        Scripted::text("removed"),
    ]);
    let discord = FakeDiscord::start();
    discord.set_interactions_endpoint("https://bot.example.com/webhooks/presses");
    let key = discord_public_key(DISCORD_SEED);
    let routes =
        format!("        presses:\n          source: discord\n          public_key: {key}\n");
    let config = super::agent_runs::agent_config(&provider.base_url, "", &routes);
    let h = Herald::start_with(
        &config,
        &[
            ("DISCORD_BOT_TOKEN", TOKEN),
            ("DISCORD_BASE_URL", &discord.base_url),
            ("DISCORD_ALLOWED_USERS", "11"),
        ],
    );
    wait_for(Duration::from_secs(30), "the gateway", || {
        (discord.connections().2 >= 1).then_some(())
    })
    .await;
    assert!(
        h.log_once_it_has("the `source: discord` route")
            .contains("presses")
    );
    discord.dm("400", "11", "clean up");
    let (_, asked) = discord.wait_call(
        "POST",
        "/channels/400/messages",
        Duration::from_secs(30),
        |b| b.get("components").is_some(),
    );
    let once = asked["components"][0]["components"][0]["custom_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let message = asked["_id"].as_str().unwrap().to_owned();
    let press = json!({
        "id": "1300000000000000001", "application_id": "1", "type": 3, "token": "tok-press",
        "channel_id": "400", "user": {"id": "11", "username": "user11"},
        "message": {"id": message, "channel_id": "400"},
        "data": {"custom_id": once, "component_type": 2}, "version": 1,
    })
    .to_string();
    let sig = signed(&CASES[12], DISCORD_SEED, None, &press, now());
    let headers: Vec<(&str, String)> = sig.0.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let (status, body) = h.post("/webhooks/presses", press.clone(), &headers).await;
    assert_eq!((status, body), (StatusCode::OK, json!({"type": 6})));
    assert_eq!(
        discord.wait_posted("400", 2, Duration::from_secs(30))[1],
        "removed"
    );
    assert!(!file.exists());
    discord.wait_call(
        "PATCH",
        &format!("/channels/400/messages/{message}"),
        Duration::from_secs(30),
        |b| b["components"] == json!([]),
    );
    // The same press again (Discord's retry) is kept once and changes nothing.
    let (status, _) = h.post("/webhooks/presses", press, &headers).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(provider.requests().len(), 2);
}
