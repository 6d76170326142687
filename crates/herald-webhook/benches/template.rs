//! Template rendering against a ~2 KB pull_request payload, and reading that payload.

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
        text: None,
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

    // What the ingress pays to read the body: the full parse, the pick of a typical
    // route's paths, and (inside both) the scan for numbers a tree cannot hold.
    let mut paths = herald_webhook::pick::PayloadPaths::new();
    typical.add_paths(&mut paths);
    let mut group = c.benchmark_group("payload");
    group.bench_function("parse_full", |b| {
        b.iter(|| parse_body(black_box(BODY), None))
    });
    group.bench_function("pick_typical", |b| {
        b.iter(|| paths.pick(black_box(BODY)).map(|p| p.payload.len()))
    });
    group.bench_function("exotic_number_scan", |b| {
        b.iter(|| herald_protocol::json_literal::has_exotic(black_box(BODY)))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
