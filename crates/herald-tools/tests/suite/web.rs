use axum::Router;
use axum::extract::Query;
use axum::http::HeaderMap;
use axum::routing::{get, post};
use herald_agent::{Approvals, Tool, ToolContext};
use herald_tools::{SearchBackend, WebExtract, WebSearch};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

fn ctx() -> ToolContext {
    ToolContext {
        cwd: std::env::temp_dir(),
        session_id: "s".into(),
        approvals: Arc::new(Approvals::unattended()),
        interrupted: Arc::new(AtomicBool::new(false)),
        call_id: "c".into(),
        turn_id: "t".into(),
        notify: None,
        clarifier: None,
        prompter: None,
        budget: Default::default(),
    }
}

async fn run(tool: &dyn Tool, args: Value) -> Value {
    serde_json::from_str(&tool.run(args, &ctx()).await).unwrap()
}

#[tokio::test]
async fn searxng_json_api() {
    let app = Router::new().route(
        "/search",
        get(|Query(q): Query<HashMap<String, String>>| async move {
            assert_eq!(q.get("format").map(String::as_str), Some("json"));
            axum::Json(json!({"results": [
                {"title": format!("About {}", q["q"]), "url": "https://a.example/1", "content": "first"},
                {"title": "Two", "url": "https://a.example/2", "content": "second"}
            ]}))
        }),
    );
    let base = serve(app).await;
    let tool = WebSearch {
        backend: SearchBackend::Searxng { base_url: base },
    };
    let out = run(&tool, json!({"query": "rust async", "limit": 1})).await;
    assert_eq!(
        out,
        json!({"query": "rust async", "results": [{"title": "About rust async", "url": "https://a.example/1", "snippet": "first"}]})
    );
}

#[tokio::test]
async fn tavily_api() {
    let app = Router::new().route(
        "/search",
        post(|headers: HeaderMap, axum::Json(body): axum::Json<Value>| async move {
            assert_eq!(headers["authorization"], "Bearer tvly-key");
            axum::Json(json!({"results": [{"title": "T", "url": "https://t.example", "content": format!("q={}", body["query"].as_str().unwrap())}]}))
        }),
    );
    let base = serve(app).await;
    let tool = WebSearch {
        backend: SearchBackend::Tavily {
            api_key: "tvly-key".into(),
            base_url: base,
        },
    };
    let out = run(&tool, json!({"query": "herald"})).await;
    assert_eq!(out["results"][0]["snippet"], "q=herald");
    assert!(tool.untrusted_output());
}

#[tokio::test]
async fn extract_refuses_internal_addresses_by_default() {
    let base = serve(Router::new().route("/", get(|| async { "secret internal page" }))).await;
    let tool = WebExtract {
        allow_private: false,
    };
    let out = run(&tool, json!({"urls": [base.clone(), "http://169.254.169.254/latest/meta-data/", "http://[::1]:1/", "file:///etc/passwd", "http://10.0.0.1/"]})).await;
    let results = out["results"].as_array().unwrap();
    assert_eq!(results.len(), 5);
    for r in results {
        let e = r["error"].as_str().unwrap_or("");
        assert!(
            e.contains("refused") || e.contains("only http and https"),
            "{r}"
        );
        assert!(r.get("content").is_none());
    }
    assert!(results[1]["error"].as_str().unwrap().contains("metadata"));
}

#[tokio::test]
async fn extract_turns_html_into_text_within_limits_when_allowed() {
    let app = Router::new()
        .route("/page", get(|| async { ([("content-type", "text/html")], "<html><body><h1>Title</h1><p>Hello <b>world</b></p><script>var x=1</script></body></html>") }))
        .route("/big", get(|| async { "x".repeat(5_000_000) }))
        .route("/hop", get(|| async { (axum::http::StatusCode::FOUND, [("location", "/page")], "") }))
        .route("/to-metadata", get(|| async { (axum::http::StatusCode::FOUND, [("location", "http://169.254.169.254/")], "") }));
    let base = serve(app).await;
    let tool = WebExtract {
        allow_private: true,
    };
    let out = run(
        &tool,
        json!({"urls": [format!("{base}/page"), format!("{base}/big"), format!("{base}/hop")]}),
    )
    .await;
    let r = out["results"].as_array().unwrap();
    let page = r[0]["content"].as_str().unwrap();
    assert!(
        page.contains("Title") && page.contains("Hello") && page.contains("world"),
        "{page}"
    );
    assert_eq!(r[1]["content"].as_str().unwrap().chars().count(), 15_000);
    assert!(
        r[2]["content"].as_str().unwrap().contains("Hello"),
        "redirects are followed"
    );
    // A redirect towards a refused address is re-checked.
    let strict = WebExtract {
        allow_private: false,
    };
    let hop = strict.vet_for_tests("http://169.254.169.254/").await;
    assert!(hop.is_err());
}

#[tokio::test]
async fn vision_sends_the_image_as_a_content_part() {
    use herald_test_support::{FakeProvider, Scripted};
    let provider = FakeProvider::start(vec![
        Scripted::text("A red square."),
        Scripted::text("A cat."),
    ]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pic.png"), [0x89u8, b'P', b'N', b'G']).unwrap();
    let mut ctx = ctx();
    ctx.cwd = dir.path().to_path_buf();
    let tool = herald_tools::VisionAnalyze {
        client: herald_llm::LlmClient::new(),
        endpoint: herald_llm::SharedEndpoint::new(herald_llm::Endpoint::new(
            &provider.base_url,
            "k",
            "vision-model",
        )),
        allow_local_files: true,
    };
    let out: Value = serde_json::from_str(
        &tool
            .run(
                json!({"image_url": "pic.png", "question": "what is it?"}),
                &ctx,
            )
            .await,
    )
    .unwrap();
    assert_eq!(out["analysis"], "A red square.");
    let body = &provider.requests()[0].body;
    assert_eq!(body["model"], "vision-model");
    let parts = body["messages"][0]["content"].as_array().unwrap();
    assert_eq!(parts[0], json!({"type": "text", "text": "what is it?"}));
    assert_eq!(
        parts[1]["image_url"]["url"],
        "data:image/png;base64,iVBORw=="
    );
    let url_out: Value = serde_json::from_str(
        &tool
            .run(json!({"image_url": "https://img.example/cat.jpg"}), &ctx)
            .await,
    )
    .unwrap();
    assert_eq!(url_out["analysis"], "A cat.");
    // Webhook runs: no local files.
    let strict = herald_tools::VisionAnalyze {
        allow_local_files: false,
        ..tool
    };
    let denied: Value =
        serde_json::from_str(&strict.run(json!({"image_url": "/etc/passwd"}), &ctx).await).unwrap();
    assert!(
        denied["error"]
            .as_str()
            .unwrap()
            .contains("only http(s) and data:")
    );
}
