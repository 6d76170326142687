//! What the door keeps for one live conversation: its chat, the inbox entries whose
//! turns it owes (waiting ones in order, started ones by run), the questions it asked
//! (approval buttons, a clarify question), and when it last acknowledged a busy prompt.

use super::ChatRef;
use herald_session::DoorWire;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// An inbox entry whose turn the conversation owes.
#[derive(Debug, Clone)]
pub(crate) struct Ticket {
    pub inbox_id: i64,
    pub started_ms: i64,
    /// The prompt's text, to know its turn when it starts.
    pub text: String,
    /// The message the answer replies to.
    pub reply_to: Option<String>,
}

/// An approval asked with buttons: the request and the message holding them.
#[derive(Debug, Clone)]
pub(crate) struct Asked {
    pub request_id: String,
    pub message_id: Option<String>,
}

#[derive(Default)]
struct Tickets {
    /// Submitted, not started yet (a turn starts them in this order).
    waiting: VecDeque<Ticket>,
    /// Started, by run id.
    running: HashMap<String, Ticket>,
}

/// A chat conversation's wire.
pub struct ChatWire {
    pub(crate) chat: ChatRef,
    tickets: Mutex<Tickets>,
    /// Approvals asked with buttons, by the token in the buttons' data.
    asked: Mutex<HashMap<String, Asked>>,
    /// A `clarify` question waiting for the next plain message: its request id and
    /// choices.
    clarify: Mutex<Option<(String, Vec<String>)>>,
    /// When a busy prompt was last acknowledged.
    pub(crate) last_ack: Mutex<Option<std::time::Instant>>,
    /// Entries of this conversation the door is acting on right now.
    taking: AtomicUsize,
}

impl DoorWire for ChatWire {
    const DOOR: herald_session::Door = herald_session::Door::Platform;
    type Memo = ();
    fn memo(&self) {}
    /// Not closed to make room while it owes a turn, asked something, or an entry of
    /// it is being acted on.
    fn in_use(&self) -> bool {
        let tickets = lock(&self.tickets);
        !tickets.waiting.is_empty()
            || !tickets.running.is_empty()
            || !lock(&self.asked).is_empty()
            || lock(&self.clarify).is_some()
            || self.taking.load(Ordering::SeqCst) > 0
    }
}

pub(crate) use herald_session::conversation::lock;

/// Marks an entry as being acted on while it lives.
pub(crate) struct Taking<'a>(&'a ChatWire);

impl Drop for Taking<'_> {
    fn drop(&mut self) {
        self.0.taking.fetch_sub(1, Ordering::SeqCst);
    }
}

impl ChatWire {
    pub(crate) fn new(chat: ChatRef) -> ChatWire {
        ChatWire {
            chat,
            tickets: Mutex::default(),
            asked: Mutex::default(),
            clarify: Mutex::default(),
            last_ack: Mutex::default(),
            taking: AtomicUsize::new(0),
        }
    }

    pub(crate) fn taking(&self) -> Taking<'_> {
        self.taking.fetch_add(1, Ordering::SeqCst);
        Taking(self)
    }

    /// A prompt about to be submitted.
    pub(crate) fn wait(&self, t: Ticket) {
        lock(&self.tickets).waiting.push_back(t);
    }

    /// A turn started on `text`: the oldest waiting ticket of that text (else the
    /// oldest, as a turn after an interrupt carries a note) is now the run's.
    /// A turn started: the ticket it answers runs; the message it answers, if any.
    pub(crate) fn start(&self, run_id: String, text: &str) -> Option<String> {
        let mut t = lock(&self.tickets);
        let at = t.waiting.iter().position(|w| w.text == text).or(Some(0));
        let ticket = at.and_then(|i| t.waiting.remove(i))?;
        let answering = ticket.reply_to.clone();
        t.running.insert(run_id, ticket);
        answering
    }

    /// The ticket of a run that finished (none for a turn no entry asked for, such as
    /// a `/queue` or `/steer` line).
    pub(crate) fn finish(&self, run_id: &str) -> Option<Ticket> {
        lock(&self.tickets).running.remove(run_id)
    }

    /// A queued prompt could not start: the oldest waiting ticket.
    pub(crate) fn fail_next(&self) -> Option<Ticket> {
        lock(&self.tickets).waiting.pop_front()
    }

    /// A submitted prompt that started no turn of its own (steered, refused).
    pub(crate) fn withdraw(&self, inbox_id: i64) -> Option<Ticket> {
        let mut t = lock(&self.tickets);
        let at = t.waiting.iter().position(|w| w.inbox_id == inbox_id)?;
        t.waiting.remove(at)
    }

    /// Every waiting ticket (the queue was dropped, by `/stop` or a new session).
    pub(crate) fn drop_waiting(&self) -> Vec<Ticket> {
        lock(&self.tickets).waiting.drain(..).collect()
    }

    pub(crate) fn ask(&self, token: String, asked: Asked) {
        lock(&self.asked).insert(token, asked);
    }

    /// The approval asked under `token`, taken (it is answered once).
    pub(crate) fn take_asked(&self, token: &str) -> Option<Asked> {
        lock(&self.asked).remove(token)
    }

    /// The approval asked for `request_id`, taken.
    pub(crate) fn take_request(&self, request_id: &str) -> Option<Asked> {
        let mut asked = lock(&self.asked);
        let token = asked
            .iter()
            .find(|(_, a)| a.request_id == request_id)?
            .0
            .clone();
        asked.remove(&token)
    }

    /// Every approval asked (the run ended: they expired).
    pub(crate) fn take_all_asked(&self) -> Vec<Asked> {
        lock(&self.asked).drain().map(|(_, a)| a).collect()
    }

    pub(crate) fn awaiting_approval(&self) -> bool {
        !lock(&self.asked).is_empty()
    }

    pub(crate) fn set_clarify(&self, asked: Option<(String, Vec<String>)>) {
        *lock(&self.clarify) = asked;
    }

    pub(crate) fn take_clarify(&self) -> Option<(String, Vec<String>)> {
        lock(&self.clarify).take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticket(id: i64, text: &str) -> Ticket {
        Ticket {
            inbox_id: id,
            started_ms: 0,
            text: text.into(),
            reply_to: None,
        }
    }

    #[test]
    fn tickets_follow_their_runs_in_any_event_order() {
        let w = ChatWire::new(ChatRef {
            chat_id: "1".into(),
            thread_id: None,
            group: false,
        });
        w.wait(ticket(1, "one"));
        w.wait(ticket(2, "two"));
        w.wait(ticket(3, "three"));
        // The second turn starts before the first's end is seen.
        w.start("r1".into(), "one");
        w.start("r2".into(), "[interrupted] two");
        assert_eq!(w.finish("r2").map(|t| t.inbox_id), Some(2));
        assert_eq!(w.finish("r1").map(|t| t.inbox_id), Some(1));
        assert!(w.finish("r9").is_none());
        assert_eq!(w.withdraw(3).map(|t| t.inbox_id), Some(3));
        assert!(!w.in_use());
        let _t = w.taking();
        assert!(w.in_use());
    }
}
