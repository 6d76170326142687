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

criterion_group!(benches, bench);
criterion_main!(benches);
