//! Answers to the interactive requests (rpc-gateway.md §4).

use crate::errors::RpcError;
use crate::gateway::Gateway;
use crate::outbox::Outbox;
use crate::params;
use crate::results::{Resolved, Status};
use herald_session::{Decision, Op, OpError, Outcome, RunError};

/// An unknown or missing choice denies (the safe answer), as Hermes's gateway does.
fn decision(choice: Option<String>) -> Decision {
    choice
        .as_deref()
        .and_then(Decision::parse)
        .unwrap_or(Decision::Deny)
}

/// `approval.respond`: resolves the session's oldest (or every, with `all`) pending
/// approval; `{resolved}` counts them.
pub async fn approval(gw: &Gateway, p: params::Approval) -> Result<Resolved, RpcError> {
    let live = gw.live(p.session_id.as_deref())?;
    let op = Op::Approve {
        request_id: p.request_id,
        decision: decision(p.choice),
        all: p.all,
    };
    match live.conversation.submit(op).await {
        Ok(Outcome::Answered(resolved)) => Ok(Resolved { resolved }),
        Ok(other) => crate::turns::unreachable_outcome(other),
        Err(OpError::NothingRunning | OpError::Run(RunError::NotActive | RunError::NotPending)) => {
            Ok(Resolved { resolved: 0 })
        }
        Err(e) => Err(RpcError::new(RpcError::APPROVAL_FAILED, e.to_string())),
    }
}

/// `clarify.respond`: the caller's live run holding `request_id` gets the answer.
pub async fn clarify(gw: &Gateway, outbox: &Outbox, p: params::Answer) -> Result<Status, RpcError> {
    let request = p.request_id.unwrap_or_default();
    let answer = p.answer.unwrap_or_default();
    for live in gw.sessions_of(outbox.conn) {
        let op = Op::Clarify {
            request_id: request.clone(),
            answer: answer.clone(),
        };
        if live.conversation.submit(op).await.is_ok() {
            return Ok(Status { status: "ok" });
        }
    }
    Err(RpcError::new(RpcError::BUSY, "no pending clarify request"))
}

/// `sudo.respond {request_id, password}` / `secret.respond {request_id, value}`: the
/// caller's live run asking under `request_id` gets the answer (`""` skips it). An id
/// that waits no more has expired; no id at all is 4009, as Hermes answers.
pub async fn prompt(
    gw: &Gateway,
    outbox: &Outbox,
    method: &str,
    p: params::Answer,
) -> Result<Status, RpcError> {
    let sudo = method == "sudo.respond";
    let key = if sudo { "password" } else { "value" };
    let Some(request) = p.request_id else {
        return Err(RpcError::new(
            RpcError::BUSY,
            format!("no pending {key} request"),
        ));
    };
    let answer = if sudo { p.password } else { p.value }.unwrap_or_default();
    for live in gw.sessions_of(outbox.conn) {
        let op = Op::Answer {
            request_id: request.clone(),
            answer: answer.clone(),
        };
        if live.conversation.submit(op).await.is_ok() {
            return Ok(Status { status: "ok" });
        }
    }
    Ok(Status { status: "expired" })
}
