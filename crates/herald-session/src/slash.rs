//! The one slash-command table of a live conversation: every door that has slash
//! commands (`herald chat`, the JSON-RPC gateway, ACP's nine) answers them here, with
//! the same effects and the same words.

use crate::commands::{self, ChatCommand};
use crate::conversation::{Conversation, Steered, SwitchRefused};

/// What a slash line asks for, answered by the one table.
#[derive(Debug, PartialEq, Eq)]
pub enum Reply {
    /// Output to show; nothing goes to the model.
    Output(String),
    /// A user message to run as a turn (a skill's command).
    Send(String),
    /// The model was switched to this one for the session's later turns.
    ModelSwitched(String),
    /// A new session is asked for (`/new`, `/reset`).
    New,
    /// The stored session of this id is asked for.
    Resume(String),
    Quit,
    /// `/word` is no command: the word and the command list.
    Unknown {
        word: String,
        help: String,
    },
    /// The line is a prompt, not a command.
    NotACommand,
}

impl Conversation {
    /// Answers one (trimmed) input line from the slash-command table. The skill files
    /// are read off the async workers.
    pub async fn command(&self, line: &str) -> Result<Reply, SwitchRefused> {
        let skills = self.host().runtime().skills.clone();
        let listed = skills.clone();
        let installed = tokio::task::spawn_blocking(move || listed.discover())
            .await
            .unwrap_or_default();
        Ok(match commands::parse(line, &installed) {
            ChatCommand::Prompt(_) => Reply::NotACommand,
            ChatCommand::Help => Reply::Output(commands::help_text(&installed)),
            ChatCommand::Quit => Reply::Quit,
            ChatCommand::New => Reply::New,
            ChatCommand::Resume(id) => Reply::Resume(id),
            ChatCommand::Model(spec) if spec.is_empty() => {
                Reply::Output(format!("Model: {}", self.model()))
            }
            ChatCommand::Model(spec) => Reply::ModelSwitched(self.switch_model(&spec)?),
            ChatCommand::Tools => Reply::Output(self.session().tool_names().join(", ")),
            ChatCommand::Context => Reply::Output(format!(
                "{} messages in this session.",
                self.session().with_history(<[_]>::len)
            )),
            ChatCommand::Compact => Reply::Output(self.compact().await),
            ChatCommand::Steer(text) if text.is_empty() => {
                Reply::Output("Usage: /steer TEXT".to_owned())
            }
            // As Hermes: with nothing running, /steer and /queue send their text as a
            // prompt.
            ChatCommand::Steer(text) if !self.busy() => {
                Reply::Send(self.inner.after_interrupt(text))
            }
            ChatCommand::Steer(text) => Reply::Output(self.steer_line(&text)),
            ChatCommand::Queue(text) if text.is_empty() => {
                Reply::Output("Usage: /queue TEXT".to_owned())
            }
            ChatCommand::Queue(text) if !self.busy() => Reply::Send(text),
            ChatCommand::Queue(text) => self.queue_line(text).await,
            ChatCommand::Version => Reply::Output(format!("herald {}", env!("CARGO_PKG_VERSION"))),
            ChatCommand::Yolo => Reply::Output(self.toggle_yolo()),
            ChatCommand::Skill { name, text } => {
                let id = self.session().id().to_owned();
                let read = move || skills.invocation_message(&[name], &text, &id).0;
                Reply::Send(tokio::task::spawn_blocking(read).await.unwrap_or_default())
            }
            ChatCommand::Unknown(word) => Reply::Unknown {
                word,
                help: commands::help_text(&installed),
            },
        })
    }

    async fn compact(&self) -> String {
        if self.busy() {
            return "A turn is running; compact when it ends.".to_owned();
        }
        match self.host().compress(&self.session(), None).await {
            Ok(c) if c.removed == 0 => "Nothing to compact yet.".to_owned(),
            Ok(c) => format!(
                "Compacted {} messages into a summary; kept the last {}.",
                c.removed, c.kept
            ),
            Err(e) => format!("Could not compact: {e}"),
        }
    }

    /// `/yolo`: as Hermes's, for this session only; the hard-line floor and
    /// `approvals.deny` still hold.
    fn toggle_yolo(&self) -> String {
        match self.session().0.approvals.toggle_session_yolo() {
            true => "YOLO mode on: commands and plugins' approval requests in this session run unasked (the floor and approvals.deny still hold). /yolo again to stop.".to_owned(),
            false => "YOLO mode off: dangerous commands and plugins' approval requests ask again.".to_owned(),
        }
    }

    async fn queue_line(&self, text: String) -> Reply {
        match self.enqueue(text.into()).await {
            Ok(crate::turns::Placed::Queued(n)) => {
                Reply::Output(format!("Queued for the next turn. ({n} queued)"))
            }
            Ok(_) => Reply::Output("Nothing was running: it runs now.".to_owned()),
            Err(e) => Reply::Output(format!("Cannot queue: {}", e.told())),
        }
    }

    fn steer_line(&self, text: &str) -> String {
        match self.steer(text) {
            Ok(Steered::Queued) => "Noted: the guidance rides on the next tool result.".to_owned(),
            Ok(Steered::Rejected) => "Nothing is running to steer; send it as a prompt.".to_owned(),
            Err(e) => format!("Cannot steer: {e}"),
        }
    }
}
