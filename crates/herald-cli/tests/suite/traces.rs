//! OpenTelemetry traces exported over OTLP to a local receiver that decodes them: one
//! webhook event from its request to its delivery, across a restart of the worker
//! (OTLP/HTTP with protobuf); one API request through its turn (`tracing:` in config.yaml;
//! gRPC is a build feature, tested in herald-trace); one JSON-RPC request through its
//! turn; one `herald chat` turn.

use super::support::*;
use herald_test_support::otlp::{OtlpReceiver, ReceivedSpan};
use herald_test_support::{FakeProvider, Scripted};
use reqwest::StatusCode;
use std::time::Duration;

/// The sender's own trace: its trace id and the span that sent the request.
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const SENDER_SPAN: &str = "00f067aa0ba902b7";

fn traceparent() -> String {
    format!("00-{TRACE_ID}-{SENDER_SPAN}-01")
}

/// Waits until spans named `names` arrived; every span so far.
async fn spans_named(receiver: &OtlpReceiver, names: &[&str]) -> Vec<ReceivedSpan> {
    wait_for(Duration::from_secs(20), "the spans", || {
        let spans = receiver.spans();
        names
            .iter()
            .all(|n| spans.iter().any(|s| s.name == *n))
            .then_some(spans)
    })
    .await
}

fn one<'a>(spans: &'a [ReceivedSpan], name: &str) -> &'a ReceivedSpan {
    let found: Vec<&ReceivedSpan> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(found.len(), 1, "one {name}: {spans:#?}");
    found[0]
}

fn assert_child(spans: &[ReceivedSpan], child: &str, parent: &str) {
    let (c, p) = (one(spans, child), one(spans, parent));
    assert_eq!(
        c.parent_span_id, p.span_id,
        "{child} under {parent}: {spans:#?}"
    );
    assert_eq!(c.trace_id, p.trace_id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_events_spans_link_from_its_request_to_its_delivery_across_a_restart() {
    let receiver = OtlpReceiver::start();
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ];
    // No model yet: the event waits in the inbox.
    let routes = "        gh:\n          events: [issues]\n          deliver: log\n";
    let mut first = Herald::start_with(&config_with_routes(routes), &env);
    let body = r#"{"action": "opened"}"#;
    let headers = [
        ("x-github-event", "issues".to_owned()),
        (
            "x-hub-signature-256",
            herald_webhook::verify::sign::github(SECRET, body.as_bytes()),
        ),
        ("x-github-delivery", "t-1".to_owned()),
        ("traceparent", traceparent()),
    ];
    let (status, _) = first.post("/webhooks/gh", body, &headers).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let ingress = spans_named(&receiver, &["webhook.request", "inbox.enqueue"]).await;
    let request = one(&ingress, "webhook.request");
    assert_eq!(
        (request.trace_id.as_str(), request.parent_span_id.as_str()),
        (TRACE_ID, SENDER_SPAN),
        "the sender's traceparent is honoured"
    );
    assert_eq!(request.attributes["route"], "gh");
    assert_eq!(request.attributes["outcome"], "accepted");
    assert_eq!(request.service, "herald");
    for step in ["webhook.verify", "webhook.filter", "inbox.enqueue"] {
        assert_child(&ingress, step, "webhook.request");
    }
    assert_eq!(first.terminate(), Some(0));
    // The worker of a new process, with a model now, runs it and delivers it.
    let provider = FakeProvider::start(vec![Scripted::text("Looked at it.")]);
    let home = first.into_home();
    let config = super::agent_runs::agent_config(&provider.base_url, "", routes);
    std::fs::write(home.path().join("config.yaml"), config).unwrap();
    let _second = Herald::start_in(home, &env);
    let spans = spans_named(
        &receiver,
        &["inbox.work", "agent.run", "llm.call", "delivery.attempt"],
    )
    .await;
    assert!(spans.iter().all(|s| s.trace_id == TRACE_ID), "{spans:#?}");
    assert_child(&spans, "inbox.work", "webhook.request");
    assert_child(&spans, "agent.run", "inbox.work");
    assert_child(&spans, "llm.call", "agent.run");
    assert_child(&spans, "delivery.attempt", "inbox.work");
    let work = one(&spans, "inbox.work");
    assert_eq!(work.attributes["delivery_id"], "t-1");
    assert_eq!(
        one(&spans, "delivery.attempt").attributes["outcome"],
        "delivered"
    );
    assert_eq!(one(&spans, "llm.call").attributes["provider"], "auto");
    assert!(spans.iter().all(|s| s.via == "http"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_request_is_traced_through_its_turn_from_the_tracing_block() {
    let receiver = OtlpReceiver::start();
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("c1", "terminal", r#"{"command": "true"}"#)]),
        Scripted::text("Done."),
    ]);
    let tracing_block = format!(
        "tracing:\n  endpoint: {}\n  protocol: http/protobuf\n  service_name: herald-api-test\n",
        receiver.url
    );
    let config = format!(
        "{}{tracing_block}",
        super::api::api_config(&provider.base_url, "")
    );
    let h = Herald::start_with(&config, &[("OTEL_BSP_SCHEDULE_DELAY", "100")]);
    let parent = traceparent();
    let r = super::api::call(
        &h,
        "POST",
        "/v1/chat/completions",
        Some(serde_json::json!({"messages": [{"role": "user", "content": "go"}]})),
        &[("traceparent", parent.as_str())],
    )
    .await;
    assert_eq!(r.status(), StatusCode::OK);
    let spans = spans_named(&receiver, &["http.request", "agent.run", "tool.call"]).await;
    let spans: Vec<ReceivedSpan> = spans
        .into_iter()
        .filter(|s| s.trace_id == TRACE_ID)
        .collect();
    let request = one(&spans, "http.request");
    assert_eq!(request.parent_span_id, SENDER_SPAN);
    assert_eq!(request.attributes["http.route"], "/v1/chat/completions");
    assert_eq!(request.attributes["http.status"], "200");
    assert_child(&spans, "agent.run", "http.request");
    assert_eq!(one(&spans, "agent.run").attributes["door"], "api_server");
    let calls: Vec<&ReceivedSpan> = spans.iter().filter(|s| s.name == "llm.call").collect();
    assert_eq!(calls.len(), 2, "{spans:#?}");
    let run = one(&spans, "agent.run");
    assert!(calls.iter().all(|c| c.parent_span_id == run.span_id));
    assert_child(&spans, "tool.call", "agent.run");
    assert_eq!(one(&spans, "tool.call").attributes["tool"], "terminal");
    assert!(
        spans
            .iter()
            .all(|s| s.via == "http" && s.service == "herald-api-test")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_rpc_request_is_traced_through_its_turn() {
    let receiver = OtlpReceiver::start();
    let provider = FakeProvider::start(vec![Scripted::text("Hi.")]);
    let home = super::rpc::rpc_home(&provider.base_url, "");
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ("OTEL_SERVICE_NAME", "herald-rpc-test"),
    ];
    let mut rpc = super::rpc::Piped::start_with(home.path(), &env);
    let c = &mut rpc.client;
    let sid = c.session().await;
    c.turn(&sid, "hello").await;
    let spans = spans_named(&receiver, &["agent.run", "llm.call"]).await;
    let run = one(&spans, "agent.run");
    let parent = spans
        .iter()
        .find(|s| s.span_id == run.parent_span_id)
        .unwrap_or_else(|| panic!("agent.run has a parent: {spans:#?}"));
    assert_eq!(parent.name, "rpc.request");
    assert_eq!(parent.attributes["method"], "prompt.submit");
    assert_eq!(run.attributes["door"], "tui");
    assert_child(&spans, "llm.call", "agent.run");
    assert_eq!(run.service, "herald-rpc-test");
}

/// `herald chat` exports its turns like every other door (it never did): the run and
/// its provider call, sent before the process leaves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_turn_is_traced_and_sent_before_chat_leaves() {
    let receiver = OtlpReceiver::start();
    let provider = FakeProvider::start(vec![Scripted::text("Hi.")]);
    let home = super::rpc::rpc_home(&provider.base_url, "");
    let out = tokio::process::Command::new(BIN)
        .args(["chat", "-Q", "-q", "hello"])
        .env("HERALD_HOME", home.path())
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url.as_str())
        .env("OTEL_SERVICE_NAME", "herald-chat-test")
        .env_remove("RUST_LOG")
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Flushed at exit: nothing waits for a batch delay.
    let spans = receiver.spans();
    let run = one(&spans, "agent.run");
    assert_eq!(run.attributes["door"], "cli");
    assert_eq!(run.service, "herald-chat-test");
    assert_child(&spans, "llm.call", "agent.run");
}
