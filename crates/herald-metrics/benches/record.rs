//! What recording costs on the webhook hot path: one filtered request counts its
//! outcome and its body bytes (compare with a filtered request's whole CPU in
//! docs/performance.md).

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;

fn filtered_request(m: &herald_metrics::Metrics) {
    m.webhook
        .body_read(black_box("github-pulls"), black_box(2049));
    m.webhook
        .request(Some(black_box("github-pulls")), black_box("filtered"));
}

fn bench(c: &mut Criterion) {
    herald_metrics::enable();
    let m = herald_metrics::get();
    c.bench_function("webhook_request_recorded", |b| {
        b.iter(|| filtered_request(m))
    });
    // With the dashboard on, each route's requests per minute are counted as well.
    herald_metrics::enable_traffic();
    c.bench_function("webhook_request_recorded_with_dashboard", |b| {
        b.iter(|| filtered_request(m))
    });
    c.bench_function("webhook_request_unrecorded_unknown", |b| {
        b.iter(|| m.webhook.request(None, black_box("unknown_route")))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
