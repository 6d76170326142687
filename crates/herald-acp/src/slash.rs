//! Slash commands answered by the server itself (acp.md §3.3), with no model call:
//! `help`, `model [name]`, `tools`, `context`, `reset`, `compact`, `steer`, `queue`,
//! `version`, each answered by the session's one command table (`reset` is its
//! `/new`). Any other `/word` goes to the model as text.

use crate::{AcpServer, AcpSession};
use herald_session::{Op, OpError, Opening, Outcome, Reply, SwitchRefused};

/// The commands, with what each does (also offered to the IDE).
pub const COMMANDS: [(&str, &str); 9] = [
    ("help", "list these commands"),
    (
        "model",
        "show the model, or switch it for this session: /model NAME",
    ),
    ("tools", "list the tools this session offers"),
    ("context", "how much conversation the session holds"),
    ("reset", "start the conversation afresh"),
    (
        "compact",
        "summarize the conversation so far to free context",
    ),
    ("steer", "add guidance to the running turn: /steer TEXT"),
    ("queue", "run TEXT after the current turn: /queue TEXT"),
    ("version", "herald's version"),
];

/// What a slash command came to.
pub enum Answered {
    /// The reply to show.
    Said(String),
    /// A prompt to run instead (an idle `/steer` or `/queue`).
    Send(String),
}

/// The reply to a slash command, or `None` when `line` is not one of ours.
pub async fn answer(server: &AcpServer, live: &AcpSession, line: &str) -> Option<Answered> {
    let rest = line.strip_prefix('/')?;
    let word = rest.split(char::is_whitespace).next().unwrap_or(rest);
    if !COMMANDS.iter().any(|(c, _)| *c == word) {
        return None;
    }
    if word == "help" {
        return Some(Answered::Said(help()));
    }
    Some(Answered::Said(
        match live.conversation.submit(Op::Command(line.to_owned())).await {
            Ok(Outcome::Reply(Reply::Send(text))) => return Some(Answered::Send(text)),
            Ok(Outcome::Reply(Reply::Output(text))) => text,
            Ok(Outcome::Reply(Reply::ModelSwitched(name))) => {
                format!("Model switched to {name} for this session.")
            }
            Ok(Outcome::Reply(Reply::New)) => reset(server, live).await,
            Ok(_) => help(),
            Err(OpError::Switch(SwitchRefused::Busy)) => {
                "A turn is running; switch the model when it ends.".to_owned()
            }
            Err(e) => format!("Could not switch: cannot switch the model: {e}"),
        },
    ))
}

/// ACP's own list: the nine commands it answers.
fn help() -> String {
    COMMANDS
        .iter()
        .map(|(c, what)| format!("/{c} — {what}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `/reset`: a new session from now on, with the one carry-over rule (the model and
/// the client's MCP servers stay).
async fn reset(server: &AcpServer, live: &AcpSession) -> String {
    let old = live.conversation.session();
    let options = server.options(old.cwd(), &live.wire.gate, &[]);
    match live.conversation.submit(Op::New(Opening(options))).await {
        Ok(_) => {
            let fresh = live.conversation.session();
            live.wire.gate.attach(fresh.id(), fresh.cwd());
            "Started afresh: the conversation so far is kept in its own session.".to_owned()
        }
        Err(OpError::Session(herald_session::SessionError::Busy(_))) => {
            "A turn is running; reset when it ends.".to_owned()
        }
        Err(e) => format!("Cannot reset: {}", e.told()),
    }
}
