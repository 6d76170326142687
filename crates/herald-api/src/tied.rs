//! Runs that end with whoever asked for them. A chat completion's or a response's run
//! is tied to its request: when the client goes away (the connection closes while the
//! answer is awaited, or a stream's reader is gone) the run is interrupted, as nginx
//! aborts the upstream and Go's `net/http` cancels the request's context. Every run's
//! concurrency permit is held until the run has really ended, whoever started it.

use axum::http::{HeaderMap, HeaderValue};
use herald_session::RunHandle;
use tokio::sync::OwnedSemaphorePermit;

/// The response header that names a chat completion's or response's run (a herald
/// extension): `GET /v1/runs/{id}` and `POST /v1/runs/{id}/stop` take it.
pub const RUN_ID_HEADER: &str = "x-herald-run-id";

/// Holds `permit` until `run` has ended (its status finished), not only as long as the
/// request that started it.
pub fn hold_until_ended(permit: Option<OwnedSemaphorePermit>, run: &RunHandle) {
    let Some(permit) = permit else {
        return;
    };
    let run = run.clone();
    tokio::spawn(async move {
        run.finished().await;
        drop(permit);
    });
}

/// A run started by a request, interrupted when this is dropped before the run ended:
/// the handler's future (a whole answer) or the stream's producer (a streamed one) is
/// dropped when its client goes away.
pub struct Tied {
    run: RunHandle,
}

impl Tied {
    /// Ties `run` to the request; its permit is held until it has ended.
    pub fn new(run: RunHandle, permit: Option<OwnedSemaphorePermit>) -> Tied {
        hold_until_ended(permit, &run);
        Tied { run }
    }

    pub fn run(&self) -> &RunHandle {
        &self.run
    }
}

/// Names the run `id` in a response's `headers` ([`RUN_ID_HEADER`]).
pub fn name_run(headers: &mut HeaderMap, id: &str) {
    if let Ok(v) = HeaderValue::from_str(id) {
        headers.insert(RUN_ID_HEADER, v);
    }
}

impl Drop for Tied {
    fn drop(&mut self) {
        if self.run.status().state.is_finished() {
            return;
        }
        tracing::info!(run = %self.run.id(), "the client went away before the answer: its run is interrupted");
        self.run.interrupt();
    }
}
