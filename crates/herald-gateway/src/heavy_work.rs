//! CPU-heavy handling of big bodies (verifying, validating, parsing a body of
//! megabytes takes milliseconds) kept from starving the async workers: it runs on a
//! thread of its own, a few bodies at a time, so `/health` and small requests are
//! served meanwhile.

use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::sync::Semaphore;

/// Bodies at least this big are handled as heavy work.
pub const HEAVY_BODY: usize = 256 * 1024;

pub struct HeavyWork {
    gate: Semaphore,
}

impl Default for HeavyWork {
    /// Half the cores at once (at least one): the others stay with the async workers.
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        HeavyWork {
            gate: Semaphore::new((cores / 2).max(1)),
        }
    }
}

impl HeavyWork {
    /// Runs `work` on a body of `size` bytes: inline when it is small (or on a
    /// single-threaded runtime, which cannot lend its thread), else after a turn at the
    /// gate, on a thread the worker hands its tasks away from.
    pub async fn run<T>(&self, size: usize, work: impl FnOnce() -> T) -> T {
        // The size first: a small body (the webhook hot path) costs one comparison.
        if size < HEAVY_BODY || !lendable() {
            return work();
        }
        // The gate is never closed; were it, the work would still run, ungated.
        let _turn = self.gate.acquire().await.ok();
        tokio::task::block_in_place(work)
    }
}

/// Whether this runtime can lend a worker's thread to blocking work.
fn lendable() -> bool {
    Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn big_work_runs_with_the_worker_lent_away_and_small_work_inline() {
        let heavy = HeavyWork::default();
        let here = std::thread::current().id();
        let small = heavy.run(10, || std::thread::current().id()).await;
        assert_eq!(small, here);
        assert_eq!(heavy.run(HEAVY_BODY, || 7).await, 7);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_single_threaded_runtime_runs_big_work_inline_without_panicking() {
        assert_eq!(HeavyWork::default().run(HEAVY_BODY * 4, || 9).await, 9);
    }
}
