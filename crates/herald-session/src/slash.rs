//! The one slash-command table of a live conversation: every door that has slash
//! commands (`herald chat`, the JSON-RPC gateway, ACP, the chat platforms) answers them
//! here, with the same effects and the same words; a command its door does not offer
//! is unknown there.

use crate::commands::{self, ChatCommand};
use crate::conversation::{Conversation, Steered, SwitchRefused};
use crate::turns::AfterTurn;
use crate::{Decision, RunError};

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
    /// This chat is to be the home channel (`/sethome`, a chat platform's).
    SetHome,
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
    pub(crate) async fn command(&self, line: &str) -> Result<Reply, SwitchRefused> {
        let skills = self.host().runtime().skills.clone();
        let listed = skills.clone();
        let installed = tokio::task::spawn_blocking(move || listed.discover())
            .await
            .unwrap_or_default();
        Ok(match commands::parse(line, self.door(), &installed) {
            ChatCommand::Prompt(_) => Reply::NotACommand,
            ChatCommand::Builtin { def, arg } => self.builtin(def, arg, &installed).await?,
            ChatCommand::Skill { name, text } => {
                let id = self.session().id().to_owned();
                let read = move || skills.invocation_message(&[name], &text, &id).0;
                Reply::Send(tokio::task::spawn_blocking(read).await.unwrap_or_default())
            }
            ChatCommand::Unknown(word) => Reply::Unknown {
                word,
                help: commands::help_text(self.door(), &installed),
            },
        })
    }

    /// One built-in command; a door-served one (RPC's `/history` ...) is unknown here.
    async fn builtin(
        &self,
        name: &str,
        arg: String,
        installed: &[herald_agent::skills::Skill],
    ) -> Result<Reply, SwitchRefused> {
        let said = |s: String| Ok(Reply::Output(s));
        match name {
            "help" => said(commands::help_text(self.door(), installed)),
            "quit" => Ok(Reply::Quit),
            "new" => Ok(Reply::New),
            "resume" => Ok(Reply::Resume(arg)),
            "sethome" => Ok(Reply::SetHome),
            "model" if arg.is_empty() => said(format!("Model: {}", self.model())),
            "model" => Ok(Reply::ModelSwitched(self.switch_model(&arg).await?)),
            "tools" => said(self.session().tool_names().join(", ")),
            "context" => said(format!(
                "{} messages in this session.",
                self.session().with_history(<[_]>::len)
            )),
            "compress" => said(self.compact().await),
            "steer" | "queue" if arg.is_empty() => said(format!("Usage: /{name} TEXT")),
            // As Hermes: with nothing running, /steer and /queue send their text as a
            // prompt (/steer after an interrupt with the prompt it cut short).
            "steer" if !self.busy() => Ok(Reply::Send(self.inner.after_interrupt(arg))),
            "steer" => said(self.steer_line(&arg)),
            "queue" if !self.busy() => Ok(Reply::Send(arg)),
            "queue" => Ok(self.queue_line(arg).await),
            "version" => said(format!("herald {}", env!("CARGO_PKG_VERSION"))),
            "yolo" => said(self.toggle_yolo()),
            "stop" => said(self.stop_line()),
            "approve" => said(self.approve_line(&arg)),
            "deny" => said(self.deny_line(&arg)),
            "status" => said(self.status_text().await),
            "usage" => said(self.usage_text().await),
            other => Ok(Reply::Unknown {
                word: other.to_owned(),
                help: commands::help_text(self.door(), installed),
            }),
        }
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

    /// `/stop`: as Hermes's gateway, the running turn stopped and the queue dropped.
    fn stop_line(&self) -> String {
        if !self.busy() {
            return "No active task to stop.".to_owned();
        }
        self.interrupt_then(AfterTurn::Drop);
        "⚡ Stopped. You can continue this session.".to_owned()
    }

    /// `/approve [all] [session|always]`: the oldest pending command (every one with
    /// `all`), as Hermes's gateway answers it.
    fn approve_line(&self, arg: &str) -> String {
        let words: Vec<String> = arg.split_whitespace().map(str::to_lowercase).collect();
        let all = words.iter().any(|w| w == "all");
        let has = |names: &[&str]| words.iter().any(|w| names.contains(&w.as_str()));
        let (decision, how) = if has(&["always", "permanent", "permanently"]) {
            (Decision::Always, " (pattern approved permanently)")
        } else if has(&["session", "ses"]) {
            (Decision::Session, " (pattern approved for this session)")
        } else {
            (Decision::Once, "")
        };
        match self.answer_pending(decision, all) {
            0 => "No pending command to approve.".to_owned(),
            1 => format!("✅ Command approved{how}. The agent is resuming..."),
            n => format!("✅ Commands approved{how} ({n} commands). The agent is resuming..."),
        }
    }

    /// `/deny [all] [reason]`: the reason (one line, 280 characters at most) reaches
    /// the model with the refusal, at the denied tool's result.
    fn deny_line(&self, arg: &str) -> String {
        let (all, reason) = match arg.split_once(char::is_whitespace) {
            Some((first, rest)) if first.eq_ignore_ascii_case("all") => (true, rest.trim()),
            _ if arg.eq_ignore_ascii_case("all") => (true, ""),
            _ => (false, arg),
        };
        let reason: String = reason
            .chars()
            .take(280)
            .collect::<String>()
            .trim()
            .to_owned();
        let n = self.answer_pending(Decision::Deny, all);
        if n > 0 && !reason.is_empty() {
            let _ = self.steer(&format!("The user denied the command: {reason}"));
        }
        match (n, reason.is_empty()) {
            (0, _) => "No pending command to deny.".to_owned(),
            (1, true) => "❌ Command denied.".to_owned(),
            (n, true) => format!("❌ Commands denied ({n} commands)."),
            (1, false) => format!("❌ Command denied. Reason relayed to the agent: \"{reason}\""),
            (n, false) => format!(
                "❌ Commands denied ({n} commands). Reason relayed to the agent: \"{reason}\""
            ),
        }
    }

    /// Answers the running turn's oldest pending approval (every one with `all`); how
    /// many were answered.
    fn answer_pending(&self, decision: Decision, all: bool) -> usize {
        let Some(run) = self.run().filter(|_| self.busy()) else {
            return 0;
        };
        match run.approve(None, decision, all) {
            Ok(n) => n,
            Err(RunError::NotPending | RunError::NotActive) => 0,
            Err(e) => {
                tracing::debug!(error = %e, "an approval answer was refused");
                0
            }
        }
    }

    /// `/status`: the session, its model, context and tokens, whether a turn runs.
    async fn status_text(&self) -> String {
        let session = self.session();
        let id = session.id().to_owned();
        let title = self.host().session_title(&id).await.ok().flatten();
        let usage = self.host().session_usage(&id).await.ok().flatten();
        let runtime = self.host().runtime();
        let mut lines = vec![format!("Session: {id}")];
        if let Some(title) = title.filter(|t| !t.is_empty()) {
            lines.push(format!("Title: {title}"));
        }
        lines.push(format!("Model: {} ({})", self.model(), runtime.provider));
        let used = session.context_tokens();
        let window = runtime.context_window().max(used).max(1);
        lines.push(format!(
            "Context: {used} / {window} tokens ({}%)",
            used * 100 / window
        ));
        if let Some(u) = usage {
            lines.push(format!("Tokens: {}", u.input_tokens + u.output_tokens));
        }
        let running = if self.busy() { "yes" } else { "no" };
        lines.push(format!("Running: {running}"));
        lines.push(format!("Queued: {}", self.queued()));
        lines.join("\n")
    }

    /// `/usage`: the session's tokens and API calls so far.
    async fn usage_text(&self) -> String {
        let id = self.session().id().to_owned();
        match self.host().session_usage(&id).await {
            Ok(Some(u)) => format!(
                "Tokens: {} in, {} out ({} total) over {} API calls.",
                u.input_tokens,
                u.output_tokens,
                u.input_tokens + u.output_tokens,
                u.api_calls
            ),
            Ok(None) => "No usage recorded for this session yet.".to_owned(),
            Err(e) => format!("Cannot read the usage: {}", e.told()),
        }
    }
}
