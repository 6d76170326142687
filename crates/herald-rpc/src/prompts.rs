//! `prompt.submit` (with history rewind, §3.2) and `prompt.background` (§3.3).

use crate::errors::RpcError;
use crate::events::BackgroundComplete;
use crate::frame;
use crate::gateway::Gateway;
use crate::outbox::Out;
use crate::params::{self, required};
use crate::results::{Submitted, Task};
use crate::{sessions, turns};
use herald_session::{Op, Outcome, RewindRequest, RunState};
use serde_json::Value;
use std::sync::Arc;

/// The rewind a submit asks for, if any; a malformed row id is 4004.
fn rewind_of(p: &params::Prompt) -> Result<Option<RewindRequest>, RpcError> {
    let asked = [
        &p.truncate_before_row_id,
        &p.truncate_before_message_id,
        &p.truncate_before_user_ordinal,
        &p.confirm_truncate,
        &p.confirm_empty_truncate,
    ];
    if asked.iter().all(|v| v.is_none()) {
        return Ok(None);
    }
    let row_id = match &p.truncate_before_row_id {
        None => None,
        Some(v) => Some(v.as_i64().ok_or_else(|| {
            RpcError::new(
                RpcError::MALFORMED,
                "truncate_before_row_id must be an integer",
            )
        })?),
    };
    let yes = |v: &Option<Value>| matches!(v, Some(Value::Bool(true)));
    let confirmed = yes(&p.confirm_truncate);
    let by_message = p.truncate_before_message_id.as_ref().map(message_row_id);
    let row_id = match (row_id, by_message) {
        (Some(a), Some(b)) if a != b && confirmed => {
            return Err(RpcError::new(
                RpcError::DISAGREE,
                "truncate_before_row_id and truncate_before_message_id name different messages",
            ));
        }
        (a, b) => a.or(b),
    };
    Ok(Some(RewindRequest {
        truncate_before_row_id: row_id,
        truncate_before_user_ordinal: p.truncate_before_user_ordinal.clone(),
        confirm_truncate: confirmed,
        confirm_empty_truncate: yes(&p.confirm_empty_truncate),
    }))
}

/// The row id a message id names: herald's messages have no other id, so an integer
/// (or its decimal text) is the row id, and anything else names no message (a row id
/// that never exists, so the store answers 4018 after the confirmation check).
fn message_row_id(v: &Value) -> i64 {
    const NO_ROW: i64 = -1;
    match v {
        Value::Number(n) => n.as_i64().unwrap_or(NO_ROW),
        Value::String(s) => s.trim().parse().unwrap_or(NO_ROW),
        _ => NO_ROW,
    }
}

const STREAMING: Submitted = Submitted {
    status: "streaming",
    position: None,
    survivor_user_row_ids: None,
};

/// `prompt.submit`: a turn now, or while one runs (Pi's `follow_up` too) as
/// `display.busy_input_mode` says: `interrupt` (the default: queued, and the turn
/// interrupted), `queue` (queued behind the turn) or `steer` (into the running turn at
/// its next tool result; queued when it cannot be).
pub async fn submit(gw: &Arc<Gateway>, p: params::Prompt) -> Result<Submitted, RpcError> {
    let live = gw.live(p.session_id.as_deref())?;
    let text = required(p.text.clone(), "text", RpcError::BAD_VALUE)?;
    let mut result = STREAMING;
    let op = match rewind_of(&p)? {
        Some(_) if live.conversation.busy() => {
            return Err(RpcError::new(RpcError::BUSY, "session busy"));
        }
        Some(request) => {
            let rewound = live.conversation.submit(Op::Rewind(request)).await;
            match rewound.map_err(|e| RpcError::op(e, RpcError::PERSIST_FAILED))? {
                Outcome::Rewound(survivors) => result.survivor_user_row_ids = Some(survivors),
                other => return turns::unreachable_outcome(other),
            }
            Op::Prompt(text.into())
        }
        None => Op::Submit(text.into()),
    };
    let done = live.conversation.submit(op).await;
    match done.map_err(|e| RpcError::op(e, RpcError::FAILED))? {
        Outcome::Started(_) => Ok(result),
        Outcome::Queued(position) => Ok(Submitted {
            status: "queued",
            position: Some(position),
            survivor_user_row_ids: None,
        }),
        Outcome::Steered(_) => Ok(Submitted {
            status: "steered",
            position: None,
            survivor_user_row_ids: None,
        }),
        other => turns::unreachable_outcome(other),
    }
}

pub async fn background(gw: &Arc<Gateway>, p: params::Prompt) -> Result<Task, RpcError> {
    let parent = gw.live(p.session_id.as_deref())?;
    let Some(text) = p.text else {
        return Err(RpcError::new(RpcError::TEXT_REQUIRED, "text is required"));
    };
    let mut options = sessions::options(gw, None)?;
    options.source = "tui-background".into();
    options.answers = herald_session::Answers::Nobody;
    let session = gw
        .host
        .open_session(options)
        .await
        .map_err(|e| RpcError::session(e, RpcError::FAILED))?;
    if let Some(endpoint) = parent.conversation.session().endpoint() {
        session.set_endpoint(endpoint);
    }
    let run = gw
        .host
        .start_run(&session, text)
        .map_err(|e| RpcError::session(e, RpcError::FAILED))?;
    let task_id = run.id();
    let id = task_id.clone();
    tokio::spawn(async move {
        drop(run.take_events());
        let end = run.finished().await;
        let text = match (end.state, end.output) {
            (RunState::Completed, Some(t)) => t,
            _ => format!(
                "Error: {}",
                end.error.unwrap_or_else(|| "the task failed".into())
            ),
        };
        let payload = BackgroundComplete { task_id: id, text };
        let event = frame::event("background.complete", Some(&parent.id), Some(payload));
        parent.wire.emit(Out::Frame(event)).await;
    });
    Ok(Task { task_id })
}
