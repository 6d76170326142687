//! Signing then verifying succeeds; changing any byte of body, id, timestamp or
//! signature fails.

use herald_webhook::verify::{FixedClock, sign, verify};
use http::{HeaderMap, HeaderValue};
use proptest::prelude::*;

const NOW: i64 = 1_800_000_000;

fn headers(pairs: &[(&'static str, String)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.insert(*k, HeaderValue::from_str(v).unwrap());
    }
    h
}

fn flip(bytes: &[u8], index: usize, xor: u8) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let i = index % out.len();
    out[i] ^= xor;
    out
}

proptest! {
    #[test]
    fn github_roundtrip_and_tamper(secret in "[ -~]{1,40}", body in proptest::collection::vec(any::<u8>(), 1..512), idx in any::<usize>(), xor in 1u8..=255) {
        let sig = sign::github(&secret, &body);
        let h = headers(&[("x-hub-signature-256", sig)]);
        prop_assert!(verify(&secret, &h, &body, &FixedClock(NOW)).is_ok());
        prop_assert!(verify(&secret, &h, &flip(&body, idx, xor), &FixedClock(NOW)).is_err());
    }

    #[test]
    fn generic_v2_roundtrip_and_tamper(secret in "[!-~]{1,40}", body in proptest::collection::vec(any::<u8>(), 1..512), skew in -300i64..=300, idx in any::<usize>(), xor in 1u8..=255) {
        let ts = (NOW + skew).to_string();
        let sig = sign::generic_v2(&secret, &ts, &body);
        let h = headers(&[("x-webhook-signature-v2", sig.clone()), ("x-webhook-timestamp", ts.clone())]);
        prop_assert!(verify(&secret, &h, &body, &FixedClock(NOW)).is_ok());
        prop_assert!(verify(&secret, &h, &flip(&body, idx, xor), &FixedClock(NOW)).is_err());
        let other_ts = (NOW + skew + 1).to_string();
        let h2 = headers(&[("x-webhook-signature-v2", sig), ("x-webhook-timestamp", other_ts)]);
        prop_assert!(verify(&secret, &h2, &body, &FixedClock(NOW)).is_err());
    }

    #[test]
    fn standard_roundtrip_and_tamper(key in proptest::collection::vec(any::<u8>(), 1..64), id in "[a-zA-Z0-9_]{1,30}", body in proptest::collection::vec(any::<u8>(), 1..512), skew in -300i64..=300, idx in any::<usize>(), xor in 1u8..=255, svix in any::<bool>()) {
        use base64::Engine;
        let secret = format!("whsec_{}", base64::engine::general_purpose::STANDARD.encode(&key));
        let ts = (NOW + skew).to_string();
        let sig = sign::standard(&secret, &id, &ts, &body).unwrap();
        let names = if svix { ["svix-id", "svix-timestamp", "svix-signature"] } else { ["webhook-id", "webhook-timestamp", "webhook-signature"] };
        let h = headers(&[(names[0], id.clone()), (names[1], ts.clone()), (names[2], sig.clone())]);
        prop_assert!(verify(&secret, &h, &body, &FixedClock(NOW)).is_ok());
        prop_assert!(verify(&secret, &h, &flip(&body, idx, xor), &FixedClock(NOW)).is_err());
        let changed_id = format!("{id}x");
        let h_id = headers(&[(names[0], changed_id), (names[1], ts.clone()), (names[2], sig.clone())]);
        prop_assert!(verify(&secret, &h_id, &body, &FixedClock(NOW)).is_err());
        let h_ts = headers(&[(names[0], id.clone()), (names[1], (NOW + skew - 1).to_string()), (names[2], sig.clone())]);
        prop_assert!(verify(&secret, &h_ts, &body, &FixedClock(NOW)).is_err());
        // Any change to the signature's characters fails.
        let bad_sig = String::from_utf8(flip(sig.as_bytes(), 3 + idx % (sig.len() - 3), 1)).unwrap_or_default();
        if let Ok(v) = HeaderValue::from_str(&bad_sig) {
            let mut h_sig = h.clone();
            h_sig.insert(names[2], v);
            prop_assert!(verify(&secret, &h_sig, &body, &FixedClock(NOW)).is_err());
        }
    }

    #[test]
    fn arbitrary_headers_never_panic(name_idx in 0usize..9, value in proptest::collection::vec(any::<u8>(), 0..100), body in proptest::collection::vec(any::<u8>(), 0..100)) {
        let names = ["x-hub-signature-256", "x-gitlab-token", "x-webhook-signature-v2", "x-webhook-timestamp", "x-webhook-signature", "webhook-signature", "webhook-timestamp", "svix-id", "svix-signature"];
        let mut h = HeaderMap::new();
        if let Ok(v) = HeaderValue::from_bytes(&value) {
            h.insert(names[name_idx], v);
        }
        let _ = verify("secret", &h, &body, &FixedClock(NOW));
        let _ = verify("whsec_!!notbase64", &h, &body, &FixedClock(NOW));
    }
}
