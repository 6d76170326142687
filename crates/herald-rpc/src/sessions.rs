//! The session methods (rpc-gateway.md §2): live sessions over stored ones.

use crate::errors::RpcError;
use crate::gateway::{Gateway, Live};
use crate::outbox::{Out, Outbox};
use crate::params::{Params, count, required, text};
use crate::{frame, turns};
use herald_protocol::Role;
use herald_session::{Answers, Op, Outcome, Saved, Session, SessionOptions, Steered};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;

/// Where the gateway's sessions say they come from.
pub const SOURCE: &str = "tui";

/// A new session's options from `session.create`'s / `session.resume`'s params.
pub fn options(gw: &Gateway, p: &Params) -> Result<SessionOptions, RpcError> {
    let mut o = SessionOptions::new(SOURCE, gw.tool_names.clone(), Answers::ByRequest);
    if let Some(cwd) = text(p, "cwd") {
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
fn shown(saved: &Saved) -> Option<Value> {
    let m = &saved.message;
    let text = m.content.clone().unwrap_or_default();
    match m.role {
        Role::Tool => Some(
            json!({"role": "tool", "name": m.name, "context": turns::preview(&Value::String(text))}),
        ),
        Role::Assistant if text.is_empty() && m.reasoning.is_none() => None,
        role => {
            let mut v = json!({"role": role.as_str(), "text": text});
            if let Some(r) = &m.reasoning {
                v["reasoning"] = json!(r);
            }
            if role == Role::User {
                v["row_id"] = json!(saved.row_id);
            }
            Some(v)
        }
    }
}

fn messages(session: &Session) -> Vec<Value> {
    session.history().iter().filter_map(shown).collect()
}

/// `session.info`'s payload (blocking: it lists the installed skills).
fn info(gw: &Gateway, live: &Live) -> Value {
    info_of(gw.host.runtime(), live)
}

/// [`info`] computed off the async workers.
async fn info_off_workers(gw: &Gateway, live: &Arc<Live>) -> Value {
    let (runtime, live) = (gw.host.runtime().clone(), live.clone());
    crate::blocking(move || Ok(info_of(&runtime, &live)))
        .await
        .unwrap_or(Value::Null)
}

fn info_of(runtime: &herald_session::Runtime, live: &Live) -> Value {
    let session = live.conversation.session();
    let endpoint = session.endpoint();
    let skills: serde_json::Map<String, Value> = runtime
        .skills
        .discover()
        .into_iter()
        .map(|s| (s.name, json!(s.description)))
        .collect();
    json!({
        "model": endpoint.as_ref().map(|e| e.model.clone()),
        "provider": runtime.provider,
        "tools": {"hermes-cli": session.tool_names()},
        "skills": skills,
        "cwd": session.cwd().display().to_string(),
        "branch": "",
        "project": null,
        "lazy": true,
        "desktop_contract": 4,
        "profile_name": "default",
    })
}

/// Sends `session.info` again (after a change such as the model).
pub async fn announce(gw: &Gateway, live: &Arc<Live>) {
    let info = info_off_workers(gw, live).await;
    let event = frame::event("session.info", Some(&live.id), Some(info));
    live.wire.emit(Out::Frame(event)).await;
}

/// The payload of a session made live: ids, messages, info; `session.info` follows.
async fn made_live(gw: &Gateway, live: &Arc<Live>) -> Value {
    let session = live.conversation.session();
    let info = info_off_workers(gw, live).await;
    let event = frame::event("session.info", Some(&live.id), Some(info.clone()));
    live.wire.emit(Out::Frame(event)).await;
    let messages = messages(&session);
    json!({
        "session_id": live.id, "stored_session_id": session.id(),
        "message_count": messages.len(), "messages": messages, "info": info,
    })
}

fn close_on_disconnect(p: &Params) -> bool {
    p.get("close_on_disconnect")
        .and_then(Value::as_bool)
        .unwrap_or(true)
}

pub async fn create(gw: &Gateway, outbox: &Outbox, p: &Params) -> Result<Value, RpcError> {
    let session = gw
        .host
        .open_session(options(gw, p)?)
        .await
        .map_err(|e| RpcError::session(e, RpcError::FAILED))?;
    let live = gw.add_live(session, outbox.clone(), close_on_disconnect(p))?;
    if let Some(model) = text(p, "model")
        && let Err(e) = live.conversation.submit(Op::SetModel(model)).await
    {
        gw.close(&live.id);
        return Err(RpcError::new(RpcError::BAD_VALUE, e.to_string()));
    }
    if let Some(title) = text(p, "title") {
        let _ = live.conversation.submit(Op::Title(title)).await;
    }
    Ok(made_live(gw, &live).await)
}

fn summary(s: &herald_session::SessionSummary) -> Value {
    json!({"id": s.id, "title": s.title, "preview": s.preview, "started_at": s.started_at, "message_count": s.message_count, "source": s.source})
}

pub async fn list(gw: &Gateway, p: &Params) -> Result<Value, RpcError> {
    let limit = count(p, "limit").unwrap_or(20).min(1000);
    let sessions = gw
        .host
        .list_sessions(limit)
        .await
        .map_err(|e| RpcError::new(RpcError::LIST_FAILED, e.to_string()))?;
    Ok(json!({"sessions": sessions.iter().map(summary).collect::<Vec<_>>()}))
}

pub async fn most_recent(gw: &Gateway) -> Result<Value, RpcError> {
    let found = gw
        .host
        .list_sessions(1)
        .await
        .map_err(|e| RpcError::new(RpcError::LIST_FAILED, e.to_string()))?;
    Ok(match found.first() {
        Some(s) => {
            json!({"session_id": s.id, "title": s.title, "started_at": s.started_at, "source": s.source})
        }
        None => json!({"session_id": null}),
    })
}

pub async fn resume(gw: &Gateway, outbox: &Outbox, p: &Params) -> Result<Value, RpcError> {
    let stored = required(p, "session_id", RpcError::ID_REQUIRED)?;
    let session = gw
        .host
        .resume_session(&stored, options(gw, p)?)
        .await
        .map_err(|e| match e {
            herald_session::SessionError::NotFound(_) => RpcError::new(
                RpcError::STORED_NOT_FOUND,
                format!("session not found: {stored}"),
            ),
            other => RpcError::session(other, RpcError::FAILED),
        })?;
    let live = gw.add_live(session, outbox.clone(), close_on_disconnect(p))?;
    Ok(made_live(gw, &live).await)
}

fn live_entry(l: &Live) -> Value {
    let session = l.conversation.session();
    json!({"session_id": l.id, "session_key": session.id(), "status": if l.conversation.busy() { "running" } else { "idle" },
           "running": l.conversation.busy(), "started_at": l.conversation.started_at, "message_count": session.history().len()})
}

/// The caller's own live sessions.
pub fn active_list(gw: &Gateway, outbox: &Outbox) -> Value {
    let own = gw.sessions_of(outbox.conn);
    let sessions: Vec<Value> = own.iter().map(|l| live_entry(l)).collect();
    json!({"sessions": sessions})
}

pub fn activate(gw: &Gateway, outbox: &Outbox, p: &Params) -> Result<Value, RpcError> {
    let live = gw.live(p)?;
    live.wire.bind(outbox.clone());
    let mut entry = live_entry(&live);
    entry["messages"] = json!(messages(&live.conversation.session()));
    entry["info"] = info(gw, &live);
    Ok(entry)
}

pub fn close(gw: &Gateway, p: &Params) -> Value {
    let closed = text(p, "session_id").is_some_and(|id| gw.close(&id));
    json!({"closed": closed})
}

pub async fn delete(gw: &Gateway, p: &Params) -> Result<Value, RpcError> {
    let stored = required(p, "session_id", RpcError::ID_REQUIRED)?;
    if gw.is_live_stored(&stored) {
        return Err(RpcError::new(
            RpcError::SESSION_ACTIVE,
            "cannot delete an active session",
        ));
    }
    match gw.host.delete_session(&stored).await {
        Ok(true) => Ok(json!({"deleted": stored})),
        Ok(false) => Err(RpcError::new(
            RpcError::STORED_NOT_FOUND,
            format!("session not found: {stored}"),
        )),
        Err(e) => Err(RpcError::session(e, RpcError::FAILED)),
    }
}

pub fn history(gw: &Gateway, p: &Params) -> Result<Value, RpcError> {
    let messages = messages(&gw.live(p)?.conversation.session());
    Ok(json!({"count": messages.len(), "messages": messages}))
}

pub async fn title(gw: &Gateway, p: &Params) -> Result<Value, RpcError> {
    let live = gw.live(p)?;
    let stored = live.conversation.session().id().to_owned();
    let Some(new) = p.get("title") else {
        let title = gw
            .host
            .session_title(&stored)
            .await
            .map_err(|e| RpcError::session(e, RpcError::TITLE_FAILED))?;
        return Ok(json!({"title": title.unwrap_or_default(), "pending": false}));
    };
    let new = new.as_str().unwrap_or_default().to_owned();
    let done = live.conversation.submit(Op::Title(new)).await;
    match done.map_err(|e| RpcError::op(e, RpcError::TITLE_FAILED))? {
        Outcome::Titled(title) => Ok(json!({"title": title, "pending": false})),
        other => turns::unreachable_outcome(other),
    }
}

pub async fn usage(gw: &Gateway, p: &Params) -> Result<Value, RpcError> {
    let live = gw.live(p)?;
    let session = live.conversation.session();
    let u = gw
        .host
        .session_usage(session.id())
        .await
        .map_err(|e| RpcError::new(RpcError::TITLE_FAILED, e.to_string()))?
        .unwrap_or_default();
    let model = session.endpoint().map(|e| e.model).or(u.model);
    let total = u.input_tokens + u.output_tokens;
    Ok(
        json!({"model": model, "input": u.input_tokens, "output": u.output_tokens, "prompt": u.input_tokens,
              "completion": u.output_tokens, "total": total, "calls": u.api_calls, "reasoning": 0}),
    )
}

pub fn status(gw: &Gateway, p: &Params) -> Result<Value, RpcError> {
    let live = gw.live(p)?;
    let session = live.conversation.session();
    let model = session.endpoint().map(|e| e.model).unwrap_or_default();
    let output = format!(
        "Session {} (stored {})\nModel: {model}\nMessages: {}\nTools: {}\nState: {}",
        live.id,
        session.id(),
        session.history().len(),
        session.tool_names().len(),
        if live.conversation.busy() {
            "running a turn"
        } else {
            "idle"
        },
    );
    Ok(json!({"output": output}))
}

pub async fn interrupt(gw: &Gateway, p: &Params) -> Result<Value, RpcError> {
    let live = gw.live(p)?;
    let done = live.conversation.submit(Op::Interrupt).await;
    done.map_err(|e| RpcError::op(e, RpcError::FAILED))?;
    Ok(json!({"status": "interrupted"}))
}

pub async fn steer(gw: &Gateway, p: &Params) -> Result<Value, RpcError> {
    let live = gw.live(p)?;
    let text = required(p, "text", RpcError::BAD_VALUE)?;
    let done = live.conversation.submit(Op::Steer(text.clone())).await;
    match done.map_err(|e| RpcError::op(e, RpcError::FAILED))? {
        Outcome::Steered(Steered::Queued) => Ok(json!({"status": "queued", "text": text})),
        Outcome::Steered(Steered::Rejected) => Ok(json!({"status": "rejected", "text": text})),
        other => turns::unreachable_outcome(other),
    }
}

pub async fn branch(gw: &Gateway, outbox: &Outbox, p: &Params) -> Result<Value, RpcError> {
    let live = gw.live(p)?;
    let parent = live.conversation.session();
    if parent.history().is_empty() {
        return Err(RpcError::new(
            RpcError::NOTHING_TO_BRANCH,
            "nothing to branch",
        ));
    }
    let (session, title) = gw
        .host
        .branch_session(parent.id(), text(p, "name"), options(gw, &Params::new())?)
        .await
        .map_err(|e| RpcError::new(RpcError::PERSIST_FAILED, e.to_string()))?;
    let branched = gw.add_live(session, outbox.clone(), true)?;
    let _ = made_live(gw, &branched).await;
    Ok(json!({"session_id": branched.id, "title": title, "parent": parent.id()}))
}

pub async fn undo(gw: &Gateway, p: &Params) -> Result<Value, RpcError> {
    let live = gw.live(p)?;
    let done = live.conversation.submit(Op::Undo).await;
    match done.map_err(|e| RpcError::op(e, RpcError::PERSIST_FAILED))? {
        Outcome::Undone(removed) => Ok(json!({"removed": removed})),
        other => turns::unreachable_outcome(other),
    }
}

pub async fn compress(gw: &Gateway, p: &Params) -> Result<Value, RpcError> {
    let live = gw.live(p)?;
    let focus = text(p, "focus_topic");
    let done = live.conversation.submit(Op::Compress(focus)).await;
    match done.map_err(|e| RpcError::op(e, RpcError::COMPRESS_FAILED))? {
        Outcome::Compressed(done) => Ok(
            json!({"status": "compressed", "removed": done.removed, "kept": done.kept, "summary": done.summary}),
        ),
        other => turns::unreachable_outcome(other),
    }
}
