//! The session methods (rpc-gateway.md §2): live sessions over stored ones.

use crate::errors::RpcError;
use crate::gateway::{Gateway, Live};
use crate::outbox::{Out, Outbox};
use crate::params::{self, required};
use crate::results::{
    Activated, Branched, Closed, Compressed, Deleted, History, LiveEntry, MostRecent, Opened,
    Output, Removed, Sessions, Shown, Status, Steer, Summary, Titled, Usage,
};
use crate::{frame, turns};
use herald_protocol::Role;
use herald_session::{Answers, Op, Outcome, Saved, Session, SessionOptions, Steered};
use std::path::PathBuf;
use std::sync::Arc;

/// Where the gateway's sessions say they come from.
pub const SOURCE: &str = "tui";

/// A new session's options, working in `cwd` when one is given.
pub fn options(gw: &Gateway, cwd: Option<String>) -> Result<SessionOptions, RpcError> {
    let mut o = SessionOptions::new(SOURCE, gw.tool_names.clone(), Answers::ByRequest);
    // sudo passwords and skill secrets are asked here, as Hermes's TUI gateway asks.
    o.prompts = true;
    if let Some(cwd) = cwd {
        let path = PathBuf::from(&cwd);
        if !path.is_dir() {
            return Err(RpcError::new(
                RpcError::BAD_VALUE,
                format!("cwd is not a folder: {cwd}"),
            ));
        }
        o.cwd = Some(path);
    }
    Ok(o)
}

/// One message as `session.history` shows it.
fn shown(saved: &Saved) -> Option<Shown> {
    let m = &saved.message;
    let text = m.content.clone().unwrap_or_default();
    match m.role {
        Role::Tool => Some(Shown::Tool {
            role: "tool",
            name: m.name.clone(),
            context: herald_session::preview::one_line(&text, turns::PREVIEW_CHARS),
        }),
        Role::Assistant if text.is_empty() && m.reasoning.is_none() => None,
        role => Some(Shown::Text {
            role: role.as_str(),
            text,
            reasoning: m.reasoning.clone(),
            row_id: (role == Role::User).then_some(saved.row_id),
        }),
    }
}

fn messages(session: &Session) -> Vec<Shown> {
    session.with_history(|h| h.iter().filter_map(shown).collect())
}

/// The payload of a session made live: ids, messages, info; `session.info` follows.
async fn made_live(live: &Arc<Live>) -> Opened {
    let session = live.conversation.session();
    let info = crate::info::info(live).await;
    let event = frame::event("session.info", Some(&live.id), Some(&info));
    live.wire.emit(Out::Frame(event)).await;
    let info = Some(info);
    let messages = messages(&session);
    Opened {
        session_id: live.id.clone(),
        stored_session_id: session.id().to_owned(),
        message_count: messages.len(),
        messages,
        info,
    }
}

pub async fn create(gw: &Gateway, outbox: &Outbox, p: params::Create) -> Result<Opened, RpcError> {
    let options = options(gw, p.cwd)?;
    let live = gw.open_live(options, outbox, p.close_on_disconnect).await?;
    if let Some(model) = p.model
        && let Err(e) = live.conversation.submit(Op::SetModel(model)).await
    {
        gw.close(&live.id);
        return Err(RpcError::new(RpcError::BAD_VALUE, e.to_string()));
    }
    if let Some(title) = p.title {
        let _ = live.conversation.submit(Op::Title(title)).await;
    }
    Ok(made_live(&live).await)
}

fn summary(s: &herald_session::SessionSummary) -> Summary {
    Summary {
        id: s.id.clone(),
        title: s.title.clone(),
        preview: s.preview.clone(),
        started_at: s.started_at,
        message_count: s.message_count,
        source: s.source.clone(),
    }
}

pub async fn list(gw: &Gateway, p: params::List) -> Result<Sessions<Summary>, RpcError> {
    let limit = p.limit.unwrap_or(20).min(1000);
    let sessions = gw
        .host
        .list_sessions(limit)
        .await
        .map_err(|e| RpcError::new(RpcError::LIST_FAILED, e.told()))?;
    Ok(Sessions {
        sessions: sessions.iter().map(summary).collect(),
    })
}

pub async fn most_recent(gw: &Gateway) -> Result<MostRecent, RpcError> {
    let found = gw
        .host
        .list_sessions(1)
        .await
        .map_err(|e| RpcError::new(RpcError::LIST_FAILED, e.told()))?;
    Ok(match found.into_iter().next() {
        Some(s) => MostRecent::Found {
            session_id: s.id,
            title: s.title,
            started_at: s.started_at,
            source: s.source,
        },
        None => MostRecent::Nothing { session_id: () },
    })
}

pub async fn resume(gw: &Gateway, outbox: &Outbox, p: params::Resume) -> Result<Opened, RpcError> {
    let stored = required(p.session_id, "session_id", RpcError::ID_REQUIRED)?;
    let options = options(gw, p.cwd)?;
    let live = gw
        .resume_live(&stored, options, outbox, p.close_on_disconnect)
        .await?;
    Ok(made_live(&live).await)
}

fn live_entry(l: &Live) -> LiveEntry {
    let session = l.conversation.session();
    let running = l.conversation.busy();
    LiveEntry {
        session_id: l.id.clone(),
        session_key: session.id().to_owned(),
        status: if running { "running" } else { "idle" },
        running,
        started_at: l.conversation.started_at,
        message_count: session.with_history(<[_]>::len),
    }
}

/// The caller's own live sessions.
pub fn active_list(gw: &Gateway, outbox: &Outbox) -> Sessions<LiveEntry> {
    let own = gw.sessions_of(outbox.conn);
    Sessions {
        sessions: own.iter().map(|l| live_entry(l)).collect(),
    }
}

pub async fn activate(
    gw: &Gateway,
    outbox: &Outbox,
    p: params::Target,
) -> Result<Activated, RpcError> {
    let live = gw.live(p.session_id.as_deref())?;
    live.wire.bind(outbox.clone());
    Ok(Activated {
        entry: live_entry(&live),
        messages: messages(&live.conversation.session()),
        info: crate::info::info(&live).await,
    })
}

/// Closes the caller's live session; the id is matched exactly, as the owner check
/// matched it.
pub fn close(gw: &Gateway, p: params::Target) -> Closed {
    let closed = p.session_id.is_some_and(|id| gw.close(&id));
    Closed { closed }
}

pub async fn delete(gw: &Gateway, p: params::Stored) -> Result<Deleted, RpcError> {
    let stored = required(p.session_id, "session_id", RpcError::ID_REQUIRED)?;
    if gw.is_live_stored(&stored) {
        return Err(RpcError::new(
            RpcError::SESSION_ACTIVE,
            "cannot delete an active session",
        ));
    }
    match gw.host.delete_session(&stored).await {
        Ok(true) => Ok(Deleted { deleted: stored }),
        Ok(false) => Err(RpcError::new(
            RpcError::STORED_NOT_FOUND,
            format!("session not found: {stored}"),
        )),
        Err(e) => Err(RpcError::session(e, RpcError::FAILED)),
    }
}

pub fn history(gw: &Gateway, p: params::Target) -> Result<History, RpcError> {
    let messages = messages(&gw.live(p.session_id.as_deref())?.conversation.session());
    Ok(History {
        count: messages.len(),
        messages,
    })
}

pub async fn title(gw: &Gateway, p: params::Title) -> Result<Titled, RpcError> {
    let live = gw.live(p.session_id.as_deref())?;
    let stored = live.conversation.session().id().to_owned();
    let Some(new) = p.title else {
        let title = gw
            .host
            .session_title(&stored)
            .await
            .map_err(|e| RpcError::session(e, RpcError::TITLE_FAILED))?;
        return Ok(Titled {
            session_key: stored,
            title: title.unwrap_or_default(),
            pending: false,
        });
    };
    let done = live.conversation.submit(Op::Title(new)).await;
    match done.map_err(|e| RpcError::op(e, RpcError::TITLE_FAILED))? {
        Outcome::Titled(title) => Ok(Titled {
            session_key: stored,
            title,
            pending: false,
        }),
        other => turns::unreachable_outcome(other),
    }
}

pub async fn usage(gw: &Gateway, p: params::Target) -> Result<Usage, RpcError> {
    let live = gw.live(p.session_id.as_deref())?;
    Ok(crate::info::usage(&live).await)
}

pub fn status(gw: &Gateway, p: params::Target) -> Result<Output, RpcError> {
    let live = gw.live(p.session_id.as_deref())?;
    let session = live.conversation.session();
    let model = session.endpoint().map(|e| e.model).unwrap_or_default();
    let output = format!(
        "Session {} (stored {})\nModel: {model}\nMessages: {}\nTools: {}\nState: {}",
        live.id,
        session.id(),
        session.with_history(<[_]>::len),
        session.tool_names().len(),
        if live.conversation.busy() {
            "running a turn"
        } else {
            "idle"
        },
    );
    Ok(Output { output })
}

pub async fn interrupt(gw: &Gateway, p: params::Target) -> Result<Status, RpcError> {
    let live = gw.live(p.session_id.as_deref())?;
    let done = live.conversation.submit(Op::Interrupt).await;
    done.map_err(|e| RpcError::op(e, RpcError::FAILED))?;
    Ok(Status {
        status: "interrupted",
    })
}

pub async fn steer(gw: &Gateway, p: params::Prompt) -> Result<Steer, RpcError> {
    let live = gw.live(p.session_id.as_deref())?;
    let text = required(p.text, "text", RpcError::BAD_VALUE)?;
    let done = live.conversation.submit(Op::Steer(text.clone())).await;
    let status = match done.map_err(|e| RpcError::op(e, RpcError::FAILED))? {
        Outcome::Steered(Steered::Queued) => "queued",
        Outcome::Steered(Steered::Rejected) => "rejected",
        other => return turns::unreachable_outcome(other),
    };
    Ok(Steer { status, text })
}

pub async fn branch(
    gw: &Gateway,
    outbox: &Outbox,
    p: params::Branch,
) -> Result<Branched, RpcError> {
    let live = gw.live(p.session_id.as_deref())?;
    let parent = live.conversation.session();
    if parent.with_history(<[_]>::is_empty) {
        return Err(RpcError::new(
            RpcError::NOTHING_TO_BRANCH,
            "nothing to branch",
        ));
    }
    let options = options(gw, None)?;
    let (branched, title) = gw.branch_live(parent.id(), p.name, options, outbox).await?;
    let _ = made_live(&branched).await;
    Ok(Branched {
        session_id: branched.id.clone(),
        title,
        parent: parent.id().to_owned(),
    })
}

pub async fn undo(gw: &Gateway, p: params::Target) -> Result<Removed, RpcError> {
    let live = gw.live(p.session_id.as_deref())?;
    let done = live.conversation.submit(Op::Undo).await;
    match done.map_err(|e| RpcError::op(e, RpcError::PERSIST_FAILED))? {
        Outcome::Undone(removed) => Ok(Removed { removed }),
        other => turns::unreachable_outcome(other),
    }
}

pub async fn compress(gw: &Gateway, p: params::Compress) -> Result<Compressed, RpcError> {
    let live = gw.live(p.session_id.as_deref())?;
    let done = live.conversation.submit(Op::Compress(p.focus_topic)).await;
    match done.map_err(|e| RpcError::op(e, RpcError::COMPRESS_FAILED))? {
        Outcome::Compressed(done) => Ok(Compressed {
            status: "compressed",
            removed: done.removed,
            kept: done.kept,
            summary: done.summary,
        }),
        other => turns::unreachable_outcome(other),
    }
}
