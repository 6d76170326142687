//! The chat completions client: always streaming, one call with retries and back-off.

use crate::assemble::{Assembler, DeltaEvent};
use crate::endpoint::{Endpoint, without_credentials};
use crate::error::{ErrorClass, LlmError, classify};
use crate::redact::redacted;
use crate::sse::SseDecoder;
use futures_util::StreamExt;
use herald_protocol::{ChatChunk, ChatCompletion, ChatMessage, ToolSpec};
use serde_json::{Value, json};
use std::time::Duration;

/// Largest error body read from a provider.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// How many attempts, and the back-off between them (agent spec §4.5).
#[derive(Debug, Clone, PartialEq)]
pub struct RetryConfig {
    /// Attempts per call (`agent.api_max_retries`, default 3).
    pub max_attempts: u32,
    /// First wait (5 s), doubled each time up to `cap` (120 s), plus up to 50 % jitter.
    pub base: Duration,
    pub cap: Duration,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            max_attempts: 3,
            base: Duration::from_secs(5),
            cap: Duration::from_secs(120),
        }
    }
}

impl RetryConfig {
    /// The waits between attempts: `base` doubling up to `cap`, up to 50 % jitter.
    pub fn waits(&self) -> herald_retry::Backoff {
        herald_retry::Backoff {
            initial: self.base,
            cap: self.cap,
            jitter: 0.5,
        }
    }

    /// The wait after failed attempt `n` (1-based).
    pub fn backoff(&self, n: u32) -> Duration {
        self.waits().wait(n)
    }
}

/// A finished call: the response and how many attempts it took.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutcome {
    pub completion: ChatCompletion,
    pub attempts: u32,
}

/// An OpenAI-compatible chat completions client.
#[derive(Clone)]
pub struct LlmClient {
    http: reqwest::Client,
    /// The run's back-pressure: the provider's stream is read only while its reader
    /// keeps up (see [`crate::flow`]).
    flow: Option<std::sync::Arc<crate::flow::Flow>>,
}

impl Default for LlmClient {
    fn default() -> Self {
        Self::new()
    }
}

impl LlmClient {
    pub fn new() -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(30))
            .user_agent(concat!("herald/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        LlmClient { http, flow: None }
    }

    /// The model ids an OpenAI-compatible server lists at `<base_url>/models`, asked
    /// within `timeout`; `None` when it cannot be reached or answers something else.
    pub async fn list_models(&self, endpoint: &Endpoint, timeout: Duration) -> Option<Vec<String>> {
        let url = format!(
            "{}/models",
            endpoint.called_base_url().trim_end_matches('/')
        );
        let mut request = self.http.get(url).timeout(timeout);
        if !endpoint.api_key.is_empty() {
            request = request.bearer_auth(&endpoint.api_key);
        }
        let response = request.send().await.ok()?.error_for_status().ok()?;
        let body: serde_json::Value = response.json().await.ok()?;
        let ids = body["data"]
            .as_array()?
            .iter()
            .filter_map(|m| m["id"].as_str().map(str::to_owned))
            .collect();
        Some(ids)
    }

    /// The request body: model, messages, tools, token cap, streaming with usage, and
    /// the endpoint's `extra_body` merged in.
    pub fn request_body(
        endpoint: &Endpoint,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
    ) -> Value {
        let mut body = json!({
            "model": endpoint.model,
            "messages": messages,
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        if !tools.is_empty() {
            body["tools"] = json!(tools);
        }
        if let Some(max) = endpoint.max_tokens {
            body["max_tokens"] = json!(max);
        }
        if let Value::Object(map) = &mut body {
            for (k, v) in &endpoint.extra_body {
                map.insert(k.clone(), v.clone());
            }
        }
        body
    }

    /// The request body of [`LlmClient::request_body`] as bytes, written straight from
    /// the messages and tools (no JSON tree in between; the same bytes).
    pub fn request_bytes(
        endpoint: &Endpoint,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
    ) -> Vec<u8> {
        /// The fixed fields, in [`LlmClient::request_body`]'s order.
        #[derive(serde::Serialize)]
        struct Fixed<'a> {
            model: &'a str,
            messages: &'a [ChatMessage],
            stream: bool,
            stream_options: StreamOptions,
            #[serde(skip_serializing_if = "<[ToolSpec]>::is_empty")]
            tools: &'a [ToolSpec],
            #[serde(skip_serializing_if = "Option::is_none")]
            max_tokens: Option<u64>,
            #[serde(flatten)]
            extra: &'a serde_json::Map<String, Value>,
        }
        #[derive(serde::Serialize)]
        struct StreamOptions {
            include_usage: bool,
        }
        const FIXED: [&str; 6] = [
            "model",
            "messages",
            "stream",
            "stream_options",
            "tools",
            "max_tokens",
        ];
        // `extra_body` replacing a fixed field keeps the tree's last-one-wins order.
        if endpoint
            .extra_body
            .keys()
            .any(|k| FIXED.contains(&k.as_str()))
        {
            let body = Self::request_body(endpoint, messages, tools);
            return serde_json::to_vec(&body).unwrap_or_default();
        }
        let fixed = Fixed {
            model: &endpoint.model,
            messages,
            stream: true,
            stream_options: StreamOptions {
                include_usage: true,
            },
            tools,
            max_tokens: endpoint.max_tokens,
            extra: &endpoint.extra_body,
        };
        serde_json::to_vec(&fixed).unwrap_or_default()
    }

    /// This client (its connection pool shared) reading streams only as fast as
    /// `flow`'s reader takes the output.
    pub fn paced(&self, flow: std::sync::Arc<crate::flow::Flow>) -> LlmClient {
        LlmClient {
            http: self.http.clone(),
            flow: Some(flow),
        }
    }

    /// One streamed call; `on_delta` sees text, reasoning and tool-call starts as they
    /// arrive.
    pub async fn stream_once(
        &self,
        endpoint: &Endpoint,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
        on_delta: &mut (dyn FnMut(DeltaEvent) + Send),
    ) -> Result<ChatCompletion, LlmError> {
        let body = Self::request_bytes(endpoint, messages, tools);
        self.stream_bytes(endpoint, body, on_delta).await
    }

    /// One streamed call with a request body that is already built (and possibly
    /// replaced by middleware). An `extra_body` object in it is merged into the body,
    /// as the OpenAI SDKs merge their `extra_body` argument (a middleware written for
    /// Hermes sets `request["extra_body"]["metadata"]`).
    pub async fn stream_body(
        &self,
        endpoint: &Endpoint,
        body: &Value,
        on_delta: &mut (dyn FnMut(DeltaEvent) + Send),
    ) -> Result<ChatCompletion, LlmError> {
        let bytes = match body.get("extra_body") {
            Some(Value::Object(_)) => serde_json::to_vec(&merge_extra_body(body.clone())),
            _ => serde_json::to_vec(body),
        }
        .unwrap_or_default();
        self.stream_bytes(endpoint, bytes, on_delta).await
    }

    /// One streamed call with the request body's JSON bytes.
    async fn stream_bytes(
        &self,
        endpoint: &Endpoint,
        body: Vec<u8>,
        on_delta: &mut (dyn FnMut(DeltaEvent) + Send),
    ) -> Result<ChatCompletion, LlmError> {
        let url = format!(
            "{}/chat/completions",
            endpoint.called_base_url().trim_end_matches('/')
        );
        let mut req = self.http.post(&url);
        if !endpoint.api_key.is_empty() {
            req = req.bearer_auth(&endpoint.api_key);
        }
        let mut req = req
            .timeout(endpoint.request_timeout)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        for (k, v) in &endpoint.extra_headers {
            req = req.header(k, v);
        }
        let again = req.try_clone();
        let resp = match req.send().await {
            Ok(resp) => resp,
            Err(e) => {
                let error = transport_error(&e, endpoint);
                let Some(again) = again.filter(|_| refused_locally(&error, endpoint)) else {
                    return Err(error);
                };
                // A local server that refuses the connection is not running: one quick
                // retry (it may be starting), then an error no caller retries.
                tokio::time::sleep(LOCAL_REFUSED_WAIT).await;
                again.send().await.map_err(|e| {
                    let error = transport_error(&e, endpoint);
                    match refused_locally(&error, endpoint) {
                        true => error.not_listening(),
                        false => error,
                    }
                })?
            }
        };
        let status = resp.status().as_u16();
        if !(200..300).contains(&status) {
            let bytes = resp.bytes().await.unwrap_or_default();
            let text =
                String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_ERROR_BODY)]).into_owned();
            let message = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
                .unwrap_or(text);
            let message: String = message.chars().take(500).collect();
            let message = redacted(&message, endpoint);
            return Err(LlmError::new(
                classify(status, &message),
                Some(status),
                format!(
                    "provider answered HTTP {status}: {message}{}",
                    key_hint(status, endpoint)
                ),
            ));
        }
        if is_json(&resp) {
            return read_plain_completion(resp, endpoint, on_delta).await;
        }
        let mut stream = resp.bytes_stream();
        let mut decoder = SseDecoder::new();
        let mut assembler = Assembler::new();
        let mut done = false;
        while !done {
            if let Some(flow) = &self.flow {
                // What was read so far reaches the flow through channels drained in
                // this same task (the turn's delta forwarding, the run's event
                // forwarding): yielding lets them count it before room is asked for.
                // Without it a stream that is always ready is read whole unpaced.
                tokio::task::yield_now().await;
                flow.room().await;
            }
            let next = tokio::time::timeout(endpoint.stale_timeout, stream.next())
                .await
                .map_err(|_| {
                    LlmError::new(
                        ErrorClass::Timeout,
                        None,
                        format!(
                            "no data from the provider for {}s",
                            endpoint.stale_timeout.as_secs()
                        ),
                    )
                })?;
            let events = match next {
                Some(Ok(bytes)) => decoder
                    .feed(&bytes)
                    .map_err(|e| LlmError::new(ErrorClass::InvalidResponse, None, e.to_string()))?,
                Some(Err(e)) => return Err(transport_error(&e, endpoint)),
                None => {
                    let tail = decoder.finish();
                    done = true;
                    tail
                }
            };
            for data in events {
                if data.trim() == "[DONE]" {
                    return finish(assembler, endpoint);
                }
                let chunk: ChatChunk = serde_json::from_str(&data).map_err(|e| {
                    LlmError::new(
                        ErrorClass::InvalidResponse,
                        None,
                        format!("malformed stream chunk: {e}"),
                    )
                })?;
                if let Some(err) = &chunk.error {
                    let message = redacted(
                        err["message"].as_str().unwrap_or("error in stream"),
                        endpoint,
                    );
                    let status = err["code"].as_u64().map(|c| c as u16);
                    return Err(LlmError::new(
                        classify(status.unwrap_or(500), &message),
                        status,
                        message,
                    ));
                }
                for delta in assembler.push(chunk) {
                    on_delta(delta);
                }
            }
        }
        // The stream ended without [DONE]: acceptable only if the answer was complete.
        if assembler.has_choice() && assembler_finished(&assembler) {
            return finish(assembler, endpoint);
        }
        Err(LlmError::new(
            ErrorClass::InvalidResponse,
            None,
            "the stream ended before the answer was complete",
        ))
    }

    /// A call with retries on transient failures (rate limits, 5xx, timeouts, invalid
    /// responses); others fail at once.
    pub async fn chat(
        &self,
        endpoint: &Endpoint,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
        retry: &RetryConfig,
        on_delta: &mut (dyn FnMut(DeltaEvent) + Send),
    ) -> Result<CallOutcome, LlmError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.stream_once(endpoint, messages, tools, on_delta).await {
                Ok(completion) => {
                    return Ok(CallOutcome {
                        completion,
                        attempts: attempt,
                    });
                }
                Err(e) if e.retryable() && attempt < retry.max_attempts.max(1) => {
                    let wait = retry.backoff(attempt);
                    tracing::warn!(attempt, wait_ms = wait.as_millis() as u64, error = %e, "provider call failed; retrying");
                    tokio::time::sleep(wait).await;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// The wait before the one retry of a connection a local server refused.
const LOCAL_REFUSED_WAIT: Duration = Duration::from_millis(250);

/// A connection refused by a server on this machine or the local network.
fn refused_locally(e: &LlmError, endpoint: &Endpoint) -> bool {
    e.class == ErrorClass::Network
        && e.message.contains("connection refused")
        && crate::endpoint::is_local(&endpoint.base_url)
}

fn assembler_finished(a: &Assembler) -> bool {
    a.finish_reason().is_some()
}

fn finish(assembler: Assembler, endpoint: &Endpoint) -> Result<ChatCompletion, LlmError> {
    if !assembler.has_choice() {
        return Err(LlmError::new(
            ErrorClass::InvalidResponse,
            None,
            "the provider sent no choices (empty response)",
        ));
    }
    Ok(assembler.finish(&endpoint.model))
}

/// A provider answer with a JSON content type: a whole completion, not a stream (some
/// proxies and older servers answer `stream: true` this way).
fn is_json(resp: &reqwest::Response) -> bool {
    resp.headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let v = v.trim_start().to_ascii_lowercase();
            v.starts_with("application/json") || v.starts_with("application/problem+json")
        })
}

/// A non-streamed completion as providers send it (missing bookkeeping fields allowed).
#[derive(serde::Deserialize)]
struct PlainCompletion {
    #[serde(default)]
    id: String,
    #[serde(default)]
    created: u64,
    #[serde(default)]
    model: String,
    #[serde(default)]
    choices: Vec<herald_protocol::CompletionChoice>,
    #[serde(default)]
    usage: herald_protocol::Usage,
    #[serde(default)]
    error: Option<Value>,
}

/// Reads a JSON completion (bounded by the request timeout) as the whole answer; its
/// text is reported as one delta so streaming callers still see it.
async fn read_plain_completion(
    resp: reqwest::Response,
    endpoint: &Endpoint,
    on_delta: &mut (dyn FnMut(DeltaEvent) + Send),
) -> Result<ChatCompletion, LlmError> {
    let bytes = resp
        .bytes()
        .await
        .map_err(|e| transport_error(&e, endpoint))?;
    let plain: PlainCompletion = serde_json::from_slice(&bytes).map_err(|e| {
        LlmError::new(
            ErrorClass::InvalidResponse,
            None,
            format!("the provider's JSON answer is not a chat completion: {e}"),
        )
    })?;
    if let Some(err) = plain.error {
        let message = redacted(err["message"].as_str().unwrap_or("error"), endpoint);
        let status = err["code"].as_u64().and_then(|c| u16::try_from(c).ok());
        return Err(LlmError::new(
            classify(status.unwrap_or(500), &message),
            status,
            message,
        ));
    }
    if plain.choices.is_empty() {
        return Err(LlmError::new(
            ErrorClass::InvalidResponse,
            None,
            "the provider sent no choices (empty response)",
        ));
    }
    if let Some(text) = plain.choices[0]
        .message
        .content
        .as_deref()
        .filter(|t| !t.is_empty())
    {
        on_delta(DeltaEvent::Text(text.to_owned()));
    }
    Ok(ChatCompletion {
        id: plain.id,
        object: "chat.completion".into(),
        created: plain.created,
        model: if plain.model.is_empty() {
            endpoint.model.clone()
        } else {
            plain.model
        },
        choices: plain.choices,
        usage: plain.usage,
    })
}

/// For a refused key (401, 403): the setting that supplied it, or that none was sent.
fn key_hint(status: u16, endpoint: &Endpoint) -> String {
    if !matches!(status, 401 | 403) {
        return String::new();
    }
    match endpoint.api_key_from.as_deref() {
        Some(from) => format!(" (the API key comes from `{from}`)"),
        None if endpoint.api_key == crate::endpoint::NO_KEY => {
            " (no API key is configured for this endpoint)".to_owned()
        }
        None => String::new(),
    }
}

/// A transport failure, saying where (host and port, and which setting chose that URL)
/// and why (connection refused, DNS, TLS, timeout). The URL's path and any key stay out.
fn transport_error(e: &reqwest::Error, endpoint: &Endpoint) -> LlmError {
    let cause = transport_cause(e);
    let class = if e.is_timeout() || cause == "timed out" {
        ErrorClass::Timeout
    } else if cause.starts_with("TLS") {
        ErrorClass::Tls
    } else {
        ErrorClass::Network
    };
    let place = e
        .url()
        .and_then(|u| Some(format!("{}:{}", u.host_str()?, u.port_or_known_default()?)))
        .unwrap_or_else(|| "the provider".to_owned());
    let setting = endpoint
        .base_url_from
        .as_deref()
        .map(|k| format!(" (base URL from `{k}`)"))
        .unwrap_or_default();
    LlmError::new(
        class,
        None,
        format!("cannot reach the provider at {place}{setting}: {cause}"),
    )
}

/// The most telling cause in a transport error's chain.
fn transport_cause(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        return "timed out".into();
    }
    // reqwest names the URL it called, credentials and all: they stay out.
    let mut deepest = match e.url() {
        Some(u) => e
            .to_string()
            .replace(u.as_str(), &without_credentials(u.as_str())),
        None => e.to_string(),
    };
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind as K;
            match io.kind() {
                K::ConnectionRefused => return "connection refused".into(),
                K::ConnectionReset => return "connection reset by the server".into(),
                K::TimedOut => return "timed out".into(),
                _ => {}
            }
        }
        deepest = s.to_string();
        source = s.source();
    }
    let lower = deepest.to_ascii_lowercase();
    if lower.contains("dns") || lower.contains("lookup") || lower.contains("name or service") {
        format!("DNS lookup failed ({deepest})")
    } else if lower.contains("certificate") || lower.contains("tls") || lower.contains("handshake")
    {
        format!("TLS error ({deepest})")
    } else {
        deepest
    }
}

/// `body` with the fields of its `extra_body` object moved to the top level (they win
/// over fields of the same name) and `extra_body` itself gone.
pub fn merge_extra_body(mut body: Value) -> Value {
    if let Value::Object(map) = &mut body
        && let Some(Value::Object(extra)) = map.remove("extra_body")
    {
        for (k, v) in extra {
            map.insert(k, v);
        }
    }
    body
}

#[cfg(test)]
mod extra_body_tests {
    use super::merge_extra_body;
    use serde_json::json;

    #[test]
    fn extra_body_fields_move_to_the_top_and_win() {
        let body = json!({"model": "m", "metadata": {"a": 1}, "extra_body": {"metadata": {"b": 2}, "top_k": 3}});
        assert_eq!(
            merge_extra_body(body),
            json!({"model": "m", "metadata": {"b": 2}, "top_k": 3})
        );
        assert_eq!(
            merge_extra_body(json!({"model": "m"})),
            json!({"model": "m"})
        );
    }
}

#[cfg(test)]
mod refused_tests {
    use super::*;

    #[tokio::test]
    async fn a_refused_local_connection_fails_after_one_quick_retry() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or(9);
        let endpoint = Endpoint::new(format!("http://127.0.0.1:{port}/v1"), "k", "m");
        let started = std::time::Instant::now();
        let result = LlmClient::new()
            .chat(&endpoint, &[], &[], &RetryConfig::default(), &mut |_| {})
            .await;
        let Err(e) = result else {
            panic!("nothing listens on port {port}");
        };
        assert!(e.message.contains("connection refused"), "{e}");
        assert!(e.message.contains("nothing listens there"), "{e}");
        assert!(!e.retryable(), "no caller retries it");
        // The default back-off would wait 5 s and more before its second attempt.
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
    }
}
