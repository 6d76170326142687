//! What goes out to one client, in order: whole frames, and text deltas that a
//! WebSocket may coalesce into ~33 ms batches (rpc-gateway.md §1); every other frame
//! flushes the batch first, so the order is kept. What waits for a client is bounded in
//! bytes ([`OUTBOX_BYTES`]): producers then wait, and through the run's flow so does the
//! provider.

use crate::frame;

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
    queue: herald_http::Outbox<Out>,
}

/// The writer's side of an [`Outbox`].
pub type Outgoing = herald_http::Outgoing<Out>;

impl herald_http::Weight for Out {
    fn weight(&self) -> usize {
        match self {
            Out::Frame(f) => f.len(),
            Out::Delta { text, .. } => text.len() + 64,
        }
    }
}

impl Outbox {
    /// No write timeout here: the WebSocket writer gives up on a client that takes
    /// nothing for its own timeout, and stdio's reader is the process that started us.
    pub fn new(conn: u64) -> (Outbox, Outgoing) {
        let (queue, rx) = herald_http::outbox(OUTBOX_BYTES, None);
        (Outbox { conn, queue }, rx)
    }

    /// Sends one item once there is room for it; false when the client has gone.
    pub async fn send(&self, out: Out) -> bool {
        self.queue.send(out).await
    }

    pub async fn frame(&self, frame: String) -> bool {
        self.send(Out::Frame(frame)).await
    }

    pub fn is_closed(&self) -> bool {
        self.queue.is_closed()
    }
}
