//! The syncer thread: makes committed batches durable and only then answers them.
//!
//! The writer commits with `synchronous=NORMAL` (the WAL is written, not fsynced) and
//! hands the batch's answers here. One `fdatasync` of the WAL covers every batch
//! committed before it started, so the writer commits the next batch while this
//! thread waits for the disk (a pipelined group commit), and a caller still hears
//! back only once its write is on disk, exactly as with `synchronous=FULL`.
//!
//! The WAL is opened afresh for every sync: SQLite deletes it only after a complete
//! checkpoint has copied it into the database file and synced that, so a missing WAL
//! means everything committed is already durable.

use crate::round_stats::RoundStats;
use crate::writer::Reply;
use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::Instant;

/// Answers of one committed batch, waiting for the WAL to be on disk.
pub(crate) struct Pending {
    pub replies: Vec<Reply>,
    /// How many batches with durable writes the writer had committed by then.
    pub upto: u64,
}

/// How far the syncer has got, shared with the writer: how many writing batches are
/// known to be on disk, and the writer's thread, woken after every sync.
#[derive(Default)]
pub(crate) struct SyncProgress {
    synced: AtomicU64,
    writer: OnceLock<Thread>,
}

impl SyncProgress {
    /// How many writing batches are known to be on disk.
    pub(crate) fn synced(&self) -> u64 {
        self.synced.load(Ordering::Acquire)
    }

    /// Makes the calling thread the one woken after each sync (the writer's).
    pub(crate) fn register_writer(&self) {
        let _ = self.writer.set(std::thread::current());
    }

    /// Waits, on the writer's thread, until the first `written` batches are on disk,
    /// but no longer than `deadline`. A failed sync does not count: the wait then
    /// lasts until the deadline.
    pub(crate) fn wait_until_synced(&self, written: u64, deadline: Instant) {
        while self.synced() < written {
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            std::thread::park_timeout(deadline - now);
        }
    }

    /// After a sync: records what a successful one covered and wakes the writer.
    fn finished(&self, covered: Option<u64>) {
        if let Some(upto) = covered {
            self.synced.fetch_max(upto, Ordering::Release);
        }
        if let Some(writer) = self.writer.get() {
            writer.unpark();
        }
    }
}

/// Runs until the writer drops its sender, answering whatever it was handed, and
/// publishing in `progress` how many writing batches are known to be on disk.
pub(crate) fn run(wal: PathBuf, rx: Receiver<Pending>, progress: Arc<SyncProgress>) {
    let mut stats = RoundStats::new("store syncer");
    while let Ok(first) = rx.recv() {
        let mut groups = vec![first];
        while let Ok(more) = rx.try_recv() {
            groups.push(more);
        }
        let started = Instant::now();
        let sync_failed = sync_wal(&wal).err().map(|e| {
            tracing::error!(wal = %wal.display(), error = %e, "cannot sync the store's WAL to disk; the writes waiting for it are answered with an error");
            format!("cannot sync {}: {e}", wal.display())
        });
        stats.record(groups.len(), started.elapsed());
        let upto = groups.iter().map(|g| g.upto).max().unwrap_or(0);
        progress.finished(sync_failed.is_none().then_some(upto));
        for reply in groups.into_iter().flat_map(|g| g.replies) {
            reply.send(sync_failed.as_deref());
        }
    }
}

fn sync_wal(wal: &std::path::Path) -> std::io::Result<()> {
    match File::open(wal) {
        Ok(file) => file.sync_data(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn run_once(wal: PathBuf, upto: u64) -> u64 {
        let progress = Arc::new(SyncProgress::default());
        let (tx, rx) = std::sync::mpsc::channel();
        tx.send(Pending {
            replies: Vec::new(),
            upto,
        })
        .unwrap();
        drop(tx);
        run(wal, rx, progress.clone());
        progress.synced()
    }

    #[test]
    fn publishes_only_what_a_successful_sync_covered() {
        let dir = tempfile::tempdir().unwrap();
        let wal = dir.path().join("h.db-wal");
        std::fs::write(&wal, b"frames").unwrap();
        assert_eq!(run_once(wal, 7), 7);
        // No WAL at all: a checkpoint already put everything in the database file.
        assert_eq!(run_once(dir.path().join("gone-wal"), 3), 3);
        // A WAL that cannot be opened: nothing is published as on disk.
        let under_a_file = dir.path().join("h.db-wal").join("x");
        assert_eq!(run_once(under_a_file, 9), 0);
    }

    #[test]
    fn the_writer_waits_for_the_sync_of_earlier_batches_or_the_deadline() {
        let progress = Arc::new(SyncProgress::default());
        progress.register_writer();
        // Nothing written yet: no wait at all.
        let started = Instant::now();
        progress.wait_until_synced(0, started + Duration::from_secs(10));
        assert!(started.elapsed() < Duration::from_secs(5));
        // A sync that covers the batch ends the wait long before the deadline.
        let syncer = progress.clone();
        let finisher = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            syncer.finished(Some(1));
        });
        let started = Instant::now();
        progress.wait_until_synced(1, started + Duration::from_secs(10));
        let waited = started.elapsed();
        finisher.join().unwrap();
        assert_eq!(progress.synced(), 1);
        assert!(waited >= Duration::from_millis(20), "{waited:?}");
        assert!(waited < Duration::from_secs(5), "{waited:?}");
        // A failed sync wakes the writer but does not count: it waits out the deadline.
        let syncer = progress.clone();
        let finisher = std::thread::spawn(move || syncer.finished(None));
        let started = Instant::now();
        progress.wait_until_synced(2, started + Duration::from_millis(100));
        finisher.join().unwrap();
        assert!(started.elapsed() >= Duration::from_millis(100));
        assert_eq!(progress.synced(), 1);
    }
}
