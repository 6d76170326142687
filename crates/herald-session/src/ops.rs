//! What a front door asks of a live conversation, as one typed operation
//! ([`Conversation::submit`]), and what came of it. A door maps its wire onto `Op`s and
//! the [`Outcome`]s (and the run's typed [`crate::RunEvents`]) back onto its wire.

use crate::conversation::{Conversation, Steered, SwitchRefused};
use crate::host::{Compressed, RewindRequest};
use crate::runs::{RunError, RunHandle};
use crate::sessions::SessionError;
use crate::slash::Reply;
use crate::{Decision, TitleRefused, UserInput};

/// One operation on a live conversation.
#[derive(Debug, Clone)]
pub enum Op {
    /// A turn on this input now; refused as busy while one runs.
    Prompt(UserInput),
    /// This input after the running turn (at once when none runs).
    Queue(UserInput),
    /// Guidance for the running turn at its next tool result.
    Steer(String),
    Interrupt,
    /// Answers a pending approval (the oldest when `request_id` is `None`; every one
    /// with `all`).
    Approve {
        request_id: Option<String>,
        decision: Decision,
        all: bool,
    },
    /// Answers a pending `clarify` question.
    Clarify {
        request_id: String,
        answer: String,
    },
    /// The model of later turns (`provider:model` too).
    SetModel(String),
    /// Summarizes the conversation before its last exchange (with a focus).
    Compress(Option<String>),
    /// Takes back the last exchange.
    Undo,
    /// Cuts the history before a user turn.
    Rewind(RewindRequest),
    Title(String),
    /// A slash line, answered by the one command table.
    Command(String),
}

/// What an operation did.
#[derive(Debug)]
pub enum Outcome {
    /// A turn started: its handle (and through it the typed event stream).
    Started(RunHandle),
    /// Queued behind the running turn, at this position.
    Queued(usize),
    Steered(Steered),
    Interrupted,
    /// How many pending requests were answered.
    Answered(usize),
    /// The model's name.
    ModelSet(String),
    Compressed(Compressed),
    /// How many messages left the history.
    Undone(usize),
    /// The user rows that survive the rewind.
    Rewound(Vec<i64>),
    /// The title as kept.
    Titled(String),
    Reply(Reply),
}

/// Why an operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(transparent)]
    Run(#[from] RunError),
    #[error(transparent)]
    Switch(#[from] SwitchRefused),
    #[error(transparent)]
    Title(#[from] TitleRefused),
    /// Nothing runs that could take the answer.
    #[error("nothing is waiting for an answer")]
    NothingRunning,
}

impl OpError {
    /// What a client is told: a store failure as [`crate::FAILED_INSIDE`] (its detail
    /// logged), anything else in its own words.
    pub fn told(&self) -> std::borrow::Cow<'static, str> {
        match self {
            OpError::Session(e) => e.told(),
            other => std::borrow::Cow::Owned(other.to_string()),
        }
    }
}

impl Conversation {
    /// Does `op` on this conversation.
    pub async fn submit(&self, op: Op) -> Result<Outcome, OpError> {
        let host = self.host().clone();
        Ok(match op {
            Op::Prompt(input) => Outcome::Started(self.start(input).await?),
            Op::Queue(input) if self.busy() => Outcome::Queued(self.queue(input)),
            Op::Queue(input) => Outcome::Started(self.start(input).await?),
            Op::Steer(text) => Outcome::Steered(self.steer(&text)?),
            Op::Interrupt => {
                self.interrupt();
                Outcome::Interrupted
            }
            Op::Approve {
                request_id,
                decision,
                all,
            } => {
                let run = self.run().ok_or(OpError::NothingRunning)?;
                Outcome::Answered(run.approve(request_id.as_deref(), decision, all)?)
            }
            Op::Clarify { request_id, answer } => {
                let run = self.run().ok_or(OpError::NothingRunning)?;
                run.clarify(&request_id, answer)?;
                Outcome::Answered(1)
            }
            Op::SetModel(spec) => Outcome::ModelSet(self.switch_model(&spec)?),
            Op::Compress(focus) => {
                Outcome::Compressed(host.compress(&self.session(), focus.as_deref()).await?)
            }
            Op::Undo => Outcome::Undone(host.undo(&self.session()).await?),
            Op::Rewind(request) => Outcome::Rewound(host.rewind(&self.session(), &request).await?),
            Op::Title(title) => {
                let id = self.session().id().to_owned();
                Outcome::Titled(host.set_session_title(&id, title).await??)
            }
            Op::Command(line) => Outcome::Reply(self.command(&line).await?),
        })
    }
}
