//! Runs that end with whoever asked for them. A chat completion's or a response's run
//! is tied to its request: when the client goes away (the connection closes while the
//! answer is awaited, or a stream's reader is gone) the run is interrupted, as nginx
//! aborts the upstream and Go's `net/http` cancels the request's context. Every run's
//! concurrency permit is held until the run has really ended, whoever started it.

use axum::http::{HeaderMap, HeaderValue};
use herald_session::RunHandle;
use tokio::sync::{OwnedSemaphorePermit, oneshot};

/// The response header that names a chat completion's or response's run (a herald
/// extension): `GET /v1/runs/{id}` and `POST /v1/runs/{id}/stop` take it.
pub const RUN_ID_HEADER: &str = "x-herald-run-id";

/// Holds `permit` until `run` has ended (its status finished), not only as long as the
/// request that started it, or until `release` fires (the run parked for a client's
/// tool results: it holds no permit while it waits).
fn hold_until(
    permit: Option<OwnedSemaphorePermit>,
    run: &RunHandle,
    release: Option<oneshot::Receiver<()>>,
) {
    let Some(permit) = permit else {
        return;
    };
    let run = run.clone();
    tokio::spawn(async move {
        // A request that went away drops the sender: that frees nothing.
        let released = async {
            if let Some(rx) = release
                && rx.await.is_ok()
            {
                return;
            }
            std::future::pending::<()>().await
        };
        tokio::select! {
            _ = run.finished() => {}
            () = released => {}
        }
        drop(permit);
    });
}

/// Holds `permit` until `run` has ended (a detached run of the runs API).
pub fn hold_until_ended(permit: Option<OwnedSemaphorePermit>, run: &RunHandle) {
    hold_until(permit, run, None);
}

/// A run started (or resumed) by a request, interrupted when this is dropped before the
/// run ended or parked: the handler's future (a whole answer) or the stream's producer
/// (a streamed one) is dropped when its client goes away.
pub struct Tied {
    run: RunHandle,
    release: Option<oneshot::Sender<()>>,
}

impl Tied {
    /// Ties `run` to the request; its permit is held until it has ended or parked.
    pub fn new(run: RunHandle, permit: Option<OwnedSemaphorePermit>) -> Tied {
        let (tx, rx) = oneshot::channel();
        hold_until(permit, &run, Some(rx));
        Tied {
            run,
            release: Some(tx),
        }
    }

    pub fn run(&self) -> &RunHandle {
        &self.run
    }

    /// The run waits for a client's tool results: it goes on without this request,
    /// and its permit is freed.
    pub fn park(mut self) -> RunHandle {
        if let Some(tx) = self.release.take() {
            let _ = tx.send(());
        }
        self.run.clone()
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
        if self.release.is_none() || self.run.status().state.is_finished() {
            return;
        }
        tracing::info!(run = %self.run.id(), "the client went away before the answer: its run is interrupted");
        self.run.interrupt();
    }
}
