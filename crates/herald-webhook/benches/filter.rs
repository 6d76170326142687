//! Filter evaluation (compiled once) and body parsing on a ~2 KB pull_request payload.

use criterion::{Criterion, criterion_group, criterion_main};
use herald_webhook::filter::{FileListCache, FilterInput, compile};
use herald_webhook::{event, parse_body};
use http::HeaderMap;
use serde_json::json;
use std::hint::black_box;
use std::path::Path;

const BODY: &[u8] = include_bytes!("../tests/fixtures/github_pull_request_opened.json");

fn bench(c: &mut Criterion) {
    let payload = parse_body(BODY, None).unwrap_or_default();
    let headers = HeaderMap::new();
    let ev = json!("pull_request");
    let lists = FileListCache::default();
    let specs = [
        ("equals", json!([{"field": "action", "equals": "opened"}])),
        (
            "typical",
            json!([
                {"field": "action", "in": ["opened", "reopened", "synchronize"]},
                {"not": {"field": "pull_request.draft", "equals": true}},
                {"any": [{"field": "pull_request.labels.0.name", "equals": "bug"}, {"field": "repository.topics", "contains": "api"}]},
                {"field": "pull_request.title", "regex": "(?i)feature|fix"}
            ]),
        ),
        (
            "regex_body",
            json!([{"field": "pull_request.body", "regex": "Details\\s+follow\\.\\s*$"}]),
        ),
    ];
    let mut group = c.benchmark_group("filter");
    for (name, spec) in &specs {
        let (compiled, _) = compile(Some(spec), &|p| Path::new("/").join(p));
        group.bench_function(*name, |b| {
            b.iter(|| {
                compiled.matches(
                    black_box(&FilterInput {
                        payload: &payload,
                        event_type: &ev,
                        headers: &headers,
                    }),
                    &lists,
                )
            })
        });
    }
    group.bench_function("parse_body_2k", |b| {
        b.iter(|| parse_body(black_box(BODY), None))
    });
    // What an accepted event of a route with a two-placeholder prompt builds instead.
    let mut paths = herald_webhook::pick::PayloadPaths::new();
    herald_webhook::Template::compile("Review PR #{number}: {pull_request.title}")
        .add_paths(&mut paths);
    group.bench_function("pick_2k_two_paths", |b| {
        b.iter(|| paths.pick(black_box(BODY)))
    });
    group.bench_function("event_type", |b| {
        b.iter(|| event::event_type(black_box(&headers), black_box(&payload)))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
