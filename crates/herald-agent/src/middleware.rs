//! Middleware (middleware.md Part A): request middleware that return a full replacement
//! with a trace, and execution middleware that wrap the real call through a single-use
//! `Next`. Every failure rule is fail-open except an explicit block; nothing downstream
//! ever runs twice; a failure never becomes an empty success.

use serde_json::{Map, Value, json};
use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

/// Carried on every invocation.
pub const TELEMETRY_SCHEMA_VERSION: &str = "hermes.observer.v1";
pub const MIDDLEWARE_SCHEMA_VERSION: &str = "hermes.middleware.v1";

/// A boxed, sendable future.
pub type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The four kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    LlmRequest,
    LlmExecution,
    ToolRequest,
    ToolExecution,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::LlmRequest => "llm_request",
            Kind::LlmExecution => "llm_execution",
            Kind::ToolRequest => "tool_request",
            Kind::ToolExecution => "tool_execution",
        }
    }
    /// The payload key of a request kind's return object.
    fn payload_key(self) -> &'static str {
        match self {
            Kind::LlmRequest | Kind::LlmExecution => "request",
            Kind::ToolRequest | Kind::ToolExecution => "args",
        }
    }
}

/// What a middleware callback can fail with.
#[derive(Debug, Clone, PartialEq)]
pub enum MiddlewareError<E> {
    /// The callback itself failed (a "middleware failure").
    Failed(String),
    /// An explicit block: the chain stops and the call fails with this reason.
    Block {
        reason: String,
        checked_by: Option<String>,
    },
    /// The downstream error, propagated unchanged.
    Downstream(E),
    /// `next` was called a second time in one frame.
    NextAlreadyUsed,
}

/// Warn once per distinct failure, then debug (A8). Bounded to 1,000 keys.
#[derive(Default)]
pub struct FailureReporter {
    seen: Mutex<(HashSet<String>, VecDeque<String>)>,
}

/// Keys remembered by the reporter.
const REPORTER_CAPACITY: usize = 1000;

impl FailureReporter {
    /// Reports a middleware failure; returns true when it was logged at WARNING (first
    /// occurrence).
    pub fn report(&self, kind: &str, callback: &str, error: &str, fields: &[&str]) -> bool {
        self.report_in("Middleware", kind, callback, error, fields)
    }

    /// Reports a failure of `surface` (`Middleware`, `Hook`); true when it was logged at
    /// WARNING.
    pub fn report_in(
        &self,
        surface: &str,
        kind: &str,
        callback: &str,
        error: &str,
        fields: &[&str],
    ) -> bool {
        let short: String = error.chars().take(200).collect();
        let key = format!("{surface}\u{1f}{kind}\u{1f}{callback}\u{1f}{short}");
        let first = match self.seen.lock() {
            Ok(mut g) => {
                let (set, order) = &mut *g;
                if set.insert(key.clone()) {
                    order.push_back(key);
                    if order.len() > REPORTER_CAPACITY
                        && let Some(old) = order.pop_front()
                    {
                        set.remove(&old);
                    }
                    true
                } else {
                    false
                }
            }
            Err(_) => true,
        };
        let mut names: Vec<&str> = fields.to_vec();
        names.sort_unstable();
        let provided = if names.is_empty() {
            "no fields".to_owned()
        } else {
            names.join(", ")
        };
        if first {
            tracing::warn!(
                "{surface} {kind} callback `{callback}` failed: {short} (fields provided: {provided}); identical failures will be logged at DEBUG"
            );
        } else {
            tracing::debug!("{surface} {kind} callback `{callback}` failed again: {short}");
        }
        first
    }

    /// Forgets everything (plugins reloaded).
    pub fn reset(&self) {
        if let Ok(mut g) = self.seen.lock() {
            g.0.clear();
            g.1.clear();
        }
    }
}

/// A request middleware: sees the invocation fields (the payload under `request` or
/// `args`, `original_*`, ids, versions) and returns nothing or a return object holding a
/// full replacement plus `source` / `reason` / `name`.
#[async_trait::async_trait]
pub trait RequestMiddleware: Send + Sync {
    fn name(&self) -> &str;
    async fn call(&self, fields: &Map<String, Value>) -> Result<Option<Value>, String>;
}

/// The outcome of a request pass (A5).
#[derive(Debug, Clone, PartialEq)]
pub struct RequestPass {
    pub effective: Value,
    /// The payload before the chain; `Null` when the chain was empty (nothing copied).
    pub original: Value,
    pub changed: bool,
    pub trace: Vec<Value>,
}

impl RequestPass {
    /// The payload as it was before the chain.
    pub fn original_payload(&self) -> &Value {
        if self.original.is_null() {
            &self.effective
        } else {
            &self.original
        }
    }
}

/// Runs request middleware in registration order, folding each accepted replacement
/// into the next one's input; `original_*` stays the pre-middleware payload. An empty
/// chain hands the payload back untouched, without a copy.
pub async fn run_request_chain(
    kind: Kind,
    chain: &[Arc<dyn RequestMiddleware>],
    payload: Value,
    base_fields: &Map<String, Value>,
    reporter: &FailureReporter,
) -> RequestPass {
    if chain.is_empty() {
        return RequestPass {
            effective: payload,
            original: Value::Null,
            changed: false,
            trace: Vec::new(),
        };
    }
    let key = kind.payload_key();
    let original = payload.clone();
    let mut effective = payload;
    let mut trace = Vec::new();
    for mw in chain {
        let mut fields = base_fields.clone();
        fields.insert(key.to_owned(), effective.clone());
        fields.insert(format!("original_{key}"), original.clone());
        insert_schema_versions(&mut fields);
        // A panicking plugin is a failure like any other (fail-open).
        let called =
            futures_util::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(mw.call(&fields)))
                .await
                .unwrap_or_else(|_| Err("the middleware panicked".to_owned()));
        match called {
            Ok(Some(Value::Object(ret))) => {
                let Some(Value::Object(replacement)) = ret.get(key) else {
                    continue;
                };
                effective = Value::Object(replacement.clone());
                let mut entry = Map::new();
                for k in ["source", "reason", "name"] {
                    if let Some(Value::String(s)) = ret
                        .get(k)
                        .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
                    {
                        entry.insert(k.to_owned(), json!(s));
                    }
                }
                if entry.is_empty() {
                    entry.insert("source".into(), json!("plugin"));
                }
                trace.push(Value::Object(entry));
            }
            Ok(_) => {}
            Err(e) => {
                let names: Vec<&str> = fields.keys().map(String::as_str).collect();
                reporter.report(kind.as_str(), mw.name(), &e, &names);
            }
        }
    }
    RequestPass {
        changed: !trace.is_empty(),
        effective,
        original,
        trace,
    }
}

/// The rest of the chain, callable once per frame.
pub struct Next<E> {
    inner: Arc<Mutex<NextState<E>>>,
}

type Continuation<E> =
    Box<dyn FnOnce(Value) -> BoxFut<'static, Result<Value, MiddlewareError<E>>> + Send>;

struct NextState<E> {
    run: Option<Continuation<E>>,
    /// This frame's payload (used for `next(None)`).
    payload: Value,
    /// The outcome of the one downstream run.
    outcome: Option<Result<Value, MiddlewareError<E>>>,
}

impl<E: Clone + Send + 'static> Next<E> {
    /// Runs the rest of the chain with `payload` (`None`: unchanged). A second call
    /// fails with [`MiddlewareError::NextAlreadyUsed`] and runs nothing.
    pub async fn call(&self, payload: Option<Value>) -> Result<Value, MiddlewareError<E>> {
        let (run, p) = {
            let Ok(mut st) = self.inner.lock() else {
                return Err(MiddlewareError::NextAlreadyUsed);
            };
            let Some(run) = st.run.take() else {
                return Err(MiddlewareError::NextAlreadyUsed);
            };
            (
                run,
                payload
                    .filter(|p| !p.is_null())
                    .unwrap_or_else(|| st.payload.clone()),
            )
        };
        let out = run(p).await;
        if let Ok(mut st) = self.inner.lock() {
            st.outcome = Some(out.clone());
        }
        out
    }
}

/// An execution middleware around a call whose error type is `E`.
pub trait ExecutionMiddleware<E>: Send + Sync {
    fn name(&self) -> &str;
    /// `fields` holds the effective payload (under `request`/`args`) and the ids.
    fn call(
        &self,
        fields: Map<String, Value>,
        next: Next<E>,
    ) -> BoxFut<'static, Result<Value, MiddlewareError<E>>>;
}

/// The real call at the end of the chain.
pub type Terminal<E> = Arc<dyn Fn(Value) -> BoxFut<'static, Result<Value, E>> + Send + Sync>;

/// Runs an execution chain (registration order = nesting order, first is outermost)
/// around `terminal`, applying the failure rules of A7.
pub fn run_execution_chain<E: Clone + Send + Sync + 'static>(
    kind: Kind,
    chain: Arc<Vec<Arc<dyn ExecutionMiddleware<E>>>>,
    index: usize,
    payload: Value,
    base_fields: Arc<Map<String, Value>>,
    terminal: Terminal<E>,
    reporter: Arc<FailureReporter>,
) -> BoxFut<'static, Result<Value, MiddlewareError<E>>> {
    Box::pin(async move {
        let Some(mw) = chain.get(index).cloned() else {
            return terminal(payload).await.map_err(MiddlewareError::Downstream);
        };
        let next_chain = chain.clone();
        let (nf, nt, nr) = (base_fields.clone(), terminal.clone(), reporter.clone());
        let state = Arc::new(Mutex::new(NextState::<E> {
            run: Some(Box::new(move |p| {
                run_execution_chain(kind, next_chain, index + 1, p, nf, nt, nr)
            })),
            payload: payload.clone(),
            outcome: None,
        }));
        let next = Next {
            inner: state.clone(),
        };
        let mut fields = (*base_fields).clone();
        fields.insert(kind.payload_key().to_owned(), payload.clone());
        insert_schema_versions(&mut fields);
        let field_names: Vec<String> = fields
            .keys()
            .cloned()
            .chain(["next_call".to_owned()])
            .collect();
        let returned = futures_util::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(
            mw.call(fields, next),
        ))
        .await
        .unwrap_or_else(|_| Err(MiddlewareError::Failed("the middleware panicked".into())));
        let downstream = state.lock().ok().and_then(|mut s| s.outcome.take());
        let report = |e: &str| {
            let names: Vec<&str> = field_names.iter().map(String::as_str).collect();
            reporter.report(kind.as_str(), mw.name(), e, &names);
        };
        match (downstream, returned) {
            // Row 9: an explicit block always propagates.
            (_, Err(MiddlewareError::Block { reason, checked_by })) => {
                Err(MiddlewareError::Block {
                    reason,
                    checked_by: checked_by.or_else(|| Some(mw.name().to_owned())),
                })
            }
            // Row 1: a short-circuit result (a null or a value of the wrong shape is
            // not a valid result: row 2).
            (None, Ok(v)) if valid_result(kind, &v) => Ok(v),
            // Row 2: failed (or returned null) before calling next: continue the chain.
            (None, other) => {
                let why = match other {
                    Ok(v) if v.is_null() => "returned null without calling next_call".into(),
                    Ok(_) => "returned a value of the wrong shape without calling next_call".into(),
                    Err(e) => describe(&e),
                };
                report(&why);
                run_execution_chain(
                    kind,
                    chain,
                    index + 1,
                    payload,
                    base_fields,
                    terminal,
                    reporter,
                )
                .await
            }
            // Row 3: a transformation (null passes the result through).
            (Some(Ok(r)), Ok(v)) => Ok(if v.is_null() { r } else { v }),
            // Row 4: failed after a successful downstream: R is returned.
            (Some(Ok(r)), Err(e)) => {
                report(&describe(&e));
                Ok(r)
            }
            // Row 7: deliberate recovery.
            (Some(Err(_)), Ok(v)) if !v.is_null() => Ok(v),
            // Null after a failure: E propagates.
            (Some(Err(e)), Ok(_)) => Err(e),
            // Row 6: a deliberate conversion into another failure.
            (Some(Err(_)), Err(MiddlewareError::Failed(f))) => {
                report(&f);
                Err(MiddlewareError::Failed(f))
            }
            // Rows 5 and 8: E propagates unchanged.
            (Some(Err(e)), Err(_)) => Err(e),
        }
    })
}

/// Whether a short-circuit value can stand for the real call: anything but null for a
/// tool (a non-string is JSON-encoded), and for the provider a response with a
/// non-empty `choices` whose every entry has a `message` object.
fn valid_result(kind: Kind, v: &Value) -> bool {
    match kind {
        Kind::LlmExecution => v["choices"].as_array().is_some_and(|c| {
            !c.is_empty() && c.iter().all(|choice| choice["message"]["role"].is_string())
        }),
        _ => !v.is_null(),
    }
}

fn describe<E>(e: &MiddlewareError<E>) -> String {
    match e {
        MiddlewareError::Failed(m) => m.clone(),
        MiddlewareError::NextAlreadyUsed => "next_call may be used only once per frame".into(),
        MiddlewareError::Downstream(_) => {
            "returned a downstream error after a successful call".into()
        }
        MiddlewareError::Block { reason, .. } => reason.clone(),
    }
}

/// The schema versions every middleware call carries.
fn insert_schema_versions(fields: &mut Map<String, Value>) {
    fields.insert(
        "telemetry_schema_version".into(),
        json!(TELEMETRY_SCHEMA_VERSION),
    );
    fields.insert(
        "middleware_schema_version".into(),
        json!(MIDDLEWARE_SCHEMA_VERSION),
    );
}

#[cfg(test)]
#[path = "middleware_tests.rs"]
mod tests;
