//! Claims the chat platforms' inbox entries and hands each to the worker of its chat,
//! which takes them one at a time in the order they arrived; renews the leases of the
//! entries whose turns run.

use crate::door::{ChatDoor, Platform};
use herald_store::{ClaimRequest, ClaimScope, InboxItem, now_ms};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, mpsc, watch};

/// How often the queue is looked at when nothing woke the dispatcher.
const POLL: Duration = Duration::from_millis(500);
/// Entries claimed at once.
const BATCH: usize = 64;

/// Entries being worked on here, by inbox id.
#[derive(Default)]
pub struct Held(Mutex<HashSet<i64>>);

impl Held {
    fn set(&self) -> std::sync::MutexGuard<'_, HashSet<i64>> {
        herald_session::conversation::lock(&self.0)
    }
    pub fn hold(&self, id: i64) -> bool {
        self.set().insert(id)
    }
    pub fn release(&self, id: i64) {
        self.set().remove(&id);
    }
    fn ids(&self) -> Vec<i64> {
        self.set().iter().copied().collect()
    }
}

/// A chat's worker: where its entries go, and when it was last given one.
struct Worker {
    tx: mpsc::UnboundedSender<InboxItem>,
    last: tokio::time::Instant,
}

/// How long a chat's worker is kept without an entry before it is let go.
const WORKER_IDLE: Duration = Duration::from_secs(60);

/// Claims and hands out entries until `stop` is set.
pub async fn dispatch<P: Platform>(
    door: Arc<ChatDoor<P>>,
    wake: Arc<Notify>,
    lease: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut chats: HashMap<String, Worker> = HashMap::new();
    let mut renew = tokio::time::interval(lease / 3);
    loop {
        let claimed = claim(&door, lease).await;
        let full = claimed.len() == BATCH;
        for item in claimed {
            if door.held.hold(item.id) {
                hand_over(&door, &mut chats, item);
            }
        }
        retire(&mut chats);
        tokio::select! {
            biased;
            _ = crate::stopped(&mut stop) => return,
            _ = renew.tick() => {
                let until = now_ms() + i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
                if let Err(e) = door.store.renew_leases(door.held.ids(), until).await {
                    tracing::warn!(error = %e, "cannot renew chat message leases");
                }
            }
            // A full batch: more wait, claim again at once.
            _ = std::future::ready(()), if full => {}
            _ = wake.notified(), if !full => {}
            _ = tokio::time::sleep(POLL), if !full => {}
        }
    }
}

/// Up to a batch of ready chat entries, under a lease.
async fn claim<P: Platform>(door: &ChatDoor<P>, lease: Duration) -> Vec<InboxItem> {
    let req = ClaimRequest {
        now_ms: now_ms(),
        lease_ms: i64::try_from(lease.as_millis()).unwrap_or(i64::MAX),
        max: BATCH,
        running_per_route: HashMap::new(),
        per_route_limit: usize::MAX,
        scope: ClaimScope::Chat(P::NAME),
    };
    match door.store.claim(req).await {
        Ok(items) => items,
        Err(e) => {
            tracing::error!(error = %e, "cannot claim chat messages");
            Vec::new()
        }
    }
}

/// Gives `item` to its chat's worker, started when the chat has none.
fn hand_over<P: Platform>(
    door: &Arc<ChatDoor<P>>,
    chats: &mut HashMap<String, Worker>,
    item: InboxItem,
) {
    let chat = door.platform.chat_of(&item).unwrap_or_default();
    let now = tokio::time::Instant::now();
    let worker = chats.entry(chat.clone()).or_insert_with(|| {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(chat_worker(door.clone(), rx));
        Worker { tx, last: now }
    });
    worker.last = now;
    if let Err(mpsc::error::SendError(item)) = worker.tx.send(item) {
        // Its worker ended (a panic): a new one takes the entry.
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(item);
        tokio::spawn(chat_worker(door.clone(), rx));
        chats.insert(chat, Worker { tx, last: now });
    }
}

/// Lets go of the workers of chats quiet for a while: their channel closes, and each
/// ends after the entries it was given (only the dispatcher hands entries over, so
/// no entry is handed to a worker that is ending).
fn retire(chats: &mut HashMap<String, Worker>) {
    let now = tokio::time::Instant::now();
    chats.retain(|_, w| now.duration_since(w.last) < WORKER_IDLE);
}

/// Lets go of an entry when taking it panicked (else its lease would be renewed for
/// ever and the entry never taken again); a turn that runs keeps it held.
struct Unpin<'a> {
    held: &'a Held,
    id: i64,
}

impl Drop for Unpin<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.held.release(self.id);
        }
    }
}

async fn chat_worker<P: Platform>(
    door: Arc<ChatDoor<P>>,
    mut rx: mpsc::UnboundedReceiver<InboxItem>,
) {
    while let Some(item) = rx.recv().await {
        let _unpinned = Unpin {
            held: &door.held,
            id: item.id,
        };
        door.take(item).await;
    }
}
