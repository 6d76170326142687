//! The older HTTP+SSE transport (`transport: sse`, MCP 2024-11-05), which the official
//! Rust SDK no longer carries: a `GET` opens an event stream whose first `endpoint`
//! event names where to `POST` messages (on the same origin, as the Python SDK
//! insists); the server's messages come back as `message` events. The stream is read
//! with bounded lines and events, and given up after 300 s without a byte (Hermes's
//! `sse_read_timeout`).

use http::HeaderMap;
use http::header::{ACCEPT, CONTENT_TYPE};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Longest wait for a byte of the event stream.
const READ_TIMEOUT: Duration = Duration::from_secs(300);
/// Longest event (its data lines together), and so the longest line.
const MAX_EVENT: usize = crate::connection::MAX_MESSAGE;
/// Longest wait for a `POST` of one message to be taken.
const POST_TIMEOUT: Duration = Duration::from_secs(60);
/// Messages read ahead of the client.
const BACKLOG: usize = 64;

/// Why a message could not be sent.
#[derive(Debug, thiserror::Error)]
pub enum SseError {
    #[error("{0}")]
    Post(String),
}

/// A connection over HTTP+SSE.
pub struct SseTransport {
    client: reqwest::Client,
    endpoint: reqwest::Url,
    headers: HeaderMap,
    incoming: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
    reader: tokio::task::JoinHandle<()>,
}

/// Opens the event stream at `url` with `client` (which follows no redirect) and
/// waits for its `endpoint` event.
pub async fn open(
    url: &str,
    headers: HeaderMap,
    client: reqwest::Client,
) -> Result<SseTransport, String> {
    let base = reqwest::Url::parse(url).map_err(|e| format!("url {url:?}: {e}"))?;
    let response = client
        .get(base.clone())
        .headers(headers.clone())
        .header(ACCEPT, "text/event-stream")
        .send()
        .await
        .map_err(|e| {
            herald_llm::redact::shapes_redacted(&format!("the event stream did not open: {e}"))
        })?;
    if !response.status().is_success() {
        return Err(format!(
            "the event stream answered HTTP {}",
            response.status().as_u16()
        ));
    }
    let (messages, incoming) = mpsc::channel(BACKLOG);
    let (found, endpoint) = oneshot::channel();
    // Stopped with this attempt if it is given up (its connect_timeout) or fails.
    let reader = Reader(Some(tokio::spawn(read_events(
        response, base, found, messages,
    ))));
    let endpoint = match endpoint.await {
        Ok(found) => found?,
        Err(_) => return Err("the event stream ended before its endpoint event".into()),
    };
    let reader = reader.keep();
    Ok(SseTransport {
        client,
        endpoint,
        headers,
        incoming,
        reader,
    })
}

/// The reader's task, stopped when dropped unless kept.
struct Reader(Option<tokio::task::JoinHandle<()>>);

impl Reader {
    fn keep(mut self) -> tokio::task::JoinHandle<()> {
        match self.0.take() {
            Some(task) => task,
            None => tokio::spawn(async {}),
        }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        if let Some(task) = &self.0 {
            task.abort();
        }
    }
}

/// Reads the stream: the endpoint goes to `found` (once), messages to `messages`.
async fn read_events(
    mut response: reqwest::Response,
    base: reqwest::Url,
    found: oneshot::Sender<Result<reqwest::Url, String>>,
    messages: mpsc::Sender<RxJsonRpcMessage<RoleClient>>,
) {
    let mut found = Some(found);
    let mut parser = EventParser::default();
    loop {
        let chunk = match tokio::time::timeout(READ_TIMEOUT, response.chunk()).await {
            Ok(Ok(Some(chunk))) => chunk,
            _ => return,
        };
        let Some(events) = parser.feed(&chunk) else {
            let why = "an SSE event of the server is over 16 MiB: the connection is closed";
            match found.take() {
                Some(tx) => {
                    let _ = tx.send(Err(why.to_owned()));
                }
                None => tracing::warn!("{why}"),
            }
            return;
        };
        for (name, data) in events {
            match name.as_str() {
                "endpoint" => {
                    if let Some(tx) = found.take() {
                        let _ = tx.send(endpoint_of(&base, &data));
                    }
                }
                "message" | "" => match serde_json::from_str(&data) {
                    Ok(message) => {
                        if messages.send(message).await.is_err() {
                            return;
                        }
                    }
                    Err(e) => tracing::debug!("an MCP server's SSE message is not JSON-RPC: {e}"),
                },
                _ => {}
            }
        }
    }
}

/// Where messages go: `data` against the stream's URL, on the same origin.
fn endpoint_of(base: &reqwest::Url, data: &str) -> Result<reqwest::Url, String> {
    let url = base
        .join(data.trim())
        .map_err(|e| format!("the endpoint event {data:?} is not a URL: {e}"))?;
    match url.origin() == base.origin() {
        true => Ok(url),
        false => Err(format!(
            "the endpoint {url} is not on the event stream's origin: refused"
        )),
    }
}

impl rmcp::transport::Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let request = self
            .client
            .post(self.endpoint.clone())
            .headers(self.headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .timeout(POST_TIMEOUT)
            .json(&item);
        async move {
            let response = request
                .send()
                .await
                .map_err(|e| SseError::Post(herald_llm::redact::shapes_redacted(&e.to_string())))?;
            match response.status().is_success() {
                true => Ok(()),
                false => Err(SseError::Post(format!(
                    "the message endpoint answered HTTP {}",
                    response.status().as_u16()
                ))),
            }
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.abort();
        Ok(())
    }
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// The `text/event-stream` format, fed in chunks: whole events out (name, data).
#[derive(Default)]
struct EventParser {
    line: Vec<u8>,
    name: String,
    data: String,
}

impl EventParser {
    /// The events `chunk` completes; `None` when an event grew past [`MAX_EVENT`].
    fn feed(&mut self, chunk: &[u8]) -> Option<Vec<(String, String)>> {
        let mut out = Vec::new();
        for &b in chunk {
            if b != b'\n' {
                self.line.push(b);
                if self.line.len() + self.data.len() > MAX_EVENT {
                    return None;
                }
                continue;
            }
            let line = std::mem::take(&mut self.line);
            let line = String::from_utf8_lossy(&line);
            let line = line.strip_suffix('\r').unwrap_or(&line);
            if line.is_empty() {
                if !self.data.is_empty() || !self.name.is_empty() {
                    let data = std::mem::take(&mut self.data);
                    out.push((std::mem::take(&mut self.name), data));
                }
                continue;
            }
            let (field, value) = match line.split_once(':') {
                Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                None => (line, ""),
            };
            match field {
                "event" => self.name = value.to_owned(),
                "data" => {
                    if !self.data.is_empty() {
                        self.data.push('\n');
                    }
                    self.data.push_str(value);
                }
                _ => {}
            }
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_read_across_chunks_and_comments_are_skipped() {
        let mut p = EventParser::default();
        assert_eq!(
            p.feed(b": ping\r\n\r\nevent: endpoint\r\ndata: /messages/?session_id=1"),
            Some(vec![])
        );
        let events = p.feed(b"\r\n\r\ndata: {\"a\":\ndata: 1}\n\n").unwrap();
        assert_eq!(
            events,
            vec![
                ("endpoint".to_owned(), "/messages/?session_id=1".to_owned()),
                (String::new(), "{\"a\":\n1}".to_owned()),
            ]
        );
    }

    #[test]
    fn an_endless_line_is_refused() {
        let mut p = EventParser::default();
        let chunk = vec![b'x'; 1 << 20];
        let mut refused = false;
        for _ in 0..20 {
            if p.feed(&chunk).is_none() {
                refused = true;
                break;
            }
        }
        assert!(refused);
    }

    #[test]
    fn the_endpoint_must_stay_on_the_streams_origin() {
        let base = reqwest::Url::parse("http://127.0.0.1:8000/sse").unwrap();
        assert_eq!(
            endpoint_of(&base, "/messages/?session_id=ab")
                .unwrap()
                .as_str(),
            "http://127.0.0.1:8000/messages/?session_id=ab"
        );
        assert!(endpoint_of(&base, "http://evil.example/messages").is_err());
        assert!(endpoint_of(&base, "//evil.example/x").is_err());
    }
}
