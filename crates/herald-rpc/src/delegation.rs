//! Subagents on the gateway: `delegation.status`, `delegation.pause`,
//! `subagent.interrupt` and `subagent.steer`, answered from the host's delegations.

use crate::errors::RpcError;
use crate::gateway::Gateway;
use crate::params::{self, required};
use crate::results::{Delegation, Paused, SubagentFound, SubagentSteer, SubagentView};
use herald_session::SubagentError;

/// `delegation.status`: the running subagents, the pause and the limits.
pub fn status(gw: &Gateway) -> Delegation {
    let s = gw.host.delegation_status();
    Delegation {
        active: s.active.into_iter().map(SubagentView::from).collect(),
        paused: s.paused,
        max_spawn_depth: s.max_spawn_depth,
        max_concurrent_children: s.max_concurrent_children,
    }
}

/// `delegation.pause {paused?}` (true when left out): new subagents wait, running
/// ones go on. Anything but a boolean is `4002`.
pub fn pause(gw: &Gateway, p: params::Pause) -> Result<Paused, RpcError> {
    let paused = match p.paused {
        None => true,
        Some(serde_json::Value::Bool(b)) => b,
        Some(_) => {
            return Err(RpcError::new(
                RpcError::BAD_VALUE,
                "paused must be true or false",
            ));
        }
    };
    Ok(Paused {
        paused: gw.host.pause_delegation(paused),
    })
}

/// The longest steer text a subagent takes (a steer rides on its next tool result).
const MAX_STEER_CHARS: usize = 16_384;

/// `subagent.interrupt {subagent_id}`.
pub fn interrupt(gw: &Gateway, p: params::Subagent) -> Result<SubagentFound, RpcError> {
    let subagent_id = required(p.subagent_id, "subagent_id", RpcError::MISSING)?;
    Ok(SubagentFound {
        found: gw.host.interrupt_subagent(&subagent_id),
        subagent_id,
    })
}

/// `subagent.steer {subagent_id, text}`, by `session.steer`'s rules: `queued` when the
/// text waits for the subagent's next tool boundary, `rejected` when it is not running
/// (or not found, then `found: false`); empty text is an error.
pub fn steer(gw: &Gateway, p: params::Subagent) -> Result<SubagentSteer, RpcError> {
    let subagent_id = required(p.subagent_id, "subagent_id", RpcError::MISSING)?;
    let text = required(p.text, "text", RpcError::BAD_VALUE)?;
    if text.chars().count() > MAX_STEER_CHARS {
        return Err(RpcError::new(
            RpcError::BAD_VALUE,
            format!("text is over {MAX_STEER_CHARS} characters"),
        ));
    }
    let (status, found) = match gw.host.steer_subagent(&subagent_id, &text) {
        Ok(()) => ("queued", true),
        Err(SubagentError::NotFound(_)) => ("rejected", false),
        Err(SubagentError::Run(herald_session::RunError::NotAcceptingSteer(_))) => {
            ("rejected", true)
        }
        Err(SubagentError::Run(e)) => return Err(RpcError::run(e)),
    };
    Ok(SubagentSteer {
        status,
        text,
        subagent_id,
        found,
    })
}
