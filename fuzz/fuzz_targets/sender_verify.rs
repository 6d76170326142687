//! Every sender preset on arbitrary headers, bodies and query strings: verification,
//! event type, delivery id and handshake never panic; a request signed as the sender
//! signs verifies, and the same request under another secret does not.
#![no_main]

use herald_webhook::sender::{self, Sender, SenderPreset, SignedRequest, sign};
use herald_webhook::verify::FixedClock;
use http::{HeaderMap, HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;

const NAMES: [&str; 16] = [
    "stripe-signature", "x-hub-signature", "x-shopify-hmac-sha256", "x-slack-signature",
    "x-slack-request-timestamp", "linear-signature", "x-pagerduty-signature", "sentry-hook-signature",
    "paddle-signature", "x-twilio-signature", "x-signature-ed25519", "x-signature-timestamp",
    "authorization", "x-shopify-topic", "x-event-key", "webhook-id",
];

fn preset(sender: Sender) -> SenderPreset {
    let mut p = SenderPreset::new(sender);
    p.public_url = Some("https://h.example/webhooks/t".into());
    p.public_key = Some([9; 32]);
    p
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let (control, rest) = data.split_at(4);
    let sender = Sender::ALL[control[0] as usize % Sender::ALL.len()];
    let split = rest.len() / 2;
    let (header_bytes, body) = rest.split_at(split);
    let now = 1_800_000_000i64;
    let mut headers = HeaderMap::new();
    for (i, chunk) in header_bytes.chunks(24).enumerate() {
        let name = NAMES[(control[i % 4] as usize + i) % NAMES.len()];
        if let Ok(v) = HeaderValue::from_bytes(chunk) {
            headers.append(HeaderName::from_static(name), v);
        }
    }
    let query = std::str::from_utf8(header_bytes).ok();
    let p = preset(sender);
    let request = SignedRequest { headers: &headers, body, query };
    let _ = sender::verify(&p, "fuzz-secret", &request, &FixedClock(now));
    if let Ok(payload) = herald_webhook::parse_body(body, None) {
        let _ = sender::event_type(sender, &headers, &payload);
        let _ = sender::delivery_id(sender, &headers, &payload);
        let _ = sender::handshake(sender, &payload);
    }

    // Property: what the sender signs verifies; another secret does not. (Linear's
    // timestamp lives in the body, Discord needs a private key, a token covers no body.)
    if matches!(sender, Sender::Discord | Sender::Linear) {
        return;
    }
    let Ok(signed) = sign::request(&p, "right", body, now, Some("msg_1")) else {
        return;
    };
    let mut good = HeaderMap::new();
    for (k, v) in &signed.headers {
        good.append(
            HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    let request = SignedRequest { headers: &good, body, query: signed.query.as_deref() };
    assert!(sender::verify(&p, "right", &request, &FixedClock(now)).is_ok(), "{sender}");
    assert!(sender::verify(&p, "wrong", &request, &FixedClock(now)).is_err(), "{sender}");
});
