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
        match self.0.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
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

/// Claims and hands out entries until `stop` is set.
pub async fn dispatch<P: Platform>(
    door: Arc<ChatDoor<P>>,
    wake: Arc<Notify>,
    lease: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut chats: HashMap<i64, mpsc::UnboundedSender<InboxItem>> = HashMap::new();
    let mut renew = tokio::time::interval(lease / 3);
    loop {
        let req = ClaimRequest {
            now_ms: now_ms(),
            lease_ms: i64::try_from(lease.as_millis()).unwrap_or(i64::MAX),
            max: BATCH,
            running_per_route: HashMap::new(),
            per_route_limit: usize::MAX,
            scope: ClaimScope::Chat,
        };
        let claimed = match door.store.claim(req).await {
            Ok(items) => items,
            Err(e) => {
                tracing::error!(error = %e, "cannot claim chat messages");
                Vec::new()
            }
        };
        let full = claimed.len() == BATCH;
        for item in claimed {
            if door.held.hold(item.id) {
                hand_over(&door, &mut chats, item);
            }
        }
        tokio::select! {
            biased;
            _ = crate::stopped(&mut stop) => return,
            _ = renew.tick() => {
                let until = now_ms() + i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
                if let Err(e) = door.store.renew_leases(door.held.ids(), until).await {
                    tracing::warn!(error = %e, "cannot renew chat message leases");
                }
            }
            _ = wake.notified(), if !full => {}
            _ = tokio::time::sleep(POLL), if !full => {}
        }
    }
}

/// Gives `item` to its chat's worker, started when the chat has none.
fn hand_over<P: Platform>(
    door: &Arc<ChatDoor<P>>,
    chats: &mut HashMap<i64, mpsc::UnboundedSender<InboxItem>>,
    item: InboxItem,
) {
    let chat = door.platform.chat_of(&item).unwrap_or(0);
    let item = match chats.get(&chat) {
        Some(tx) => match tx.send(item) {
            Ok(()) => return,
            Err(mpsc::error::SendError(item)) => item,
        },
        None => item,
    };
    let (tx, rx) = mpsc::unbounded_channel();
    let _ = tx.send(item);
    chats.insert(chat, tx);
    chats.retain(|_, tx| !tx.is_closed());
    tokio::spawn(chat_worker(door.clone(), rx));
}

/// How long a chat's worker waits for its next entry before it ends.
const WORKER_IDLE: Duration = Duration::from_secs(60);

async fn chat_worker<P: Platform>(
    door: Arc<ChatDoor<P>>,
    mut rx: mpsc::UnboundedReceiver<InboxItem>,
) {
    while let Ok(Some(item)) = tokio::time::timeout(WORKER_IDLE, rx.recv()).await {
        door.take(item).await;
    }
    // What was handed over as the wait ran out is still this worker's.
    rx.close();
    while let Ok(item) = rx.try_recv() {
        door.take(item).await;
    }
}
