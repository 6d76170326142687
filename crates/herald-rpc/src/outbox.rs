//! What goes out to one client, in order: whole frames, and text deltas that a
//! WebSocket may coalesce into ~33 ms batches (rpc-gateway.md §1); every other frame
//! flushes the batch first, so the order is kept. What waits for a client is bounded in
//! bytes ([`OUTBOX_BYTES`]): producers then wait, and through the run's flow so does the
//! provider.

use crate::frame;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

/// Bytes waiting for a slow client at most; producers then wait (back-pressure).
pub const OUTBOX_BYTES: usize = 512 * 1024;
/// A batch of deltas is sent once it holds this much text, however fast more come.
pub const MAX_BATCH_TEXT: usize = 64 * 1024;

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
            } => frame::event(kind, Some(session_id), Some(crate::events::Text { text })),
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
            ) if kind == k2 && session_id == s2 && text.len() < MAX_BATCH_TEXT => {
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
    tx: mpsc::UnboundedSender<(Out, OwnedSemaphorePermit)>,
    room: Arc<Semaphore>,
}

/// The writer's side of an [`Outbox`]: each item's room is given back as it is taken.
pub struct Outgoing(mpsc::UnboundedReceiver<(Out, OwnedSemaphorePermit)>);

impl Outgoing {
    pub async fn recv(&mut self) -> Option<Out> {
        self.0.recv().await.map(|(out, _room)| out)
    }

    /// Nothing more waits now.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Out {
    /// What an item weighs in the outbox's byte budget.
    fn weight(&self) -> usize {
        match self {
            Out::Frame(f) => f.len(),
            Out::Delta { text, .. } => text.len() + 64,
        }
    }
}

impl Outbox {
    pub fn new(conn: u64) -> (Outbox, Outgoing) {
        let (tx, rx) = mpsc::unbounded_channel();
        let room = Arc::new(Semaphore::new(OUTBOX_BYTES));
        (Outbox { conn, tx, room }, Outgoing(rx))
    }

    /// Sends one item once there is room for it; false when the client has gone.
    pub async fn send(&self, out: Out) -> bool {
        let wanted = out.weight().clamp(1, OUTBOX_BYTES) as u32;
        match self.room.clone().acquire_many_owned(wanted).await {
            Ok(room) => self.tx.send((out, room)).is_ok(),
            Err(_) => false,
        }
    }

    pub async fn frame(&self, frame: String) -> bool {
        self.send(Out::Frame(frame)).await
    }

    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}
