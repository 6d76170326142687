//! `delegation:`, typed, with Hermes 0.19's defaults: how `delegate_task` starts child
//! agents (how many at once, how deep, their budget and model, their approvals).

use crate::node::Node;
use crate::reader::Reader;
use std::time::Duration;

/// The shortest `child_timeout_seconds` Hermes accepts (a smaller positive value is
/// raised to it).
pub const MIN_CHILD_TIMEOUT: Duration = Duration::from_secs(30);

/// `delegation.*`.
#[derive(Debug, Clone, PartialEq)]
pub struct DelegationSettings {
    /// `model`: the children's model (`None`: the parent's).
    pub model: Option<String>,
    /// `provider`: the children's provider (`None`: the parent's).
    pub provider: Option<String>,
    /// `inherit_mcp_toolsets`: a child given explicit toolsets keeps the parent's MCP
    /// toolsets too (true).
    pub inherit_mcp_toolsets: bool,
    /// `max_iterations`: each child's own step budget (50).
    pub max_iterations: u32,
    /// `max_summary_chars`: the longest answer a child returns (24,000; 0: no cap).
    pub max_summary_chars: usize,
    /// `child_timeout_seconds`: a child's wall-clock cap (`None`: 0, no cap; at
    /// least 30 s).
    pub child_timeout: Option<Duration>,
    /// `max_concurrent_children`: children of one call running at once (3, at least 1).
    pub max_concurrent_children: usize,
    /// `max_spawn_depth`: how deep delegation goes (1: children cannot delegate).
    pub max_spawn_depth: u32,
    /// `orchestrator_enabled`: whether `role: orchestrator` is honoured (true).
    pub orchestrator_enabled: bool,
    /// `subagent_auto_approve`: a child's dangerous command is approved once without
    /// asking (false: it goes to the parent's approver).
    pub subagent_auto_approve: bool,
    /// `max_total_children`: subagents one root run may start in all, at every depth
    /// (9). herald's own key: Hermes budgets each call, not the run.
    pub max_total_children: u32,
    /// `max_total_iterations`: provider calls of a root run and all its subagents
    /// together (`None`: `agent.max_turns`). herald's own key.
    pub max_total_iterations: Option<u32>,
}

impl Default for DelegationSettings {
    fn default() -> Self {
        DelegationSettings {
            model: None,
            provider: None,
            inherit_mcp_toolsets: true,
            max_iterations: 50,
            max_summary_chars: 24_000,
            child_timeout: None,
            max_concurrent_children: 3,
            max_spawn_depth: 1,
            orchestrator_enabled: true,
            subagent_auto_approve: false,
            max_total_children: 9,
            max_total_iterations: None,
        }
    }
}

const KEYS: &[&str] = &[
    "model",
    "provider",
    "base_url",
    "api_key",
    "api_mode",
    "inherit_mcp_toolsets",
    "max_iterations",
    "max_summary_chars",
    "child_timeout_seconds",
    "reasoning_effort",
    "max_concurrent_children",
    "max_spawn_depth",
    "orchestrator_enabled",
    "subagent_auto_approve",
    "max_async_children",
    "max_total_children",
    "max_total_iterations",
];

/// Reads `delegation:` from the top-level document; problems go to `r`.
pub fn read_delegation_settings(r: &mut Reader, doc: &Node) -> DelegationSettings {
    let mut out = DelegationSettings::default();
    let Some(block) = doc.get("delegation").filter(|n| !n.is_null()) else {
        return out;
    };
    r.check_keys(block, "delegation", KEYS);
    let at = |key: &str| block.get(key).filter(|n| !n.is_null());
    let key = |k: &str| format!("delegation.{k}");
    let text = |r: &mut Reader, k: &str| {
        at(k)
            .and_then(|n| r.string(n, &key(k)).flatten())
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    };
    out.model = text(r, "model");
    out.provider = text(r, "provider");
    for unsupported in ["base_url", "api_key", "api_mode", "reasoning_effort"] {
        if let Some(n) = at(unsupported)
            && text(r, unsupported).is_some()
        {
            r.warn(
                Some(n),
                &key(unsupported),
                "herald does not read this yet: children use delegation.model and delegation.provider (or the parent's model)",
            );
        }
    }
    let flag = |r: &mut Reader, k: &str, default: bool| {
        at(k).and_then(|n| r.bool(n, &key(k))).unwrap_or(default)
    };
    out.inherit_mcp_toolsets = flag(r, "inherit_mcp_toolsets", true);
    out.orchestrator_enabled = flag(r, "orchestrator_enabled", true);
    out.subagent_auto_approve = flag(r, "subagent_auto_approve", false);
    let int = |r: &mut Reader, k: &str, min: i128, max: i128| {
        at(k).and_then(|n| r.int(n, &key(k), min, max))
    };
    if let Some(v) = int(r, "max_iterations", 1, 10_000) {
        out.max_iterations = u32::try_from(v).unwrap_or(50);
    }
    if let Some(v) = int(r, "max_summary_chars", 0, 10_000_000) {
        out.max_summary_chars = usize::try_from(v).unwrap_or(24_000);
    }
    // 0 or less: no cap, as Hermes reads it.
    if let Some(v) = int(r, "child_timeout_seconds", i128::MIN, 86_400 * 7) {
        let secs = u64::try_from(v.max(0)).unwrap_or(0);
        out.child_timeout = (secs > 0).then(|| Duration::from_secs(secs).max(MIN_CHILD_TIMEOUT));
    }
    // Hermes floors both at 1 and sets no ceiling; herald caps them where a typo
    // would start a swarm.
    if let Some(v) = int(r, "max_concurrent_children", i128::MIN, i128::MAX) {
        out.max_concurrent_children = usize::try_from(v.clamp(1, 64)).unwrap_or(3);
    }
    if let Some(v) = int(r, "max_async_children", i128::MIN, i128::MAX)
        && let Ok(old) = usize::try_from(v.clamp(1, 64))
    {
        out.max_concurrent_children = out.max_concurrent_children.max(old);
    }
    if let Some(v) = int(r, "max_total_children", 0, 10_000) {
        out.max_total_children = u32::try_from(v).unwrap_or(9);
    }
    if let Some(v) = int(r, "max_total_iterations", 1, i128::from(u32::MAX)) {
        out.max_total_iterations = u32::try_from(v).ok();
    }
    if let Some(v) = int(r, "max_spawn_depth", i128::MIN, i128::MAX) {
        out.max_spawn_depth = u32::try_from(v.clamp(1, 8)).unwrap_or(1);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(yaml: &str) -> (DelegationSettings, Vec<String>) {
        let doc = crate::node::Node::parse_yaml(yaml).expect("yaml");
        let mut r = Reader::new(std::path::Path::new("config.yaml"));
        let s = read_delegation_settings(&mut r, &doc);
        let problems = r
            .errors
            .iter()
            .chain(r.warnings.iter())
            .map(|p| p.to_string())
            .collect();
        (s, problems)
    }

    #[test]
    fn hermes_defaults_apply_without_a_block() {
        let (s, problems) = read("model: x\n");
        assert_eq!(s, DelegationSettings::default());
        assert!(problems.is_empty());
        assert_eq!(s.max_iterations, 50);
        assert_eq!(s.max_spawn_depth, 1);
        assert!(!s.subagent_auto_approve);
    }

    #[test]
    fn values_are_read_and_floored_as_hermes_floors_them() {
        let (s, _) = read(
            "delegation:\n  model: cheap\n  provider: openrouter\n  max_iterations: 7\n  child_timeout_seconds: 5\n  max_concurrent_children: 0\n  max_spawn_depth: 2\n  subagent_auto_approve: true\n  inherit_mcp_toolsets: false\n",
        );
        assert_eq!(s.model.as_deref(), Some("cheap"));
        assert_eq!(s.provider.as_deref(), Some("openrouter"));
        assert_eq!(s.max_iterations, 7);
        assert_eq!(s.child_timeout, Some(MIN_CHILD_TIMEOUT));
        assert_eq!(s.max_concurrent_children, 1);
        assert_eq!(s.max_spawn_depth, 2);
        assert!(s.subagent_auto_approve);
        assert!(!s.inherit_mcp_toolsets);
        let (s, _) = read("delegation:\n  child_timeout_seconds: 0\n  model: ''\n");
        assert_eq!(s.child_timeout, None);
        assert_eq!(s.model, None);
    }

    #[test]
    fn the_tree_budgets_are_read_and_bounded() {
        let (s, problems) = read("model: x\n");
        assert_eq!((s.max_total_children, s.max_total_iterations), (9, None));
        assert!(problems.is_empty());
        let (s, problems) =
            read("delegation:\n  max_total_children: 0\n  max_total_iterations: 40\n");
        assert_eq!(
            (s.max_total_children, s.max_total_iterations),
            (0, Some(40))
        );
        assert!(problems.is_empty(), "{problems:?}");
        let (_, problems) = read("delegation:\n  max_total_iterations: 0\n");
        assert!(
            problems
                .iter()
                .any(|p| p.contains("delegation.max_total_iterations")),
            "{problems:?}"
        );
    }

    #[test]
    fn a_wrong_type_is_an_error_and_a_typo_a_warning() {
        let (_, problems) = read("delegation:\n  max_iterations: many\n  max_iteratons: 3\n");
        assert!(
            problems
                .iter()
                .any(|p| p.contains("delegation.max_iterations"))
        );
        assert!(problems.iter().any(|p| p.contains("max_iteratons")));
    }
}
