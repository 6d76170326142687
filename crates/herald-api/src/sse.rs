//! Server-sent events: a producer task writes frames into a small bounded queue (a
//! slow reader slows the producer, not memory), the body reads them with a
//! `: keepalive` comment in idle stretches, and a reader that goes away closes the
//! queue so the producer can stop its run.

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use serde_json::Value;
use std::time::Duration;
use tokio::sync::mpsc;

/// Frames buffered for a reader before the producer waits.
const QUEUE: usize = 64;
const KEEPALIVE: Duration = Duration::from_secs(30);

/// The producer's side: `false` from a send means the reader is gone.
pub struct Frames(mpsc::Sender<Bytes>);

impl Frames {
    pub async fn raw(&self, text: String) -> bool {
        self.0.send(Bytes::from(text)).await.is_ok()
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
    let (tx, rx) = mpsc::channel::<Bytes>(QUEUE);
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        tokio::select! {
            frame = rx.recv() => frame.map(|f| (Ok::<_, std::convert::Infallible>(f), rx)),
            () = tokio::time::sleep(KEEPALIVE) => Some((Ok(Bytes::from_static(b": keepalive\n\n")), rx)),
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
    (Frames(tx), response)
}
