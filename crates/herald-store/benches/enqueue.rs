//! Durable enqueue through the group-committing writer: one caller at a time versus 32
//! concurrent callers sharing fsyncs.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use herald_store::{NewInboxItem, Store, now_ms};
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT: AtomicU64 = AtomicU64::new(0);

fn item() -> NewInboxItem {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    NewInboxItem {
        route: "bench".into(),
        event_type: "pull_request".into(),
        delivery_id: format!("bench-{n}"),
        received_at_ms: now_ms(),
        profile: None,
        headers: r#"{"x-github-event":"pull_request"}"#.into(),
        payload: include_str!(
            "../../herald-webhook/tests/fixtures/github_pull_request_opened.json"
        )
        .into(),
        prompt: "Review PR".into(),
        deliver: "log".into(),
        deliver_extra: "{}".into(),
        skills: "[]".into(),
        toolsets: None,
    }
}

fn bench(c: &mut Criterion) {
    let Ok(dir) = tempfile::tempdir() else { return };
    let Ok(store) = Store::open(&dir.path().join("bench.db")) else {
        return;
    };
    let Ok(rt) = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    else {
        return;
    };
    let mut group = c.benchmark_group("enqueue");
    group.sample_size(20);
    group.throughput(Throughput::Elements(1));
    group.bench_function("sequential", |b| {
        b.iter(|| rt.block_on(store.enqueue(item())))
    });
    group.throughput(Throughput::Elements(32));
    group.bench_function("concurrent_32", |b| {
        b.iter(|| {
            rt.block_on(async {
                let tasks: Vec<_> = (0..32)
                    .map(|_| {
                        let s = store.clone();
                        tokio::spawn(async move { s.enqueue(item()).await })
                    })
                    .collect();
                for t in tasks {
                    let _ = t.await;
                }
            })
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
