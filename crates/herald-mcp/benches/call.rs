//! One MCP tool call over stdio through herald's client (`Server::call`, what an agent's
//! MCP tool runs), against the test server built with the official Python SDK
//! (`crates/herald-cli/tests/clients/mcp_server.py`, tool `echo`). Compare with the
//! SDK's own client on the same server: `python3 bench/mcp_overhead.py`.
//!
//! `cargo bench -p herald-mcp` (needs a python3 with `mcp`: the test virtualenv's,
//! `PATH=$PWD/target/test-venv/bin:$PATH`).

use criterion::{Criterion, criterion_group, criterion_main};
use herald_config::{McpServerSettings, McpTransport};
use herald_mcp::server::{Server, Status};
use serde_json::{Map, json};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

fn server_script() -> String {
    format!(
        "{}/../herald-cli/tests/clients/mcp_server.py",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn bench_call(c: &mut Criterion) {
    let Ok(rt) = tokio::runtime::Runtime::new() else {
        return;
    };
    let settings = McpServerSettings::new(
        "bench",
        McpTransport::Stdio {
            command: "python3".into(),
            args: vec![server_script(), "stdio".into()],
            env: Vec::new(),
        },
    );
    let server = rt.block_on(async {
        let s = Server::start(settings, None);
        s.first_attempt(Duration::from_secs(30)).await;
        s
    });
    if server.status() != Status::Connected {
        eprintln!(
            "mcp bench skipped: the server did not connect ({:?}); run with the test virtualenv's python3 on PATH",
            server.status()
        );
        return;
    }
    let mut args = Map::new();
    args.insert("text".into(), json!("hello"));
    let stop = AtomicBool::new(false);
    c.bench_function("mcp stdio tool call (echo)", |b| {
        b.to_async(&rt).iter(|| async {
            let r = server.call("echo", args.clone(), &stop).await;
            assert!(r.is_ok(), "{r:?}");
        })
    });
    server.stop();
}

criterion_group!(benches, bench_call);
criterion_main!(benches);
