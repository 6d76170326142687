//! Python callbacks as herald's middleware and observers: each adapter sends its call to
//! the plugin host and maps the answer onto the failure rules of A7 (fail-open, a
//! downstream error propagated unchanged, `pre_tool_call` failing closed).

use crate::host::{CallError, Link};
use futures_util::future::BoxFuture;
use herald_agent::middleware::{
    BoxFut, ExecutionMiddleware, FailureReporter, Kind, MiddlewareError, Next, RequestMiddleware,
};
use herald_agent::{Observer, ToolDirective};
use herald_llm::LlmError;
use serde_json::{Map, Value, json};
use std::sync::{Arc, Mutex};

/// A registered Python callback: its id in the host and how it reads in a log line.
#[derive(Debug, Clone)]
pub struct Callback {
    pub id: String,
    /// `module.qualname`.
    pub name: String,
}

/// The fields of a call as sent, written from a borrow: `original_<key>` is left out
/// (and `original_same` set) when it equals `<key>`, so a 100 KB request travels once.
struct Fields<'a> {
    all: &'a Map<String, Value>,
    skip: Option<String>,
}

impl<'a> Fields<'a> {
    fn new(all: &'a Map<String, Value>, key: &str) -> Fields<'a> {
        let original = format!("original_{key}");
        let same = all.get(&original).is_some() && all.get(&original) == all.get(key);
        Fields {
            all,
            skip: same.then_some(original),
        }
    }
}

impl serde::Serialize for Fields<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(None)?;
        for (k, v) in self.all {
            if self.skip.as_deref() != Some(k.as_str()) {
                map.serialize_entry(k, v)?;
            }
        }
        if self.skip.is_some() {
            map.serialize_entry("original_same", &true)?;
        }
        map.end()
    }
}

/// What `middleware.request` / `middleware.execute` / `hook.invoke` carry.
#[derive(serde::Serialize)]
struct Invocation<'a> {
    callback_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hook: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    frame_id: Option<&'a str>,
    fields: Fields<'a>,
}

fn value_of(answer: Value) -> Value {
    match answer {
        Value::Object(mut o) => o.remove("value").unwrap_or(Value::Null),
        _ => Value::Null,
    }
}

/// A `llm_request` or `tool_request` callback.
pub struct RemoteRequest {
    pub link: Arc<Link>,
    pub kind: Kind,
    pub callback: Callback,
}

#[async_trait::async_trait]
impl RequestMiddleware for RemoteRequest {
    fn name(&self) -> &str {
        &self.callback.name
    }

    async fn call(&self, fields: &Map<String, Value>) -> Result<Option<Value>, String> {
        let key = if self.kind == Kind::LlmRequest {
            "request"
        } else {
            "args"
        };
        let params = Invocation {
            callback_id: &self.callback.id,
            kind: Some(self.kind.as_str()),
            hook: None,
            frame_id: None,
            fields: Fields::new(fields, key),
        };
        let answer = self
            .link
            .call("middleware.request", params, &self.callback.id, None)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Some(value_of(answer)).filter(|v| !v.is_null()))
    }
}

/// What a downstream failure tells a Python `DownstreamError`.
pub trait Downstream: Clone + Send + Sync + 'static {
    fn describe(&self) -> Value;
}

impl Downstream for LlmError {
    fn describe(&self) -> Value {
        json!({"error_type": format!("{:?}", self.class), "message": self.message,
               "status_code": self.status, "retryable": self.retryable()})
    }
}

impl Downstream for String {
    fn describe(&self) -> Value {
        json!({"error_type": "ToolError", "message": self, "status_code": null, "retryable": false})
    }
}

/// Abandons a frame when its call is dropped before it finished (an interrupt).
struct FrameGuard {
    link: Arc<Link>,
    frame: Option<String>,
}

impl FrameGuard {
    /// The call finished: nothing to abandon.
    fn done(mut self) -> Self {
        self.frame = None;
        self
    }
}

impl Drop for FrameGuard {
    fn drop(&mut self) {
        if let Some(f) = self.frame.take() {
            self.link.abandon_frame(&f);
        }
    }
}

static NEXT_REF: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A `llm_execution` or `tool_execution` callback, around the rest of the chain.
pub struct RemoteExecution {
    pub link: Arc<Link>,
    pub kind: Kind,
    pub callback: Callback,
}

impl RemoteExecution {
    /// The frame's `next`, keeping a downstream failure to hand back unchanged.
    fn next_fn<E: Downstream>(
        next: Next<E>,
        failed: Arc<Mutex<Option<MiddlewareError<E>>>>,
    ) -> crate::host::NextFn {
        Box::new(
            move |payload: Option<Value>| -> BoxFuture<'static, Result<Value, Value>> {
                Box::pin(async move {
                    match next.call(payload).await {
                        Ok(v) => Ok(v),
                        Err(e) => {
                            let data = match &e {
                                MiddlewareError::Downstream(d) => d.describe(),
                                MiddlewareError::Block { reason, .. } => {
                                    json!({"error_type": "Blocked", "message": reason})
                                }
                                MiddlewareError::Failed(m) => {
                                    json!({"error_type": "MiddlewareError", "message": m})
                                }
                                MiddlewareError::NextAlreadyUsed => {
                                    json!({"error_type": "RuntimeError", "message": "next_call reused"})
                                }
                            };
                            let mut data = data;
                            let n = NEXT_REF.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            data["downstream_ref"] = json!(format!("d{n}"));
                            if let Ok(mut f) = failed.lock() {
                                *f = Some(e);
                            }
                            Err(data)
                        }
                    }
                })
            },
        )
    }

    async fn run<E: Downstream>(
        link: Arc<Link>,
        kind: Kind,
        callback: Callback,
        fields: Map<String, Value>,
        next: Next<E>,
    ) -> Result<Value, MiddlewareError<E>> {
        let failed = Arc::new(Mutex::new(None));
        let frame = link.open_frame(Self::next_fn(next, failed.clone()));
        let guard = FrameGuard {
            link: link.clone(),
            frame: Some(frame.clone()),
        };
        let key = if kind == Kind::LlmExecution {
            "request"
        } else {
            "args"
        };
        let params = Invocation {
            callback_id: &callback.id,
            kind: Some(kind.as_str()),
            hook: None,
            frame_id: Some(&frame),
            fields: Fields::new(&fields, key),
        };
        let answer = link
            .call("middleware.execute", params, &callback.id, Some(&frame))
            .await;
        link.close_frame(&frame).await;
        drop(guard.done());
        let downstream = failed.lock().ok().and_then(|mut f| f.take());
        match (answer, downstream) {
            (Ok(v), _) => Ok(value_of(v)),
            (Err(CallError::Blocked(reason)), _) => Err(MiddlewareError::Block {
                reason,
                checked_by: Some(callback.name),
            }),
            // Re-raised herald's own error, or the host went away after it: E as it was.
            (
                Err(CallError::Raised {
                    downstream_ref: Some(_),
                    ..
                }),
                Some(e),
            ) => Err(e),
            (Err(CallError::Timeout(_) | CallError::Down(_)), Some(e)) => Err(e),
            (Err(e), _) => Err(MiddlewareError::Failed(e.to_string())),
        }
    }
}

impl<E: Downstream> ExecutionMiddleware<E> for RemoteExecution {
    fn name(&self) -> &str {
        &self.callback.name
    }

    fn call(
        &self,
        fields: Map<String, Value>,
        next: Next<E>,
    ) -> BoxFut<'static, Result<Value, MiddlewareError<E>>> {
        Box::pin(Self::run(
            self.link.clone(),
            self.kind,
            self.callback.clone(),
            fields,
            next,
        ))
    }
}

/// Every Python hook callback, as one observer, in registration order.
pub struct RemoteHooks {
    pub link: Arc<Link>,
    /// (hook name, callback), in registration order.
    pub hooks: Vec<(String, Callback)>,
    pub reporter: Arc<FailureReporter>,
    /// `pre_tool_call` blocks when its callback fails (`pre_tool_call_when_down`).
    pub block_when_down: bool,
}

impl RemoteHooks {
    /// Each callback of `hook`, called in order: their values (failures reported once
    /// and left out, or `Err` for the first failure when `stop_on_failure`).
    async fn invoke(
        &self,
        hook: &str,
        payload: &Value,
        stop_on_failure: bool,
    ) -> Result<Vec<Value>, (String, String)> {
        let mut out = Vec::new();
        for (_, cb) in self.hooks.iter().filter(|(h, _)| h == hook) {
            let empty = Map::new();
            let params = Invocation {
                callback_id: &cb.id,
                kind: None,
                hook: Some(hook),
                frame_id: None,
                fields: Fields::new(payload.as_object().unwrap_or(&empty), ""),
            };
            match self.link.call("hook.invoke", params, &cb.id, None).await {
                Ok(answer) => out.push(value_of(answer)),
                Err(e) => {
                    let names: Vec<&str> = payload
                        .as_object()
                        .map(|o| o.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    self.reporter
                        .report_in("Hook", hook, &cb.name, &e.to_string(), &names);
                    if stop_on_failure {
                        return Err((cb.name.clone(), e.to_string()));
                    }
                }
            }
        }
        Ok(out)
    }

    async fn notify(&self, hook: &str, payload: &Value) {
        let _ = self.invoke(hook, payload, false).await;
    }

    /// The first answer that is a non-empty string (`transform_*`).
    async fn first_text(&self, hook: &str, payload: &Value) -> Option<String> {
        let answers = self.invoke(hook, payload, false).await.unwrap_or_default();
        answers.into_iter().find_map(|v| match v {
            Value::String(s) if !s.is_empty() => Some(s),
            _ => None,
        })
    }
}

#[async_trait::async_trait]
impl Observer for RemoteHooks {
    fn name(&self) -> &str {
        "python-plugins"
    }
    async fn pre_api_request(&self, payload: &Value) {
        self.notify("pre_api_request", payload).await
    }
    async fn post_api_request(&self, payload: &Value) {
        self.notify("post_api_request", payload).await
    }
    async fn api_request_error(&self, payload: &Value) {
        self.notify("api_request_error", payload).await
    }
    /// The first valid directive of the callbacks, in hook order, as Hermes reads them
    /// (see [`ToolDirective::read`]); a failing callback blocks (fails closed) unless
    /// `pre_tool_call_when_down: allow`.
    async fn pre_tool_call(&self, payload: &Value) -> Option<ToolDirective> {
        match self
            .invoke("pre_tool_call", payload, self.block_when_down)
            .await
        {
            Err((callback, error)) => Some(ToolDirective::Block(format!(
                "blocked: the pre_tool_call hook {callback} failed ({error})"
            ))),
            Ok(answers) => answers.iter().find_map(ToolDirective::read),
        }
    }
    async fn post_tool_call(&self, payload: &Value) {
        self.notify("post_tool_call", payload).await
    }
    async fn on_session_start(&self, payload: &Value) {
        self.notify("on_session_start", payload).await
    }
    /// Every callback's context (a string or `{"context": str}`), joined as the agent
    /// joins the answers of several observers.
    async fn pre_llm_call(&self, payload: &Value) -> Option<String> {
        let answers = self
            .invoke("pre_llm_call", payload, false)
            .await
            .unwrap_or_default();
        let contexts: Vec<String> = answers
            .into_iter()
            .filter_map(|v| match v {
                Value::String(s) => Some(s),
                Value::Object(o) => o.get("context").and_then(Value::as_str).map(str::to_owned),
                _ => None,
            })
            .filter(|s| !s.trim().is_empty())
            .collect();
        (!contexts.is_empty()).then(|| contexts.join("\n\n"))
    }
    async fn transform_tool_result(&self, payload: &Value) -> Option<String> {
        self.first_text("transform_tool_result", payload).await
    }
    async fn transform_llm_output(&self, payload: &Value) -> Option<String> {
        self.first_text("transform_llm_output", payload).await
    }
    async fn post_llm_call(&self, payload: &Value) {
        self.notify("post_llm_call", payload).await
    }
    async fn on_session_end(&self, payload: &Value) {
        self.notify("on_session_end", payload).await
    }
    async fn on_session_finalize(&self, payload: &Value) {
        self.notify("on_session_finalize", payload).await
    }
    async fn subagent_start(&self, payload: &Value) {
        self.notify("subagent_start", payload).await
    }
    async fn subagent_stop(&self, payload: &Value) {
        self.notify("subagent_stop", payload).await
    }
}
