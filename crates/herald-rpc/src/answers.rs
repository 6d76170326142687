//! Answers to the interactive requests (rpc-gateway.md §4).

use crate::errors::RpcError;
use crate::gateway::Gateway;
use crate::outbox::Outbox;
use crate::params::{Params, flag, text};
use herald_session::{Decision, Op, OpError, Outcome, RunError};
use serde_json::{Value, json};

/// An unknown or missing choice denies (the safe answer), as Hermes's gateway does.
fn decision(choice: Option<String>) -> Decision {
    choice
        .as_deref()
        .and_then(Decision::parse)
        .unwrap_or(Decision::Deny)
}

/// `approval.respond`: resolves the session's oldest (or every, with `all`) pending
/// approval; `{resolved}` counts them.
pub async fn approval(gw: &Gateway, p: &Params) -> Result<Value, RpcError> {
    let live = gw.live(p)?;
    let op = Op::Approve {
        request_id: text(p, "request_id"),
        decision: decision(text(p, "choice")),
        all: flag(p, "all"),
    };
    match live.conversation.submit(op).await {
        Ok(Outcome::Answered(n)) => Ok(json!({"resolved": n})),
        Ok(other) => crate::turns::unreachable_outcome(other),
        Err(OpError::NothingRunning | OpError::Run(RunError::NotActive | RunError::NotPending)) => {
            Ok(json!({"resolved": 0}))
        }
        Err(e) => Err(RpcError::new(RpcError::APPROVAL_FAILED, e.to_string())),
    }
}

/// `clarify.respond`: the caller's live run holding `request_id` gets the answer.
pub async fn clarify(gw: &Gateway, outbox: &Outbox, p: &Params) -> Result<Value, RpcError> {
    let request = text(p, "request_id").unwrap_or_default();
    let answer = p
        .get("answer")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    for live in gw.sessions_of(outbox.conn) {
        let op = Op::Clarify {
            request_id: request.clone(),
            answer: answer.clone(),
        };
        if live.conversation.submit(op).await.is_ok() {
            return Ok(json!({"status": "ok"}));
        }
    }
    Err(RpcError::new(RpcError::BUSY, "no pending clarify request"))
}

/// `sudo.respond` / `secret.respond`: herald's tools never ask for a password or a
/// secret, so no request is pending; one that names its id has expired.
pub fn never_asked(method: &str, p: &Params) -> Result<Value, RpcError> {
    if text(p, "request_id").is_some() {
        return Ok(json!({"status": "expired"}));
    }
    let key = method.trim_end_matches(".respond");
    Err(RpcError::new(
        RpcError::BUSY,
        format!("no pending {key} request"),
    ))
}
