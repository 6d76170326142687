//! One client: frames in, each request run as a task of its own (answers may leave out
//! of order, matched by id), at most [`MAX_IN_FLIGHT`] at once (then reading waits).

use crate::errors::RpcError;
use crate::frame;
use crate::gateway::Gateway;
use crate::methods;
use crate::outbox::Outbox;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// Requests running at once per client.
pub const MAX_IN_FLIGHT: usize = 1024;
/// The largest frame read; a longer one is answered with -32600 and skipped.
pub const MAX_FRAME: usize = 16 * 1024 * 1024;
/// How long requests still running get when the client goes away.
const DRAIN: Duration = Duration::from_secs(2);

/// The `gateway.ready` frame every client gets first.
pub fn ready() -> String {
    frame::event(
        "gateway.ready",
        None,
        Some(crate::events::Ready {
            skin: crate::events::Skin { name: "default" },
        }),
    )
}

/// A client's requests in progress.
pub struct Client {
    pub gw: Arc<Gateway>,
    pub outbox: Outbox,
    slots: Arc<Semaphore>,
    tasks: JoinSet<()>,
}

impl Client {
    pub fn new(gw: Arc<Gateway>, outbox: Outbox) -> Client {
        Client {
            gw,
            outbox,
            slots: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
            tasks: JoinSet::new(),
        }
    }

    /// Takes one frame: a protocol error is answered at once, a request runs as a task.
    pub async fn take(&mut self, frame_bytes: &[u8]) {
        if frame_bytes.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        while self.tasks.try_join_next().is_some() {}
        let request = match frame::parse(frame_bytes) {
            Ok(r) => r,
            Err(rejected) => {
                let (id, e) = *rejected;
                self.outbox.frame(frame::error(&id, &e)).await;
                return;
            }
        };
        let Ok(slot) = self.slots.clone().acquire_owned().await else {
            return;
        };
        let (gw, outbox) = (self.gw.clone(), self.outbox.clone());
        let span = herald_trace::span!("rpc.request", method = %request.method);
        self.tasks.spawn(tracing::Instrument::instrument(
            async move {
                let call = methods::call(&gw, &outbox, &request.method, request.params);
                // A handler that panics is answered like one that raised (-32000).
                let answer =
                    futures_util::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(call))
                        .await
                        .unwrap_or_else(|_| {
                            Err(RpcError::new(
                                RpcError::HANDLER,
                                "handler error: the handler failed",
                            ))
                        });
                drop(slot);
                count(&request.method, &answer);
                let Some(id) = request.id else {
                    return;
                };
                let frame = match answer {
                    Ok(result) => frame::result(&id, result),
                    Err(e) => frame::error(&id, &e),
                };
                outbox.frame(frame).await;
            },
            span,
        ));
    }

    /// A frame over [`MAX_FRAME`].
    pub async fn too_large(&self) {
        let e = RpcError::new(
            RpcError::INVALID_REQUEST,
            format!("frame too large (at most {MAX_FRAME} bytes)"),
        );
        self.outbox.frame(frame::error(&Value::Null, &e)).await;
    }

    /// The client went away: requests running get a moment, then its sessions that
    /// asked for it close.
    pub async fn finish(mut self) {
        let _ = tokio::time::timeout(DRAIN, async {
            while self.tasks.join_next().await.is_some() {}
        })
        .await;
        self.tasks.abort_all();
        self.gw.disconnected(self.outbox.conn);
    }
}

/// One request for the metrics: by method when herald serves it (`unknown` else), with
/// its answer as an HTTP status class would say it.
fn count(method: &str, answer: &Result<Value, RpcError>) {
    let (method, status) = match answer {
        Ok(_) => (method, 200),
        Err(e) if e.code == RpcError::UNKNOWN_METHOD => ("unknown", 404),
        Err(e) if e.code == RpcError::HANDLER => (method, 500),
        Err(_) => (method, 400),
    };
    herald_metrics::get().doors.request("rpc", method, status);
}
