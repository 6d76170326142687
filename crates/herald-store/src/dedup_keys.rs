//! The dedup keys of the window, in the writer thread's memory.
//!
//! Every key is stored in SQLite in the transaction of the write it belongs to: an
//! accepted event's key is its inbox row (route, delivery id, received time), a
//! direct delivery's key a row of `dedup`. Looking keys up there would need a B-tree
//! keyed by delivery id, and senders' ids are random (GitHub's are UUIDs): every
//! accepted event would then dirty a page of its own in every commit. So the writer
//! decides from this map, which it loads from both tables when the store opens and
//! keeps in step with every commit (a failed commit undoes its changes). On disk the
//! inbox's keys are read through an index on (received time, route, delivery id),
//! whose inserts always land at its end.
//!
//! A key is 128 bits of two independently seeded SipHashes of (route, delivery id):
//! a collision (an event taken for a duplicate it is not) is about as likely as a
//! random 128-bit match, and the seeds are new in every process, so a sender cannot
//! aim for one. Memory: ~40 bytes per key of the last hour, bounded by the routes'
//! rate limits.

use crate::writer::DEDUP_WINDOW_MS;
use rusqlite::{Connection, params};
use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

/// A key's 128 bits as two words (a `u128` would be aligned to 16 bytes and make each
/// map entry 32 bytes instead of 24).
pub(crate) type Key = (u64, u64);

/// The keys seen within the window and when.
pub(crate) struct DedupKeys {
    seen: HashMap<Key, i64>,
    seeds: (RandomState, RandomState),
    /// Changes of the batch being committed, to undo if the commit fails: each key
    /// with the time it had before.
    undo: Vec<(Key, Option<i64>)>,
}

impl DedupKeys {
    pub(crate) fn new() -> DedupKeys {
        DedupKeys {
            seen: HashMap::new(),
            seeds: (RandomState::new(), RandomState::new()),
            undo: Vec::new(),
        }
    }

    /// Loads the keys still within the window at `now_ms` from both tables (the
    /// inbox's through its `inbox_received` index, without reading the rows).
    pub(crate) fn load(conn: &Connection, now_ms: i64) -> rusqlite::Result<DedupKeys> {
        let since = now_ms - DEDUP_WINDOW_MS;
        let sources = [
            "SELECT route, delivery_id, seen_at_ms FROM dedup WHERE seen_at_ms > ?1",
            "SELECT route, delivery_id, received_at_ms FROM inbox INDEXED BY inbox_received
             WHERE received_at_ms > ?1",
        ];
        let mut count = 0usize;
        for sql in sources {
            let n: i64 = conn.query_row(
                &format!("SELECT count(*) FROM ({sql})"),
                params![since],
                |r| r.get(0),
            )?;
            count += usize::try_from(n).unwrap_or(0);
        }
        let mut keys = DedupKeys::new();
        keys.seen.reserve(count);
        for sql in sources {
            let mut stmt = conn.prepare(sql)?;
            let mut rows = stmt.query(params![since])?;
            while let Some(row) = rows.next()? {
                let at = row.get(2)?;
                keys.load_one(row.get_ref(0)?.as_str()?, row.get_ref(1)?.as_str()?, at);
            }
        }
        Ok(keys)
    }

    fn load_one(&mut self, route: &str, delivery_id: &str, at: i64) {
        let key = self.key(route, delivery_id);
        let entry = self.seen.entry(key).or_insert(at);
        *entry = (*entry).max(at);
    }

    /// The key of (route, delivery id): hash it once, then ask and mark with it.
    pub(crate) fn key(&self, route: &str, delivery_id: &str) -> Key {
        (
            self.seeds.0.hash_one((route, delivery_id)),
            self.seeds.1.hash_one((route, delivery_id)),
        )
    }

    /// Whether the key was seen within the window before `now_ms`.
    pub(crate) fn is_seen(&self, key: Key, now_ms: i64) -> bool {
        self.seen
            .get(&key)
            .is_some_and(|at| now_ms - at < DEDUP_WINDOW_MS)
    }

    /// Marks the key seen at `at_ms`, as part of the batch being committed.
    pub(crate) fn mark(&mut self, key: Key, at_ms: i64) {
        let before = self.seen.insert(key, at_ms);
        self.undo.push((key, before));
    }

    /// The batch committed: its changes stay.
    pub(crate) fn keep_batch(&mut self) {
        self.undo.clear();
    }

    /// The batch's commit failed: its changes are undone, newest first.
    pub(crate) fn undo_batch(&mut self) {
        while let Some((key, before)) = self.undo.pop() {
            match before {
                Some(at) => self.seen.insert(key, at),
                None => self.seen.remove(&key),
            };
        }
    }

    /// Forgets the keys that left the window at `now_ms`.
    pub(crate) fn expire(&mut self, now_ms: i64) -> usize {
        let before = self.seen.len();
        self.seen.retain(|_, at| now_ms - *at < DEDUP_WINDOW_MS);
        if self.seen.capacity() > 4 * self.seen.len().max(1024) {
            self.seen.shrink_to_fit();
        }
        before - self.seen.len()
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.seen.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_expire_and_failed_batches_are_undone() {
        let mut keys = DedupKeys::new();
        let t = 1_000_000;
        keys.mark(keys.key("r", "a"), t);
        keys.keep_batch();
        assert!(keys.is_seen(keys.key("r", "a"), t + 1));
        assert!(!keys.is_seen(keys.key("other", "a"), t + 1));
        assert!(!keys.is_seen(keys.key("r", "b"), t + 1));
        // Route and id are not simply concatenated.
        assert!(!keys.is_seen(keys.key("ra", ""), t + 1));
        assert!(!keys.is_seen(keys.key("r", "a"), t + DEDUP_WINDOW_MS));
        // A failed batch: a refreshed key gets its old time back, a new one goes.
        keys.mark(keys.key("r", "a"), t + DEDUP_WINDOW_MS);
        keys.mark(keys.key("r", "b"), t + DEDUP_WINDOW_MS);
        keys.undo_batch();
        assert!(!keys.is_seen(keys.key("r", "a"), t + DEDUP_WINDOW_MS));
        assert!(keys.is_seen(keys.key("r", "a"), t + 5));
        assert!(!keys.is_seen(keys.key("r", "b"), t + DEDUP_WINDOW_MS));
        assert_eq!(keys.len(), 1);
        assert_eq!(keys.expire(t + DEDUP_WINDOW_MS - 1), 0);
        assert_eq!(keys.expire(t + DEDUP_WINDOW_MS), 1);
        assert_eq!(keys.len(), 0);
    }
}
