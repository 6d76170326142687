//! Answers to relayed run controls: the asking instance listens on one channel for
//! the answers addressed to it and hands each to the request that waits for it.

use crate::connect::Target;
use herald_store::sessions::ControlReply;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// The channel answers travel on.
pub(crate) const CHANNEL: &str = "herald_run_reply";

/// The requests of this store waiting for an answer, by ask id.
#[derive(Default)]
pub(crate) struct Replies {
    waiting: Arc<Mutex<HashMap<String, oneshot::Sender<ControlReply>>>>,
    listening: crate::listen::OnDemand,
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
        let (waiting, me) = (self.waiting.clone(), me.to_owned());
        let hear = move || {
            Arc::new(move |payload: &str| {
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
            }) as Arc<dyn Fn(&str) + Send + Sync>
        };
        self.listening.start(target, CHANNEL, hear).await;
    }
}
