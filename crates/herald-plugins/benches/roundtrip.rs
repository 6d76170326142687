//! One Python callback round trip per middleware kind (a pass-through plugin in the real
//! plugin host, over its pipes), with a 100 KB LLM request; and the same chains with no
//! plugin, which is what herald pays when no Python plugin is enabled.
//!
//! `cargo bench -p herald-plugins` (needs python3).

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use herald_agent::Plugins;
use herald_agent::middleware::{
    BoxFut, FailureReporter, Kind, Terminal, run_execution_chain, run_request_chain,
};
use herald_config::{AgentSettings, Home};
use herald_llm::LlmError;
use herald_plugins::PythonPlugins;
use serde_json::{Map, Value, json};
use std::sync::Arc;

const PLUGIN: &str = r#"
def on_llm_request(request, **kwargs):
    return None

def on_tool_request(tool_name, args, **kwargs):
    return None

def on_llm_execution(request, next_call, **kwargs):
    return next_call(request)

def on_tool_execution(args, next_call, **kwargs):
    return next_call(args)

def register(ctx):
    ctx.register_middleware("llm_request", on_llm_request)
    ctx.register_middleware("tool_request", on_tool_request)
    ctx.register_middleware("llm_execution", on_llm_execution)
    ctx.register_middleware("tool_execution", on_tool_execution)
"#;

/// A chat request of about 100 KB: 50 messages of 2 KB.
fn big_request() -> Value {
    let messages: Vec<Value> = (0..50)
        .map(|i| json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": "x".repeat(2000)}))
        .collect();
    json!({"model": "m", "messages": messages, "stream": true})
}

fn fields() -> Map<String, Value> {
    let mut f = Map::new();
    for (k, v) in [
        ("task_id", "t1"),
        ("session_id", "s1"),
        ("turn_id", "s1:t1"),
        ("tool_name", "terminal"),
    ] {
        f.insert(k.into(), json!(v));
    }
    f
}

fn terminal<E: Send + 'static>(answer: Value) -> Terminal<E> {
    Arc::new(
        move |_payload: Value| -> BoxFut<'static, Result<Value, E>> {
            let a = answer.clone();
            Box::pin(async move { Ok(a) })
        },
    )
}

fn bench_chains(c: &mut Criterion, label: &str, plugins: &Plugins, rt: &tokio::runtime::Runtime) {
    let reporter = Arc::new(FailureReporter::default());
    let request = big_request();
    let args = json!({"command": "ls -la", "workdir": "/tmp"});
    let base = Arc::new(fields());
    let response = json!({"choices": [{"message": {"role": "assistant", "content": "ok"}}]});
    c.bench_function(&format!("{label}/llm_request_100k"), |b| {
        b.iter_batched(
            || request.clone(),
            |r| {
                rt.block_on(run_request_chain(
                    Kind::LlmRequest,
                    &plugins.llm_request,
                    r,
                    &base,
                    &reporter,
                ))
            },
            BatchSize::SmallInput,
        )
    });
    c.bench_function(&format!("{label}/tool_request"), |b| {
        b.iter(|| {
            rt.block_on(run_request_chain(
                Kind::ToolRequest,
                &plugins.tool_request,
                args.clone(),
                &base,
                &reporter,
            ))
        })
    });
    let llm = Arc::new(plugins.llm_execution.clone());
    c.bench_function(&format!("{label}/llm_execution_100k"), |b| {
        b.iter_batched(
            || request.clone(),
            |r| {
                rt.block_on(run_execution_chain::<LlmError>(
                    Kind::LlmExecution,
                    llm.clone(),
                    0,
                    r,
                    base.clone(),
                    terminal(response.clone()),
                    reporter.clone(),
                ))
            },
            BatchSize::SmallInput,
        )
    });
    let tools = Arc::new(plugins.tool_execution.clone());
    c.bench_function(&format!("{label}/tool_execution"), |b| {
        b.iter(|| {
            rt.block_on(run_execution_chain::<String>(
                Kind::ToolExecution,
                tools.clone(),
                0,
                args.clone(),
                base.clone(),
                terminal(json!("{\"output\": \"ok\"}")),
                reporter.clone(),
            ))
        })
    });
}

/// Ends the bench with why it cannot run.
fn stop(what: &str, e: impl std::fmt::Display) -> ! {
    eprintln!("{what}: {e}");
    std::process::exit(1)
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| stop("the async runtime", e));
    bench_chains(c, "no_plugin", &Plugins::default(), &rt);
    let dir = tempfile::tempdir().unwrap_or_else(|e| stop("a temporary home", e));
    let plugin = dir.path().join("plugins/bench-passthrough");
    std::fs::create_dir_all(&plugin)
        .and_then(|()| std::fs::write(plugin.join("plugin.yaml"), "name: bench-passthrough\n"))
        .and_then(|()| std::fs::write(plugin.join("__init__.py"), PLUGIN))
        .unwrap_or_else(|e| stop("the plugin's files", e));
    let settings = AgentSettings {
        plugins_enabled: vec!["bench-passthrough".into()],
        ..AgentSettings::default()
    };
    let home = Home::new(dir.path());
    let python = rt
        .block_on(PythonPlugins::start(&home, &settings))
        .unwrap_or_else(|e| stop("the plugin host", e))
        .unwrap_or_else(|| stop("the plugin", "not enabled"));
    bench_chains(c, "python", &python.plugins(), &rt);
    rt.block_on(python.stop());
}

criterion_group!(benches, bench);
criterion_main!(benches);
