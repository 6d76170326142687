//! What a front door asks of a live conversation, as one typed operation
//! ([`Conversation::submit`]), and what came of it. A door maps its wire onto `Op`s and
//! the [`Outcome`]s (and the run's typed [`crate::RunEvents`]) back onto its wire.

use crate::SessionOptions;
use crate::conversation::{Conversation, Steered, SwitchRefused};
use crate::host::{Compressed, RewindRequest};
use crate::runs::{RunError, RunHandle};
use crate::sessions::SessionError;
use crate::slash::Reply;
use crate::turns::{AfterTurn, Placed};
use crate::{Decision, TitleRefused, UserInput};

/// One operation on a live conversation.
#[derive(Debug)]
pub enum Op {
    /// A turn on this input now; refused as busy while one runs.
    Prompt(UserInput),
    /// A prompt as its client sent it: now when nothing runs, else as the busy-input
    /// policy says (`display.busy_input_mode`: interrupt, queue or steer).
    Submit(UserInput),
    /// This input after the running turn and the prompts queued before it (at once
    /// when none runs).
    Queue(UserInput),
    /// Guidance for the running turn at its next tool result.
    Steer(String),
    /// Stops the running turn; the queued prompts run on.
    Interrupt,
    /// Stops the running turn; the queued prompts wait for the next prompt, which runs
    /// after them (ACP's `session/cancel`).
    Cancel,
    /// Stops the running turn and drops the queued prompts (`/stop`).
    Stop,
    /// An image file for the next prompt.
    Attach(String),
    /// Answers a tool's pending sudo-password or secret request.
    Answer {
        request_id: String,
        answer: String,
    },
    /// A new session from now on, with the door's options; the model and the client's
    /// MCP servers carry over.
    New(Opening),
    /// The stored session of this id from now on, with the model it last had; the
    /// client's MCP servers carry over.
    Resume(String, Opening),
    /// A branch of the session (named) from now on; the model and the client's MCP
    /// servers carry over.
    Branch(Option<String>, Opening),
    /// Ends the conversation: its turn stopped, its stream closed after it.
    Close,
    /// A turn setting of this session (fast mode, reasoning effort, yolo).
    Set(crate::Setting),
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

/// The options a door opens a session with (its tools, answers, folder ...).
pub struct Opening(pub SessionOptions);

impl std::fmt::Debug for Opening {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Opening").field(&self.0.source).finish()
    }
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
    /// How many images wait for the next prompt.
    Attached(usize),
    /// The conversation holds this stored session now, with this many messages.
    Switched {
        id: String,
        messages: usize,
    },
    /// The conversation holds this branch now, titled so.
    Branched {
        id: String,
        title: String,
    },
    Closed,
    /// The setting's value now, as Hermes answers it.
    Set(String),
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
    #[error(transparent)]
    Setting(#[from] crate::SettingRefused),
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
        Ok(match op {
            Op::Prompt(input) => Outcome::Started(self.prompt_now(input).await?),
            Op::Submit(input) => placed(self.submit_prompt(input).await?),
            Op::Queue(input) => placed(self.enqueue(input).await?),
            Op::Steer(text) => Outcome::Steered(self.steer(&text)?),
            Op::Interrupt => self.stopped(AfterTurn::GoOn),
            Op::Cancel => self.stopped(AfterTurn::Hold),
            Op::Stop => self.stopped(AfterTurn::Drop),
            Op::Attach(path) => Outcome::Attached(self.attach(path)),
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
            Op::Answer { request_id, answer } => {
                let run = self.run().ok_or(OpError::NothingRunning)?;
                run.answer_prompt(&request_id, answer)?;
                Outcome::Answered(1)
            }
            Op::SetModel(spec) => Outcome::ModelSet(self.switch_model(&spec).await?),
            Op::New(Opening(options)) => switched(&self.fresh(options).await?),
            Op::Resume(id, Opening(options)) => switched(&self.resumed(&id, options).await?),
            Op::Branch(name, Opening(options)) => {
                let (session, title) = self.branched(name, options).await?;
                let id = session.id().to_owned();
                Outcome::Branched { id, title }
            }
            Op::Close => {
                self.close();
                Outcome::Closed
            }
            Op::Set(setting) => Outcome::Set(self.apply(setting)?),
            other => self.on_history(other).await?,
        })
    }

    /// The operations on the stored history.
    async fn on_history(&self, op: Op) -> Result<Outcome, OpError> {
        let host = self.host().clone();
        Ok(match op {
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
            other => {
                tracing::error!(?other, "an operation reached the history's handler");
                return Err(OpError::NothingRunning);
            }
        })
    }

    fn stopped(&self, after: AfterTurn) -> Outcome {
        self.interrupt_then(after);
        Outcome::Interrupted
    }
}

fn switched(session: &crate::Session) -> Outcome {
    Outcome::Switched {
        id: session.id().to_owned(),
        messages: session.with_history(<[_]>::len),
    }
}

fn placed(placed: Placed) -> Outcome {
    match placed {
        Placed::Started(run) => Outcome::Started(run),
        Placed::Queued(n) => Outcome::Queued(n),
        Placed::Steered => Outcome::Steered(Steered::Queued),
    }
}
