//! Slash commands answered by the server itself (acp.md §3.3), with no model call:
//! `help`, `model [name]`, `tools`, `context`, `reset`, `compact`, `steer`, `queue`,
//! `version`. Any other `/word` goes to the model as text.

use crate::{AcpServer, AcpSession};
use herald_session::{Steered, SwitchRefused};

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

/// The reply to a slash command, or `None` when `line` is not one of ours.
pub async fn answer(server: &AcpServer, live: &AcpSession, line: &str) -> Option<String> {
    let rest = line.strip_prefix('/')?;
    let (word, arg) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let arg = arg.trim();
    Some(match word {
        "help" => COMMANDS
            .iter()
            .map(|(c, what)| format!("/{c} — {what}"))
            .collect::<Vec<_>>()
            .join("\n"),
        "model" => model(live, arg),
        "tools" => live.conversation.session().tool_names().join(", "),
        "context" => format!(
            "{} messages in this session.",
            live.conversation.session().history().len()
        ),
        "reset" => reset(server, live).await,
        "compact" => match server
            .host
            .compress(&live.conversation.session(), None)
            .await
        {
            Ok(c) if c.removed == 0 => "Nothing to compact yet.".to_owned(),
            Ok(c) => format!(
                "Compacted {} messages into a summary; kept the last {}.",
                c.removed, c.kept
            ),
            Err(e) => format!("Could not compact: {e}"),
        },
        "steer" => steer(live, arg),
        "queue" if !arg.is_empty() => {
            let n = live.conversation.queue(arg.to_owned());
            format!("Queued for the next turn. ({n} queued)")
        }
        "version" => format!("herald {}", env!("CARGO_PKG_VERSION")),
        _ => return None,
    })
}

fn model(live: &AcpSession, spec: &str) -> String {
    if spec.is_empty() {
        return format!("Model: {}", live.conversation.model());
    }
    match live.conversation.switch_model(spec) {
        Ok(name) => format!("Model switched to {name} for this session."),
        Err(SwitchRefused::Busy) => "A turn is running; switch the model when it ends.".to_owned(),
        Err(e) => format!("Could not switch: cannot switch the model: {e}"),
    }
}

fn steer(live: &AcpSession, text: &str) -> String {
    match live.conversation.steer(text) {
        Ok(Steered::Queued) => "Noted: the guidance rides on the next tool result.".to_owned(),
        Ok(Steered::Rejected) => "Nothing is running to steer; send it as a prompt.".to_owned(),
        Err(e) => format!("Cannot steer: {e}"),
    }
}

async fn reset(server: &AcpServer, live: &AcpSession) -> String {
    if live.conversation.busy() {
        return "A turn is running; reset when it ends.".to_owned();
    }
    let old = live.conversation.session();
    match server
        .host
        .open_session(server.options(old.cwd(), &live.wire.gate))
        .await
    {
        Ok(fresh) => {
            if let Some(endpoint) = old.endpoint() {
                fresh.set_endpoint(endpoint);
            }
            live.conversation.set_session(fresh);
            "Started afresh: the conversation so far is kept in its own session.".to_owned()
        }
        Err(e) => format!("Cannot reset: {e}"),
    }
}
