//! Arbitrary signature headers and bodies: verification never panics, and a request
//! signed with the right secret verifies while the same request under another secret
//! does not.
#![no_main]

use herald_webhook::verify::{FixedClock, sign, verify};
use http::{HeaderMap, HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;

const NAMES: [&str; 10] = [
    "x-hub-signature-256", "x-gitlab-token", "x-webhook-signature-v2", "x-webhook-timestamp",
    "x-webhook-signature", "webhook-id", "webhook-timestamp", "webhook-signature", "svix-id", "svix-signature",
];

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let (control, rest) = data.split_at(4);
    let split = rest.len() / 2;
    let (header_bytes, body) = rest.split_at(split);
    let now = 1_800_000_000i64;
    // Arbitrary headers from the first half.
    let mut headers = HeaderMap::new();
    for (i, chunk) in header_bytes.chunks(24).enumerate() {
        let name = NAMES[(control[i % 4] as usize + i) % NAMES.len()];
        if let Ok(v) = HeaderValue::from_bytes(chunk) {
            headers.append(HeaderName::from_static(name), v);
        }
    }
    let _ = verify("fuzz-secret", &headers, body, &FixedClock(now));
    let _ = verify("whsec_Zm9vYmFy", &headers, body, &FixedClock(now));

    // Property: correct signatures verify, other secrets do not.
    let mut gh = HeaderMap::new();
    gh.insert("x-hub-signature-256", HeaderValue::from_str(&sign::github("right", body)).unwrap());
    assert!(verify("right", &gh, body, &FixedClock(now)).is_ok());
    assert!(verify("wrong", &gh, body, &FixedClock(now)).is_err());
    let ts = (now - i64::from(control[0]) % 300).to_string();
    if let Ok(sig) = sign::standard("whsec_Zm9vYmFy", "msg", &ts, body) {
        let mut std = HeaderMap::new();
        std.insert("webhook-id", HeaderValue::from_static("msg"));
        std.insert("webhook-timestamp", HeaderValue::from_str(&ts).unwrap());
        std.insert("webhook-signature", HeaderValue::from_str(&sig).unwrap());
        assert!(verify("whsec_Zm9vYmFy", &std, body, &FixedClock(now)).is_ok());
        assert!(verify("whsec_YmFyYmF6", &std, body, &FixedClock(now)).is_err());
    }
});
