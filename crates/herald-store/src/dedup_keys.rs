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
//! aim for one.
//!
//! Memory: about [`BYTES_PER_KEY`] per key, within a budget (`inbox.dedup_memory_mb`,
//! 256 MiB: some 5.6 million keys, an hour at 1,500 events a second). Past it, the
//! oldest keys are written to the `dedup` table (its primary key is the on-disk index
//! of keys) a slice at a time between batches, then forgotten from memory; from then
//! on a key not in memory is looked up there, until the spilled keys leave the window.

use crate::writer::DEDUP_WINDOW_MS;
use rusqlite::{Connection, OptionalExtension, params};
use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

/// A key's 128 bits as two words (a `u128` would be aligned to 16 bytes and make each
/// map entry 32 bytes instead of 24).
pub(crate) type Key = (u64, u64);

/// What one key costs in memory, as the budget counts it (24 bytes of entry and a
/// control byte, in a table between half and seven eighths full).
pub const BYTES_PER_KEY: usize = 48;
/// The memory budget of the keys when none is given.
pub const DEFAULT_BUDGET_BYTES: usize = 256 << 20;
/// Spilled keys written per slice (one slice between two batches of the writer).
pub(crate) const SPILL_SLICE: i64 = 20_000;

/// The keys seen within the window and when.
pub(crate) struct DedupKeys {
    seen: HashMap<Key, i64>,
    seeds: (RandomState, RandomState),
    /// Changes of the batch being committed, to undo if the commit fails: each key
    /// with the time it had before.
    undo: Vec<(Key, Option<i64>)>,
    /// Most keys kept in memory.
    budget: usize,
    /// Keys seen before this time are in the `dedup` table, not all in memory.
    pub(crate) spilled_until_ms: i64,
}

impl DedupKeys {
    pub(crate) fn new() -> DedupKeys {
        DedupKeys::with_budget(DEFAULT_BUDGET_BYTES)
    }

    /// Keys within `bytes` of memory.
    pub(crate) fn with_budget(bytes: usize) -> DedupKeys {
        DedupKeys {
            seen: HashMap::new(),
            seeds: (RandomState::new(), RandomState::new()),
            undo: Vec::new(),
            budget: (bytes / BYTES_PER_KEY).max(64),
            spilled_until_ms: 0,
        }
    }

    /// Whether keys of the window at `now_ms` may be on disk only.
    pub(crate) fn spilled(&self, now_ms: i64) -> bool {
        self.spilled_until_ms > now_ms - DEDUP_WINDOW_MS
    }

    /// Whether memory holds more keys than the budget.
    pub(crate) fn over_budget(&self) -> bool {
        self.seen.len() > self.budget
    }

    /// The time before which the oldest keys go to disk, so that about four fifths of
    /// the budget stays in memory (`None` with no keys at all).
    pub(crate) fn spill_cut(&self) -> Option<i64> {
        let mut times: Vec<i64> = self.seen.values().copied().collect();
        let keep = self.budget * 4 / 5;
        let drop = times
            .len()
            .saturating_sub(keep)
            .min(times.len().saturating_sub(1));
        if times.is_empty() {
            return None;
        }
        let (_, cut, _) = times.select_nth_unstable(drop);
        Some(*cut)
    }

    /// Forgets the keys seen before `cut_ms` (they are on disk now).
    pub(crate) fn forget_before(&mut self, cut_ms: i64) {
        // The table keeps its room (the budget bounds it): shrinking would need the old
        // and a new one at once.
        self.seen.retain(|_, at| *at >= cut_ms);
        self.spilled_until_ms = self.spilled_until_ms.max(cut_ms);
    }

    /// Loads the keys still within the window at `now_ms` from both tables (the
    /// inbox's through its `inbox_received` index, without reading the rows), within
    /// `budget_bytes`: past it, the oldest are written to the `dedup` table first.
    pub(crate) fn load(
        conn: &Connection,
        now_ms: i64,
        budget_bytes: usize,
    ) -> rusqlite::Result<DedupKeys> {
        let mut since = now_ms - DEDUP_WINDOW_MS;
        let budget = (budget_bytes / BYTES_PER_KEY).max(64);
        let in_inbox: i64 = conn.query_row(
            "SELECT count(*) FROM inbox INDEXED BY inbox_received WHERE received_at_ms > ?1",
            params![since],
            |r| r.get(0),
        )?;
        let mut spilled_until = 0;
        if usize::try_from(in_inbox).unwrap_or(usize::MAX) > budget {
            // The newest four fifths of the budget stay; the older go to disk.
            let keep = i64::try_from(budget * 4 / 5).unwrap_or(i64::MAX);
            let cut: i64 = conn.query_row(
                "SELECT received_at_ms FROM inbox INDEXED BY inbox_received
                 WHERE received_at_ms > ?1 ORDER BY received_at_ms DESC LIMIT 1 OFFSET ?2",
                params![since, keep],
                |r| r.get(0),
            )?;
            spill_range(conn, since, cut)?;
            spilled_until = cut;
            since = cut - 1;
        }
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
        let mut keys = DedupKeys::with_budget(budget_bytes);
        keys.spilled_until_ms = spilled_until;
        keys.seen.reserve(count.min(keys.budget));
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

/// Writes the inbox's keys received in `[from_ms, to_ms)` to the `dedup` table.
pub(crate) fn spill_range(conn: &Connection, from_ms: i64, to_ms: i64) -> rusqlite::Result<usize> {
    conn.execute(
        "INSERT INTO dedup (route, delivery_id, seen_at_ms)
             SELECT route, delivery_id, max(received_at_ms) FROM inbox INDEXED BY inbox_received
             WHERE received_at_ms >= ?1 AND received_at_ms < ?2
             GROUP BY route, delivery_id
         ON CONFLICT (route, delivery_id) DO UPDATE SET seen_at_ms = max(seen_at_ms, excluded.seen_at_ms)",
        params![from_ms, to_ms],
    )
}

/// Whether the `dedup` table has (route, delivery id) within the window at `now_ms`.
pub(crate) fn on_disk(
    conn: &Connection,
    route: &str,
    delivery_id: &str,
    now_ms: i64,
) -> rusqlite::Result<bool> {
    let at: Option<i64> = conn
        .prepare_cached("SELECT seen_at_ms FROM dedup WHERE route = ?1 AND delivery_id = ?2")?
        .query_row(params![route, delivery_id], |r| r.get(0))
        .optional()?;
    Ok(at.is_some_and(|at| now_ms - at < DEDUP_WINDOW_MS))
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
