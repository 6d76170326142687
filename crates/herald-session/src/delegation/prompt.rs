//! The words of delegation: the tool's description (with the profile's limits) and the
//! note each child gets beside its system prompt.

use herald_config::DelegationSettings;
use std::path::Path;

/// `delegate_task`'s description, naming this profile's limits.
pub fn description(d: &DelegationSettings) -> String {
    let nesting = match (d.orchestrator_enabled, d.max_spawn_depth >= 2) {
        (true, true) => format!(
            "A child given role 'orchestrator' may delegate in turn, up to max_spawn_depth={} levels.",
            d.max_spawn_depth
        ),
        (false, _) => "role 'orchestrator' is switched off here (delegation.orchestrator_enabled: false): every child is a leaf.".to_owned(),
        (true, false) => "Nesting is off (delegation.max_spawn_depth: 1): every child is a leaf.".to_owned(),
    };
    format!(
        "Hand work to subagents: each runs in its own fresh context with your tools (less delegate_task, clarify, memory, send_message, execute_code and cronjob) and returns a summary.\n\n\
         Give either 'goal' (one task) or 'tasks' (up to {max} run in parallel). {nesting}\n\n\
         The call returns when every child has finished; results come back as an array, one entry per task, with status, summary, api_calls, duration and tokens.\n\n\
         A subagent knows nothing of this conversation: put every path, error and constraint it needs in 'goal' and 'context' (and the user's language, if not English). Its summary is its own report: check what matters before relying on it. Its model is set by the configuration, not per call.\n\n\
         Use it for independent pieces of work that would flood your own context (research, a broad search, a parallel fix). Do not use it for a single tool call, or to ask the user something.",
        max = d.max_concurrent_children,
    )
}

/// What `role` says, with the limits.
pub fn role_description(d: &DelegationSettings) -> String {
    format!(
        "'leaf' (the default) works and cannot delegate. 'orchestrator' keeps delegate_task to start its own workers (only when delegation.orchestrator_enabled and the depth stays under max_spawn_depth={}).",
        d.max_spawn_depth
    )
}

/// What `tasks` says, with the limit.
pub fn tasks_description(d: &DelegationSettings) -> String {
    format!(
        "Several tasks run in parallel, at most {} (delegation.max_concurrent_children); each gets its own subagent and terminal. With 'tasks', the top-level goal, context and role are ignored.",
        d.max_concurrent_children
    )
}

/// One child's task.
pub struct ChildBrief<'a> {
    pub goal: &'a str,
    pub context: Option<&'a str>,
    pub cwd: &'a Path,
    /// It may delegate: its depth and the tree's cap.
    pub orchestrator: Option<(u32, u32)>,
}

/// The note added to a child's system prompt: its task, its context, where it works,
/// and what its final answer must be.
pub fn child_note(b: &ChildBrief<'_>) -> String {
    let mut parts = vec![
        "You are a subagent: another agent handed you one task. Work on it alone, with the tools you have.".to_owned(),
        format!("YOUR TASK:\n{}", b.goal),
    ];
    if let Some(context) = b.context.map(str::trim).filter(|c| !c.is_empty()) {
        parts.push(format!("CONTEXT:\n{context}"));
    }
    parts.push(format!(
        "WORKING FOLDER:\n{}\nUse this folder for file and repository work unless the task names another path; never guess a path such as /workspace.",
        b.cwd.display()
    ));
    parts.push(
        "When you are done, answer with a short summary for the agent that delegated: what you did, what you found, which files you created or changed, and what went wrong. Lead with the outcome and keep it brief: your answer goes into that agent's context.".to_owned(),
    );
    if let Some((depth, max)) = b.orchestrator {
        let next = match depth + 1 >= max {
            true => "Your own children are leaves: they cannot delegate.",
            false => "Your own children may be orchestrators or leaves.",
        };
        parts.push(format!(
            "You may delegate with delegate_task: split work into independent pieces, give each piece everything it needs, and put the results together yourself. You are at depth {depth} of at most {max}. {next}"
        ));
    }
    parts.join("\n\n")
}
