//! Stopping every run of a host when its front door exits (SIGTERM, SIGINT, stdin
//! closed): each live run is interrupted (its running command's process group killed,
//! its questions denied), and the host waits for them to end within a grace. A run
//! interrupted this way ends `failed` with [`STOPPED`], not `cancelled`: nobody asked
//! for it to stop.

use crate::runs::{RunCell, RunHandle};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// The error of a run that herald's exit interrupted.
pub const STOPPED: &str = "interrupted: herald stopped";

/// Every run a host started that may still be live.
#[derive(Default)]
pub(crate) struct LiveRuns {
    cells: Mutex<Vec<Weak<RunCell>>>,
    stopping: AtomicBool,
}

impl LiveRuns {
    /// Tracks a run just started (and forgets the ones that ended).
    pub(crate) fn track(&self, cell: &Arc<RunCell>) {
        let Ok(mut cells) = self.cells.lock() else {
            return;
        };
        cells.retain(|c| c.upgrade().is_some_and(|c| !c.state().is_finished()));
        cells.push(Arc::downgrade(cell));
    }

    /// The runs still live.
    pub(crate) fn live(&self) -> Vec<RunHandle> {
        match self.cells.lock() {
            Ok(cells) => cells
                .iter()
                .filter_map(Weak::upgrade)
                .filter(|c| !c.state().is_finished())
                .map(|cell| RunHandle { cell })
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Whether the host is stopping (its interrupted runs fail with [`STOPPED`]).
    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Interrupts every live run and waits up to `within` for them all to end; returns
    /// how many were interrupted.
    pub(crate) async fn stop_all(&self, within: Duration) -> usize {
        self.stopping.store(true, Ordering::SeqCst);
        let live = self.live();
        for run in &live {
            run.interrupt();
        }
        let all_ended = futures_util::future::join_all(live.iter().map(RunHandle::finished));
        if tokio::time::timeout(within, all_ended).await.is_err() {
            tracing::warn!(runs = live.len(), "runs still ending when herald stopped");
        }
        live.len()
    }
}
