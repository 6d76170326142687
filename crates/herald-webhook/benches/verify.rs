//! Signature verification on a ~2 KB GitHub pull_request payload, per scheme.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use herald_webhook::verify::{FixedClock, sign, verify};
use http::{HeaderMap, HeaderValue};
use std::hint::black_box;

const BODY: &[u8] = include_bytes!("../tests/fixtures/github_pull_request_opened.json");
const NOW: i64 = 1_800_000_000;

fn headers(pairs: &[(&'static str, String)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.insert(
            *k,
            HeaderValue::from_str(v).unwrap_or(HeaderValue::from_static("")),
        );
    }
    h
}

fn bench(c: &mut Criterion) {
    let secret = "bench-secret";
    let ts = NOW.to_string();
    let whsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let cases = [
        (
            "github",
            secret,
            headers(&[("x-hub-signature-256", sign::github(secret, BODY))]),
        ),
        (
            "github_bad",
            secret,
            headers(&[("x-hub-signature-256", sign::github("other", BODY))]),
        ),
        (
            "generic_v2",
            secret,
            headers(&[
                (
                    "x-webhook-signature-v2",
                    sign::generic_v2(secret, &ts, BODY),
                ),
                ("x-webhook-timestamp", ts.clone()),
            ]),
        ),
        (
            "gitlab_token",
            secret,
            headers(&[("x-gitlab-token", secret.to_owned())]),
        ),
        (
            "standard",
            whsec,
            headers(&[
                ("webhook-id", "msg_1".to_owned()),
                ("webhook-timestamp", ts.clone()),
                (
                    "webhook-signature",
                    sign::standard(whsec, "msg_1", &ts, BODY).unwrap_or_default(),
                ),
            ]),
        ),
    ];
    let mut group = c.benchmark_group("verify");
    group.throughput(Throughput::Bytes(BODY.len() as u64));
    for (name, secret, h) in &cases {
        group.bench_function(*name, |b| {
            b.iter(|| {
                verify(
                    black_box(secret),
                    black_box(h),
                    black_box(BODY),
                    &FixedClock(NOW),
                )
            })
        });
    }
    group.finish();
}

/// Each sender preset on the same body, signed as its sender signs (Discord with a fixed
/// seed; Linear's body carries its `webhookTimestamp`).
fn bench_presets(c: &mut Criterion) {
    use herald_webhook::sender::{self, Sender, SenderPreset, SignedRequest, sign as preset_sign};
    let linear_body = {
        let mut v: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(BODY).unwrap_or_default();
        preset_sign::stamp_linear(&mut v, NOW * 1000);
        serde_json::Value::Object(v).to_string().into_bytes()
    };
    let mut group = c.benchmark_group("preset");
    group.throughput(Throughput::Bytes(BODY.len() as u64));
    for s in Sender::ALL {
        let body: &[u8] = if s == Sender::Linear {
            &linear_body
        } else {
            BODY
        };
        let mut p = SenderPreset::new(s);
        p.public_url = Some("https://herald.example.com/webhooks/bench".into());
        let mut headers = HeaderMap::new();
        let signed = match s {
            Sender::Discord => {
                let ts = NOW.to_string();
                let Some((sig, public)) = preset_sign::discord(&[7; 32], &ts, body) else {
                    continue;
                };
                p.public_key = sender::parse_public_key(&public);
                preset_sign::Signed {
                    headers: vec![
                        ("x-signature-ed25519".into(), sig),
                        ("x-signature-timestamp".into(), ts),
                    ],
                    query: None,
                }
            }
            _ => match preset_sign::request(&p, "bench-secret", body, NOW, Some("msg_1")) {
                Ok(signed) => signed,
                Err(_) => continue,
            },
        };
        for (k, v) in &signed.headers {
            if let (Ok(k), Ok(v)) = (
                http::HeaderName::from_bytes(k.as_bytes()),
                HeaderValue::from_str(v),
            ) {
                headers.append(k, v);
            }
        }
        let request = SignedRequest {
            headers: &headers,
            body,
            query: signed.query.as_deref(),
        };
        assert!(
            sender::verify(&p, "bench-secret", &request, &FixedClock(NOW)).is_ok(),
            "{s}"
        );
        group.bench_function(s.name(), |b| {
            b.iter(|| {
                sender::verify(
                    black_box(&p),
                    "bench-secret",
                    black_box(&request),
                    &FixedClock(NOW),
                )
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench, bench_presets);
criterion_main!(benches);
