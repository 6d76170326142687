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
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::time::Instant;

/// Answers of one committed batch, waiting for the WAL to be on disk.
pub(crate) struct Pending {
    pub replies: Vec<Reply>,
    /// How many batches with durable writes the writer had committed by then.
    pub upto: u64,
}

/// Runs until the writer drops its sender, answering whatever it was handed, and
/// publishing in `synced` how many writing batches are known to be on disk.
pub(crate) fn run(wal: PathBuf, rx: Receiver<Pending>, synced: Arc<AtomicU64>) {
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
        if sync_failed.is_none() {
            let upto = groups.iter().map(|g| g.upto).max().unwrap_or(0);
            synced.fetch_max(upto, Ordering::Release);
        }
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

    fn run_once(wal: PathBuf, upto: u64) -> u64 {
        let synced = Arc::new(AtomicU64::new(0));
        let (tx, rx) = std::sync::mpsc::channel();
        tx.send(Pending {
            replies: Vec::new(),
            upto,
        })
        .unwrap();
        drop(tx);
        run(wal, rx, synced.clone());
        synced.load(Ordering::Acquire)
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
}
