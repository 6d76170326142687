//! What goes out to one client, in order: whole frames, and text deltas that a
//! WebSocket may coalesce into ~33 ms batches (rpc-gateway.md §1); every other frame
//! flushes the batch first, so the order is kept.

use crate::frame;
use serde_json::json;
use tokio::sync::mpsc;

/// Frames waiting for a slow client at most; producers then wait (back-pressure).
pub const OUTBOX_FRAMES: usize = 1024;

/// One outgoing item.
#[derive(Debug, Clone, PartialEq)]
pub enum Out {
    Frame(String),
    /// `message.delta`, `reasoning.delta` or `thinking.delta` text of a session.
    Delta {
        kind: &'static str,
        session_id: String,
        text: String,
    },
}

impl Out {
    /// The frame as sent on its own.
    pub fn render(&self) -> String {
        match self {
            Out::Frame(f) => f.clone(),
            Out::Delta {
                kind,
                session_id,
                text,
            } => frame::event(kind, Some(session_id), Some(json!({"text": text}))),
        }
    }

    /// Joins `next` onto this delta when both are the same kind of the same session.
    pub fn absorb(&mut self, next: &Out) -> bool {
        match (self, next) {
            (
                Out::Delta {
                    kind,
                    session_id,
                    text,
                },
                Out::Delta {
                    kind: k2,
                    session_id: s2,
                    text: t2,
                },
            ) if kind == k2 && session_id == s2 => {
                text.push_str(t2);
                true
            }
            _ => false,
        }
    }
}

/// A client's outgoing side; cheap to clone.
#[derive(Clone, Debug)]
pub struct Outbox {
    /// Which connection this is (sessions remember the one they are bound to).
    pub conn: u64,
    tx: mpsc::Sender<Out>,
}

impl Outbox {
    pub fn new(conn: u64) -> (Outbox, mpsc::Receiver<Out>) {
        let (tx, rx) = mpsc::channel(OUTBOX_FRAMES);
        (Outbox { conn, tx }, rx)
    }

    /// Sends one item; false when the client has gone.
    pub async fn send(&self, out: Out) -> bool {
        self.tx.send(out).await.is_ok()
    }

    pub async fn frame(&self, frame: String) -> bool {
        self.send(Out::Frame(frame)).await
    }

    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}
