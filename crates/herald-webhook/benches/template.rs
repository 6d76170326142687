//! Template rendering against a ~2 KB pull_request payload.

use criterion::{Criterion, criterion_group, criterion_main};
use herald_webhook::parse_body;
use herald_webhook::template::{RenderContext, Template, default_prompt};
use serde_json::json;
use std::hint::black_box;

const BODY: &[u8] = include_bytes!("../tests/fixtures/github_pull_request_opened.json");

fn bench(c: &mut Criterion) {
    let payload = parse_body(BODY, None).unwrap_or_default();
    let ev = json!("pull_request");
    let ctx = RenderContext {
        payload: &payload,
        event_type: &ev,
        raw: None,
    };
    let typical = Template::compile(
        "Review PR #{number} '{pull_request.title}' by {pull_request.user.login} in {repository.full_name}:\n{pull_request.body}\nLabels: {pull_request.labels}",
    );
    let raw = Template::compile("Event {event_type}: {__raw__}");
    let mut group = c.benchmark_group("template");
    group.bench_function("compile_typical", |b| {
        b.iter(|| {
            Template::compile(black_box(
                "Review PR #{number} '{pull_request.title}' by {pull_request.user.login}",
            ))
        })
    });
    group.bench_function("render_typical", |b| {
        b.iter(|| typical.render(black_box(&ctx)))
    });
    group.bench_function("render_raw", |b| b.iter(|| raw.render(black_box(&ctx))));
    group.bench_function("default_prompt", |b| {
        b.iter(|| default_prompt("github-pr", black_box(&ctx)))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
