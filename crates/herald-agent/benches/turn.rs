//! The turn loop's own overhead per tool round trip, with a provider answering at once
//! (a local fake over real HTTP + SSE) and a tool that does nothing.

use criterion::{Criterion, criterion_group, criterion_main};
use herald_agent::tool::{Tool, ToolContext, ToolFuture};
use herald_agent::{Agent, AgentConfig, Approvals};
use herald_llm::{Endpoint, RetryConfig};
use herald_test_support::{FakeProvider, Scripted};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

struct Noop;

impl Tool for Noop {
    fn name(&self) -> &str {
        "noop"
    }
    fn description(&self) -> &str {
        "does nothing"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    fn run<'a>(&'a self, _args: Value, _ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async { "{}".to_owned() })
    }
}

fn bench(c: &mut Criterion) {
    let provider = FakeProvider::start(vec![]);
    let agent = Agent::new(AgentConfig {
        endpoint: Endpoint::new(&provider.base_url, "k", "m"),
        retry: RetryConfig {
            max_attempts: 1,
            base: Duration::from_millis(1),
            cap: Duration::from_millis(1),
        },
        tools: vec![Arc::new(Noop)],
        max_iterations: 100,
        cwd: std::env::temp_dir(),
        approvals: Arc::new(Approvals::unattended()),
        system_prompt: "bench".into(),
        plugins: herald_agent::Plugins::default(),
        session_id: String::new(),
        platform: "cli".into(),
        sender_id: String::new(),
        prompter: None,
        provider: "custom".into(),
        clarifier: None,
        budget: Default::default(),
        max_tool_calls_per_answer: herald_agent::budget::DEFAULT_MAX_TOOL_CALLS_PER_ANSWER,
        tool_policy: Default::default(),
    });
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    let mut group = c.benchmark_group("turn");
    group.bench_function("plain_answer", |b| {
        b.iter(|| {
            provider.push(Scripted::text("done"));
            rt.block_on(agent.run_turn(&[], "hi", &mut |_| {}))
        })
    });
    group.bench_function("ten_tool_round_trips", |b| {
        b.iter(|| {
            for i in 0..10 {
                provider.push(Scripted::tool_calls(&[(&format!("c{i}"), "noop", "{}")]));
            }
            provider.push(Scripted::text("done"));
            rt.block_on(agent.run_turn(&[], "hi", &mut |_| {}))
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
