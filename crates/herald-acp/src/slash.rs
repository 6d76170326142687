//! Slash commands answered by the server itself (acp.md §3.3), with no model call:
//! the session's one command table as ACP offers it (`/reset` is `/new`, `/compact`
//! `/compress`, as in Hermes's registry), and a skill's command. Any other `/word` goes
//! to the model as text.

use crate::{AcpServer, AcpSession};
use herald_session::{Op, OpError, Opening, Outcome, Reply, SwitchRefused};

/// What a slash command came to.
pub enum Answered {
    /// The reply to show.
    Said(String),
    /// A prompt to run instead (a skill's command, an idle `/steer` or `/queue`).
    Send(String),
}

/// The reply to a slash command, or `None` when `line` is not one of ours.
pub async fn answer(server: &AcpServer, live: &AcpSession, line: &str) -> Option<Answered> {
    line.strip_prefix('/')?;
    let said = match live.conversation.submit(Op::Command(line.to_owned())).await {
        Ok(Outcome::Reply(Reply::Send(text))) => return Some(Answered::Send(text)),
        Ok(Outcome::Reply(Reply::Output(text))) => text,
        Ok(Outcome::Reply(Reply::ModelSwitched(name))) => {
            format!("Model switched to {name} for this session.")
        }
        Ok(Outcome::Reply(Reply::New)) => reset(server, live).await,
        Ok(_) => return None,
        Err(OpError::Switch(SwitchRefused::Busy)) => {
            "A turn is running; switch the model when it ends.".to_owned()
        }
        Err(e) => format!("Could not switch: cannot switch the model: {}", e.told()),
    };
    Some(Answered::Said(said))
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
