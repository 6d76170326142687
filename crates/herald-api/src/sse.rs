//! Server-sent events: a producer task writes frames into a queue bounded in bytes
//! ([`BUFFERED`]; a slow reader slows the producer, and through the run's flow the
//! provider, not memory), the body reads them with a `: keepalive` comment in idle
//! stretches, and a reader that goes away, or takes nothing for [`WRITE_TIMEOUT`],
//! closes the queue so the producer can stop its run.

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use herald_http::{Outbox, Outgoing};
use serde_json::Value;
use std::time::Duration;

/// Bytes of frames buffered for a reader before the producer waits.
pub const BUFFERED: usize = 512 * 1024;
/// A reader that takes nothing for this long is treated as gone (Hermes's WebSocket
/// write timeout).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
const KEEPALIVE: Duration = Duration::from_secs(30);

/// The producer's side: `false` from a send means the reader is gone (or stalled past
/// the write timeout).
pub struct Frames {
    queue: Outbox<Bytes>,
}

impl Frames {
    pub async fn raw(&self, text: String) -> bool {
        self.queue.send(Bytes::from(text)).await
    }

    /// Whether the reader is gone.
    pub fn gone(&self) -> bool {
        self.queue.is_closed()
    }

    /// What `produce` gives, unless the reader goes away first (`false`): a producer
    /// that writes nothing for a while (a tool or a subagent at work) still learns at
    /// once that its client closed the connection.
    pub async fn unless_gone(&self, produce: impl Future<Output = bool>) -> bool {
        tokio::select! {
            done = produce => done,
            () = self.queue.closed() => false,
        }
    }

    /// `data: <json>` as a default event.
    pub async fn data(&self, value: &impl serde::Serialize) -> bool {
        // Wire types and JSON values always encode.
        let json = serde_json::to_string(value).unwrap_or_default();
        self.raw(format!("data: {json}\n\n")).await
    }

    /// A named event.
    pub async fn event(&self, name: &str, value: &Value) -> bool {
        self.raw(format!("event: {name}\ndata: {value}\n\n")).await
    }
}

/// A streaming response and the producer's side of its queue.
pub fn channel() -> (Frames, Response) {
    let (queue, rx): (_, Outgoing<Bytes>) = herald_http::outbox(BUFFERED, Some(WRITE_TIMEOUT));
    // Counted as an open stream until the body is dropped.
    let open = herald_metrics::get().doors.open("sse");
    // A frame's room is given back as the body hands it to the connection.
    let stream = futures_util::stream::unfold((rx, open), |(mut rx, open)| async move {
        tokio::select! {
            frame = rx.recv() => frame.map(|f| (Ok::<_, std::convert::Infallible>(f), (rx, open))),
            () = tokio::time::sleep(KEEPALIVE) => Some((Ok(Bytes::from_static(b": keepalive\n\n")), (rx, open))),
        }
    });
    let mut response = Response::new(Body::from_stream(stream));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    (Frames { queue }, response)
}
