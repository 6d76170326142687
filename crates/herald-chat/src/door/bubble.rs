//! A message edited as a turn works: the answer as it streams (`streaming.enabled`) or
//! the tools it calls (`tool_progress`). Sent once, then edited at most every
//! `edit_interval` with the newest text only (edits are coalesced, never queued behind
//! each other), through the platform's send governor. Repeated flood answers stop the
//! edits: the answer then comes whole.

use super::{ChatRef, Platform};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::watch;

/// Flood answers after which a bubble stops editing (Hermes's stream consumer gives
/// up likewise).
const MAX_FLOOD_STRIKES: u32 = 3;
/// The most characters a bubble shows (its tail): a preview, never split.
const MAX_SHOWN: usize = 3500;

/// How a bubble edits.
#[derive(Debug, Clone)]
pub(crate) struct Rhythm {
    pub interval: Duration,
    /// New characters that make an edit worth sending.
    pub threshold: usize,
    /// Shown after the text while it grows.
    pub cursor: String,
}

/// One edited message.
pub(crate) struct Bubble {
    text: watch::Sender<String>,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Default)]
struct Shared {
    message_id: std::sync::Mutex<Option<String>>,
    /// Floods stopped the edits.
    stopped: AtomicBool,
    /// Closed: no more edits (`settle`: but the last text is shown first).
    closing: AtomicBool,
    settle: AtomicBool,
    woken: tokio::sync::Notify,
}

/// What a closed bubble leaves: its message, and whether its edits still worked.
pub(crate) struct Left {
    pub message_id: Option<String>,
    pub healthy: bool,
}

impl Bubble {
    pub(crate) fn start<P: Platform>(platform: Arc<P>, chat: ChatRef, rhythm: Rhythm) -> Bubble {
        let (text, rx) = watch::channel(String::new());
        let shared = Arc::new(Shared::default());
        let task = tokio::spawn(edit_loop(platform, chat, rhythm, rx, shared.clone()));
        Bubble { text, shared, task }
    }

    /// The bubble's whole text now.
    pub(crate) fn show(&self, text: String) {
        self.text.send_replace(text);
    }

    /// Text added at the end.
    pub(crate) fn append(&self, more: &str) {
        self.text.send_modify(|t| t.push_str(more));
    }

    pub(crate) fn text(&self) -> String {
        self.text.borrow().clone()
    }

    /// Stops editing (the last text is shown first, without a cursor, when `settle`);
    /// an edit on its way is finished, never cut.
    pub(crate) async fn close(self, settle: bool) -> Left {
        self.shared.settle.store(settle, Ordering::SeqCst);
        self.shared.closing.store(true, Ordering::SeqCst);
        self.shared.woken.notify_one();
        drop(self.text);
        let _ = self.task.await;
        Left {
            message_id: super::wire::lock(&self.shared.message_id).clone(),
            healthy: !self.shared.stopped.load(Ordering::SeqCst),
        }
    }
}

/// The tail of `text` that fits a preview (counted in UTF-16 units, as Telegram
/// counts), its `MEDIA:` tags hidden (the files go after the answer; their paths are
/// the host's).
fn tail(text: &str) -> String {
    let text = match text.contains("MEDIA:") {
        true => super::media::extract(text).text,
        false => text.to_owned(),
    };
    let units = herald_deliver::split::utf16_len(&text);
    if units <= MAX_SHOWN {
        return text;
    }
    let mut cut = units - MAX_SHOWN;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if cut == 0 {
            start = i;
            break;
        }
        cut = cut.saturating_sub(c.len_utf16());
        start = i + c.len_utf8();
    }
    format!("…{}", &text[start..])
}

async fn edit_loop<P: Platform>(
    platform: Arc<P>,
    chat: ChatRef,
    rhythm: Rhythm,
    mut rx: watch::Receiver<String>,
    shared: Arc<Shared>,
) {
    // The text shown and the view it was shown as (with the cursor while it grows).
    let mut shown = String::new();
    let mut shown_view = String::new();
    let mut strikes = 0u32;
    loop {
        let open = rx.changed().await.is_ok() && !shared.closing.load(Ordering::SeqCst);
        if !open && !shared.settle.load(Ordering::SeqCst) {
            return;
        }
        let text = rx.borrow_and_update().clone();
        let grew = text.chars().count().saturating_sub(shown.chars().count());
        let worth = !open || grew >= rhythm.threshold.max(1) || (grew > 0 && !shown.is_empty());
        let cursor = if open { rhythm.cursor.as_str() } else { "" };
        let view = format!("{}{cursor}", tail(&text));
        if worth && view.trim() != shown_view.trim() && !text.trim().is_empty() {
            match show(&*platform, &chat, &shared, &view).await {
                Ok(()) => {
                    shown = text;
                    shown_view = view;
                }
                Err(f) if f.flood => {
                    strikes += 1;
                    if strikes >= MAX_FLOOD_STRIKES {
                        tracing::warn!(
                            chat = %chat.chat_id,
                            "flood control stops this chat's live edits; the answer comes whole"
                        );
                        shared.stopped.store(true, Ordering::SeqCst);
                        return;
                    }
                }
                Err(f) => tracing::debug!(error = %f.message, "a live edit failed"),
            }
        }
        if !open {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(rhythm.interval) => {}
            _ = shared.woken.notified() => {}
        }
    }
}

/// Sends the bubble's first message, or edits it.
async fn show<P: Platform>(
    platform: &P,
    chat: &ChatRef,
    shared: &Shared,
    view: &str,
) -> Result<(), super::SendFailure> {
    let id = super::wire::lock(&shared.message_id).clone();
    match id {
        Some(id) => platform.edit(chat, &id, view, false).await,
        None => {
            let id = platform.send_plain(chat, view).await?;
            *super::wire::lock(&shared.message_id) = Some(id);
            Ok(())
        }
    }
}
