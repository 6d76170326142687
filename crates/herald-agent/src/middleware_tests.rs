use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};

struct Req<F: Fn(&Map<String, Value>) -> Result<Option<Value>, String> + Send + Sync>(
    &'static str,
    F,
);

#[async_trait::async_trait]
impl<F: Fn(&Map<String, Value>) -> Result<Option<Value>, String> + Send + Sync> RequestMiddleware
    for Req<F>
{
    fn name(&self) -> &str {
        self.0
    }
    async fn call(&self, fields: &Map<String, Value>) -> Result<Option<Value>, String> {
        (self.1)(fields)
    }
}

fn req(
    name: &'static str,
    f: impl Fn(&Map<String, Value>) -> Result<Option<Value>, String> + Send + Sync + 'static,
) -> Arc<dyn RequestMiddleware> {
    Arc::new(Req(name, f))
}

/// Runs a request chain to its end on a runtime of its own.
fn request_pass(
    kind: Kind,
    chain: &[Arc<dyn RequestMiddleware>],
    payload: Value,
    fields: &Map<String, Value>,
    reporter: &FailureReporter,
) -> RequestPass {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(run_request_chain(kind, chain, payload, fields, reporter))
}

#[test]
fn request_replacement_trace_and_ignored_payloads() {
    let r = FailureReporter::default();
    let chain = vec![
        req("a", |_| {
            Ok(Some(
                json!({"request": {"model": "b"}, "source": "router", "reason": "cheaper", "name": ""}),
            ))
        }),
        req("b", |_| {
            Ok(Some(json!({"request": "not an object", "source": "x"})))
        }),
        req("c", |_| Ok(Some(json!([1, 2])))),
        req("d", |_| Ok(None)),
    ];
    let pass = request_pass(
        Kind::LlmRequest,
        &chain,
        json!({"model": "a"}),
        &Map::new(),
        &r,
    );
    assert_eq!(pass.effective, json!({"model": "b"}));
    assert_eq!(pass.original, json!({"model": "a"}));
    assert!(pass.changed);
    assert_eq!(
        pass.trace,
        vec![json!({"source": "router", "reason": "cheaper"})]
    );
    let chain = vec![req("e", |_| Ok(Some(json!({"args": {"x": 1}}))))];
    let pass = request_pass(Kind::ToolRequest, &chain, json!({"x": 0}), &Map::new(), &r);
    assert_eq!(pass.trace, vec![json!({"source": "plugin"})]);
}

#[test]
fn request_middleware_folds_and_keeps_the_original() {
    let r = FailureReporter::default();
    let chain = vec![
        req("one", |f| {
            assert_eq!(f["original_request"], json!({"n": 0}));
            let n = f["request"]["n"].as_i64().unwrap();
            Ok(Some(json!({"request": {"n": n + 1}, "source": "one"})))
        }),
        req("boom", |_| Err("kaput".into())),
        req("two", |f| {
            assert_eq!(f["original_request"], json!({"n": 0}));
            assert_eq!(f["middleware_schema_version"], MIDDLEWARE_SCHEMA_VERSION);
            let n = f["request"]["n"].as_i64().unwrap();
            Ok(Some(json!({"request": {"n": n * 10}, "source": "two"})))
        }),
    ];
    let pass = request_pass(Kind::LlmRequest, &chain, json!({"n": 0}), &Map::new(), &r);
    assert_eq!(pass.effective, json!({"n": 10}));
    assert_eq!(pass.trace.len(), 2);
}

type Behaviour = Arc<
    dyn Fn(
            Map<String, Value>,
            Next<String>,
        ) -> BoxFut<'static, Result<Value, MiddlewareError<String>>>
        + Send
        + Sync,
>;

struct Exec(&'static str, Behaviour);

impl ExecutionMiddleware<String> for Exec {
    fn name(&self) -> &str {
        self.0
    }
    fn call(
        &self,
        fields: Map<String, Value>,
        next: Next<String>,
    ) -> BoxFut<'static, Result<Value, MiddlewareError<String>>> {
        (self.1)(fields, next)
    }
}

fn exec(
    name: &'static str,
    f: impl Fn(
        Map<String, Value>,
        Next<String>,
    ) -> BoxFut<'static, Result<Value, MiddlewareError<String>>>
    + Send
    + Sync
    + 'static,
) -> Arc<dyn ExecutionMiddleware<String>> {
    Arc::new(Exec(name, Arc::new(f)))
}

/// Runs `chain` around a terminal that counts its calls and fails when `fail` is set.
async fn run(
    chain: Vec<Arc<dyn ExecutionMiddleware<String>>>,
    fail: bool,
) -> (
    Result<Value, MiddlewareError<String>>,
    usize,
    Arc<FailureReporter>,
) {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let terminal: Terminal<String> = Arc::new(move |p: Value| {
        c.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            if fail {
                Err("provider 503".to_owned())
            } else {
                Ok(json!({"echo": p}))
            }
        })
    });
    let reporter = Arc::new(FailureReporter::default());
    let out = run_execution_chain(
        Kind::ToolExecution,
        Arc::new(chain),
        0,
        json!({"v": 1}),
        Arc::new(Map::new()),
        terminal,
        reporter.clone(),
    )
    .await;
    (out, calls.load(Ordering::SeqCst), reporter)
}

#[tokio::test]
async fn nesting_follows_registration_order() {
    let outer = exec("outer", |f, next| {
        Box::pin(async move {
            let mut p = f["args"].clone();
            p["path"] = json!(format!("{}>outer", p["path"].as_str().unwrap_or("")));
            next.call(Some(p)).await
        })
    });
    let inner = exec("inner", |f, next| {
        Box::pin(async move {
            let mut p = f["args"].clone();
            p["path"] = json!(format!("{}>inner", p["path"].as_str().unwrap_or("")));
            next.call(Some(p)).await
        })
    });
    let (out, calls, _) = run(vec![outer, inner], false).await;
    assert_eq!(out.unwrap()["echo"]["path"], ">outer>inner");
    assert_eq!(calls, 1);
}

#[tokio::test]
async fn failure_rows_one_to_nine() {
    // 1: short-circuit.
    let (out, calls, _) = run(
        vec![exec("sc", |_, _| Box::pin(async { Ok(json!("cached")) }))],
        false,
    )
    .await;
    assert_eq!((out.unwrap(), calls), (json!("cached"), 0));
    // 2: fails before next: the chain continues with this frame's payload.
    let (out, calls, rep) = run(
        vec![exec("bad", |_, _| {
            Box::pin(async { Err(MiddlewareError::Failed("oops".into())) })
        })],
        false,
    )
    .await;
    assert_eq!((out.unwrap(), calls), (json!({"echo": {"v": 1}}), 1));
    assert!(
        !rep.report("tool_execution", "bad", "oops", &[]),
        "the failure was already reported once"
    );
    // 2 (null without next) is a failure too.
    let (out, calls, _) = run(
        vec![exec("null", |_, _| Box::pin(async { Ok(Value::Null) }))],
        false,
    )
    .await;
    assert_eq!((out.is_ok(), calls), (true, 1));
    // 3: transformation.
    let (out, _, _) = run(
        vec![exec("t", |_, n| {
            Box::pin(async move {
                let r = n.call(None).await?;
                Ok(json!({"wrapped": r}))
            })
        })],
        false,
    )
    .await;
    assert_eq!(out.unwrap()["wrapped"]["echo"]["v"], 1);
    // 4: fails after success: R is returned, downstream not run again.
    let (out, calls, _) = run(
        vec![exec("late", |_, n| {
            Box::pin(async move {
                n.call(None).await?;
                Err(MiddlewareError::Failed("after".into()))
            })
        })],
        false,
    )
    .await;
    assert_eq!((out.unwrap(), calls), (json!({"echo": {"v": 1}}), 1));
    // 5: E propagates unchanged.
    let (out, calls, _) = run(
        vec![exec("pass", |_, n| {
            Box::pin(async move { n.call(None).await })
        })],
        true,
    )
    .await;
    assert_eq!(
        (out, calls),
        (Err(MiddlewareError::Downstream("provider 503".into())), 1)
    );
    // 6: a deliberate conversion.
    let (out, _, _) = run(
        vec![exec("conv", |_, n| {
            Box::pin(async move {
                let _ = n.call(None).await;
                Err(MiddlewareError::Failed("converted".into()))
            })
        })],
        true,
    )
    .await;
    assert_eq!(out, Err(MiddlewareError::Failed("converted".into())));
    // 7: deliberate recovery.
    let (out, _, _) = run(
        vec![exec("rec", |_, n| {
            Box::pin(async move {
                let _ = n.call(None).await;
                Ok(json!("fallback"))
            })
        })],
        true,
    )
    .await;
    assert_eq!(out.unwrap(), json!("fallback"));
    // 8: next twice: the second runs nothing; the first call's outcome stands.
    let (out, calls, _) = run(
        vec![exec("twice", |_, n| {
            Box::pin(async move {
                let first = n.call(None).await;
                let second = n.call(None).await;
                assert_eq!(second, Err(MiddlewareError::NextAlreadyUsed));
                first
            })
        })],
        false,
    )
    .await;
    assert_eq!((out.is_ok(), calls), (true, 1));
    let (out, calls, _) = run(
        vec![exec("twice-fail", |_, n| {
            Box::pin(async move {
                let _ = n.call(None).await;
                n.call(None).await
            })
        })],
        true,
    )
    .await;
    assert_eq!(
        (out, calls),
        (Err(MiddlewareError::Downstream("provider 503".into())), 1),
        "the original E, not the single-use error"
    );
    // 9: an explicit block stops the chain, named after the callback.
    let (out, calls, _) = run(
        vec![
            exec("guard", |_, _| {
                Box::pin(async {
                    Err(MiddlewareError::Block {
                        reason: "not on Fridays".into(),
                        checked_by: None,
                    })
                })
            }),
            exec("never", |_, _| Box::pin(async { panic!("must not run") })),
        ],
        false,
    )
    .await;
    assert_eq!(
        (out, calls),
        (
            Err(MiddlewareError::Block {
                reason: "not on Fridays".into(),
                checked_by: Some("guard".into())
            }),
            0
        )
    );
}

#[tokio::test]
async fn panics_are_contained() {
    let (out, calls, _) = run(
        vec![exec("panics", |_, _| {
            Box::pin(async { panic!("plugin bug") })
        })],
        false,
    )
    .await;
    assert_eq!(
        (out.is_ok(), calls),
        (true, 1),
        "a panic before next continues the chain"
    );
    let (out, calls, _) = run(
        vec![exec("late-panic", |_, n| {
            Box::pin(async move {
                let _ = n.call(None).await;
                panic!("after")
            })
        })],
        false,
    )
    .await;
    assert_eq!(
        (out.unwrap(), calls),
        (json!({"echo": {"v": 1}}), 1),
        "a panic after success returns R"
    );
    let r = FailureReporter::default();
    let chain = vec![
        req("boom", |_| panic!("request bug")),
        req("ok", |_| Ok(Some(json!({"request": {"n": 1}})))),
    ];
    let pass = run_request_chain(Kind::LlmRequest, &chain, json!({"n": 0}), &Map::new(), &r).await;
    assert_eq!(pass.effective, json!({"n": 1}));
}

#[test]
fn warn_once_then_debug_and_reset() {
    let r = FailureReporter::default();
    assert!(r.report(
        "tool_request",
        "cb",
        "missing field tool_data",
        &["args", "tool_name"]
    ));
    for _ in 0..5 {
        assert!(!r.report(
            "tool_request",
            "cb",
            "missing field tool_data",
            &["args", "tool_name"]
        ));
    }
    assert!(r.report("tool_request", "cb", "another message", &[]));
    r.reset();
    assert!(r.report("tool_request", "cb", "missing field tool_data", &[]));
}
