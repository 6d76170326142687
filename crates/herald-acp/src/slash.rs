//! Slash commands answered by the server itself (acp.md §3.3), with no model call:
//! `help`, `model [name]`, `tools`, `context`, `reset`, `compact`, `steer`, `queue`,
//! `version`. Any other `/word` goes to the model as text.

use crate::{AcpServer, AcpSession, lock};

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
        "model" => model(server, live, arg),
        "tools" => live.session().tool_names().join(", "),
        "context" => format!(
            "{} messages in this session.",
            live.session().history().len()
        ),
        "reset" => reset(server, live).await,
        "compact" => match server.host.compress(&live.session(), None).await {
            Ok(c) if c.removed == 0 => "Nothing to compact yet.".to_owned(),
            Ok(c) => format!(
                "Compacted {} messages into a summary; kept the last {}.",
                c.removed, c.kept
            ),
            Err(e) => format!("Could not compact: {e}"),
        },
        "steer" => steer(live, arg),
        "queue" if !arg.is_empty() => {
            let mut q = lock(&live.queued);
            q.push_back(arg.to_owned());
            format!("Queued for the next turn. ({} queued)", q.len())
        }
        "version" => format!("herald {}", env!("CARGO_PKG_VERSION")),
        _ => return None,
    })
}

fn model(server: &AcpServer, live: &AcpSession, spec: &str) -> String {
    let session = live.session();
    if spec.is_empty() {
        let model = session.endpoint().map(|e| e.model).unwrap_or_default();
        return format!("Model: {model}");
    }
    if live.busy() {
        return "A turn is running; switch the model when it ends.".to_owned();
    }
    match server.switch_model(live, spec) {
        Ok(()) => {
            let name = live
                .session()
                .endpoint()
                .map(|e| e.model)
                .unwrap_or_default();
            format!("Model switched to {name} for this session.")
        }
        Err(e) => format!("Could not switch: {e}"),
    }
}

fn steer(live: &AcpSession, text: &str) -> String {
    let run = lock(&live.run).clone();
    match run {
        Some(run) if live.busy() => match run.steer(text) {
            Ok(()) => "Noted: the guidance rides on the next tool result.".to_owned(),
            Err(e) => format!("Cannot steer: {e}"),
        },
        _ => "Nothing is running to steer; send it as a prompt.".to_owned(),
    }
}

async fn reset(server: &AcpServer, live: &AcpSession) -> String {
    if live.busy() {
        return "A turn is running; reset when it ends.".to_owned();
    }
    let old = live.session();
    match server
        .host
        .open_session(server.options(old.cwd(), &live.gate))
        .await
    {
        Ok(fresh) => {
            if let Some(endpoint) = old.endpoint() {
                fresh.set_endpoint(endpoint);
            }
            *lock(&live.session) = fresh;
            "Started afresh: the conversation so far is kept in its own session.".to_owned()
        }
        Err(e) => format!("Cannot reset: {e}"),
    }
}
