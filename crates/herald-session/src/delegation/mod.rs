//! Subagents: `delegate_task` hands a goal to child agents, each a run on this host
//! with its own conversation, a toolset narrowed from its parent's, its own step budget
//! (`delegation.max_iterations`) and optionally its own model. The children's answers
//! come back as the tool's result. While they run they are listed here (Hermes's
//! `delegation.status`), one can be interrupted or steered by id, and new ones can be
//! paused. A child's dangerous command goes to its parent's approver (the front door
//! the parent's session has), unless `delegation.subagent_auto_approve` is set.

mod child;
mod prompt;
mod tool;

use crate::host::Host;
use crate::runs::{RunError, RunHandle};
use crate::runtime::Runtime;
use herald_agent::{Approvals, Tool};
use herald_llm::Endpoint;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

pub(crate) use tool::DelegateTool;

/// The tool's name.
pub const TOOL_NAME: &str = "delegate_task";

/// Tools a child never gets, as Hermes blocks them (an orchestrator keeps
/// `delegate_task`, bound to its own session).
pub const BLOCKED_TOOLS: &[&str] = &[
    "delegate_task",
    "clarify",
    "memory",
    "send_message",
    "execute_code",
    "cronjob",
];

/// A subagent running now, as `delegation.status` lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct SubagentInfo {
    /// `sa-<task index>-<8 hex>`.
    pub subagent_id: String,
    /// The subagent that delegated (`None`: a session's own agent).
    pub parent_id: Option<String>,
    /// The session whose turn started the tree.
    pub session_id: String,
    pub child_session_id: String,
    /// 0 for a child of a session's agent, 1 for a grandchild (as Hermes counts).
    pub depth: u32,
    pub goal: String,
    pub model: String,
    /// Unix seconds.
    pub started_at: f64,
    pub tool_count: usize,
    pub last_tool: Option<String>,
}

/// `delegation.status`.
#[derive(Debug, Clone, PartialEq)]
pub struct DelegationStatus {
    pub active: Vec<SubagentInfo>,
    pub paused: bool,
    pub max_spawn_depth: u32,
    pub max_concurrent_children: usize,
}

/// Why a subagent could not be steered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubagentError {
    #[error("no running subagent {0}")]
    NotFound(String),
    #[error(transparent)]
    Run(#[from] RunError),
}

/// One running child: what is shown of it, and its run.
pub(crate) struct Active {
    pub info: Mutex<SubagentInfo>,
    pub run: RunHandle,
}

/// The subagents of a host.
#[derive(Default)]
pub(crate) struct Delegations {
    paused: AtomicBool,
    active: Mutex<Vec<Arc<Active>>>,
}

impl Delegations {
    pub fn paused(&self) -> bool {
        self.paused.load(Ordering::SeqCst)
    }

    pub fn add(&self, active: Arc<Active>) {
        crate::conversation::lock(&self.active).push(active);
    }

    pub fn remove(&self, subagent_id: &str) {
        crate::conversation::lock(&self.active)
            .retain(|a| crate::conversation::lock(&a.info).subagent_id != subagent_id);
    }

    fn find(&self, subagent_id: &str) -> Option<Arc<Active>> {
        crate::conversation::lock(&self.active)
            .iter()
            .find(|a| crate::conversation::lock(&a.info).subagent_id == subagent_id)
            .cloned()
    }

    fn list(&self) -> Vec<SubagentInfo> {
        crate::conversation::lock(&self.active)
            .iter()
            .map(|a| crate::conversation::lock(&a.info).clone())
            .collect()
    }
}

/// Where a session stands in a delegation tree.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Standing {
    /// 0: a session's own agent; 1: its child ...
    pub depth: u32,
    /// Its id as a subagent.
    pub subagent_id: Option<String>,
    /// Whether it is offered `delegate_task`.
    pub may_delegate: bool,
    /// The session that delegated to it (kept as its parent in `state.db`).
    pub parent_session: Option<String>,
}

impl Standing {
    /// A session's standing: a child's from its parts; else depth 0, delegating when
    /// its tools name `delegate_task` and `agent.disabled_toolsets` does not.
    pub fn of(child: Option<&ChildParts>, tool_names: &[String], rt: &Runtime) -> Standing {
        if let Some(c) = child {
            return Standing {
                depth: c.depth,
                subagent_id: Some(c.subagent_id.clone()),
                may_delegate: c.orchestrator,
                parent_session: Some(c.parent_session.clone()),
            };
        }
        let (disabled, _) = herald_agent::toolsets::resolve(&rt.settings.disabled_toolsets);
        let named = tool_names.iter().any(|n| n == TOOL_NAME);
        Standing {
            depth: 0,
            subagent_id: None,
            may_delegate: named && !disabled.iter().any(|d| d == TOOL_NAME),
            parent_session: None,
        }
    }
}

/// What a child session takes from its parent.
pub(crate) struct ChildParts {
    /// The parent's approvals (its approver), or auto-approval.
    pub approvals: Arc<Approvals>,
    /// Its tools, exactly (the parent's, narrowed).
    pub tools: Vec<Arc<dyn Tool>>,
    pub endpoint: Endpoint,
    pub depth: u32,
    pub subagent_id: String,
    /// `role: orchestrator` was granted: it may delegate in turn.
    pub orchestrator: bool,
    pub parent_session: String,
    /// The root run's budget, which the whole tree shares.
    pub budget: Arc<herald_agent::TreeBudget>,
}

impl Host {
    /// The subagents running now and the delegation settings (`delegation.status`).
    pub fn delegation_status(&self) -> DelegationStatus {
        let d = &self.runtime().delegation;
        DelegationStatus {
            active: self.delegations.list(),
            paused: self.delegations.paused(),
            max_spawn_depth: d.max_spawn_depth,
            max_concurrent_children: d.max_concurrent_children,
        }
    }

    /// Stops (or lets again) new subagents from starting; running ones go on.
    pub fn pause_delegation(&self, paused: bool) -> bool {
        self.delegations.paused.store(paused, Ordering::SeqCst);
        paused
    }

    /// Interrupts one subagent; whether it was found running.
    pub fn interrupt_subagent(&self, subagent_id: &str) -> bool {
        match self.delegations.find(subagent_id) {
            Some(a) => {
                a.run.interrupt();
                true
            }
            None => false,
        }
    }

    /// Queues text for one subagent's next tool boundary, as `session.steer` does
    /// for a session.
    pub fn steer_subagent(&self, subagent_id: &str, text: &str) -> Result<(), SubagentError> {
        let active = self
            .delegations
            .find(subagent_id)
            .ok_or_else(|| SubagentError::NotFound(subagent_id.to_owned()))?;
        Ok(active.run.steer(text)?)
    }

    /// How many subagents started by `session_id`'s turns are running.
    pub fn active_subagents(&self, session_id: &str) -> usize {
        self.delegations
            .list()
            .iter()
            .filter(|s| s.session_id == session_id)
            .count()
    }
}
