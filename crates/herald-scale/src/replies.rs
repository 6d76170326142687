//! Answers to relayed run controls: the asking instance listens on one channel for
//! the answers addressed to it and hands each to the request that waits for it.

use crate::connect::Target;
use herald_store::sessions::ControlReply;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::{oneshot, watch};

/// The channel answers travel on.
pub(crate) const CHANNEL: &str = "herald_run_reply";

/// The requests of this store waiting for an answer, by ask id.
#[derive(Default)]
pub(crate) struct Replies {
    waiting: Arc<Mutex<HashMap<String, oneshot::Sender<ControlReply>>>>,
    /// Whether the listener is listening (set once it is).
    listening: OnceLock<watch::Receiver<bool>>,
}

#[derive(serde::Deserialize)]
struct Addressed {
    to: String,
    id: String,
    reply: ControlReply,
}

impl Replies {
    /// A new ask: its id and where its answer arrives.
    pub(crate) fn ask(&self) -> (String, oneshot::Receiver<ControlReply>) {
        static ASKED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = ASKED
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .to_string();
        let (tx, rx) = oneshot::channel();
        if let Ok(mut w) = self.waiting.lock() {
            w.insert(id.clone(), tx);
        }
        (id, rx)
    }

    pub(crate) fn forget(&self, id: &str) {
        if let Ok(mut w) = self.waiting.lock() {
            w.remove(id);
        }
    }

    /// Listens for the answers addressed to `me` (started once), and returns once
    /// the listener listens, so that no answer can come before it.
    pub(crate) async fn listen(&self, target: &Arc<Target>, me: &str) {
        let mut ready = self
            .listening
            .get_or_init(|| {
                let (ready_tx, ready_rx) = watch::channel(false);
                let (waiting, me) = (self.waiting.clone(), me.to_owned());
                let hear = Arc::new(move |payload: &str| {
                    if payload.is_empty() {
                        // Said by the listener once it listens.
                        let _ = ready_tx.send(true);
                        return;
                    }
                    let Ok(a) = serde_json::from_str::<Addressed>(payload) else {
                        return;
                    };
                    if a.to != me {
                        return;
                    }
                    let waiter = waiting
                        .lock()
                        .ok()
                        .and_then(|mut w| w.remove(a.id.as_str()));
                    if let Some(w) = waiter {
                        let _ = w.send(a.reply);
                    }
                });
                crate::listen::spawn_on(target.clone(), CHANNEL, hear, None);
                ready_rx
            })
            .clone();
        let _ = tokio::time::timeout(Duration::from_secs(5), ready.wait_for(|r| *r)).await;
    }
}
