//! Session modes and config options (acp.md §2): the edit approval policy as the modes
//! `default` / `accept_edits` / `dont_ask` and as the option `edit_approval_policy`
//! (`ask` / `workspace_session` / `session`), and the model as the option `model`.

use agent_client_protocol::v1::schema::{
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelectOption, SessionMode,
    SessionModeState,
};
use std::path::Path;

/// The option id of the edit approval policy.
pub const EDIT_POLICY_OPTION: &str = "edit_approval_policy";
/// The option id of the session's model.
pub const MODEL_OPTION: &str = "model";

/// When an edit (`write_file`, `patch`) is made without asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EditPolicy {
    /// Every edit asks (mode `default`).
    #[default]
    Ask,
    /// Edits inside the session's folder are approved (mode `accept_edits`).
    WorkspaceSession,
    /// Every edit is approved for the session (mode `dont_ask`).
    Session,
}

const POLICIES: [EditPolicy; 3] = [
    EditPolicy::Ask,
    EditPolicy::WorkspaceSession,
    EditPolicy::Session,
];

impl EditPolicy {
    /// The policy of a mode id; an unknown id is `default`.
    pub fn from_mode(id: &str) -> EditPolicy {
        POLICIES
            .into_iter()
            .find(|p| p.mode_id() == id)
            .unwrap_or_default()
    }

    /// The policy of an `edit_approval_policy` value, if it is one.
    pub fn from_value(value: &str) -> Option<EditPolicy> {
        POLICIES.into_iter().find(|p| p.value() == value)
    }

    pub fn mode_id(self) -> &'static str {
        match self {
            EditPolicy::Ask => "default",
            EditPolicy::WorkspaceSession => "accept_edits",
            EditPolicy::Session => "dont_ask",
        }
    }

    pub fn value(self) -> &'static str {
        match self {
            EditPolicy::Ask => "ask",
            EditPolicy::WorkspaceSession => "workspace_session",
            EditPolicy::Session => "session",
        }
    }

    fn describe(self) -> (&'static str, &'static str) {
        match self {
            EditPolicy::Ask => ("Default", "Ask before every file edit"),
            EditPolicy::WorkspaceSession => (
                "Accept edits",
                "Edit files inside the workspace without asking",
            ),
            EditPolicy::Session => ("Don't ask", "Edit any file without asking"),
        }
    }

    /// Whether an edit of `path` (absolute) goes ahead without asking.
    pub fn approves(self, path: &Path, workspace: &Path) -> bool {
        match self {
            EditPolicy::Ask => false,
            EditPolicy::Session => true,
            EditPolicy::WorkspaceSession => inside(path, workspace),
        }
    }
}

/// Whether `path` lies inside `root`, after resolving what exists of both (so `..`
/// and links cannot step out).
fn inside(path: &Path, root: &Path) -> bool {
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let mut probe = path.to_path_buf();
    let mut rest = Vec::new();
    while !probe.exists() {
        match (probe.file_name().map(|n| n.to_owned()), probe.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                probe = parent.to_path_buf();
            }
            _ => return false,
        }
    }
    let Ok(mut real) = probe.canonicalize() else {
        return false;
    };
    for name in rest.into_iter().rev() {
        if name == ".." {
            return false;
        }
        real.push(name);
    }
    real.starts_with(&root)
}

/// The modes offered, with the current one.
pub fn mode_state(current: EditPolicy) -> SessionModeState {
    let modes = POLICIES
        .into_iter()
        .map(|p| {
            let (name, what) = p.describe();
            SessionMode::new(p.mode_id(), name).description(what.to_owned())
        })
        .collect();
    SessionModeState::new(current.mode_id(), modes)
}

/// The config options of a session: the edit approval policy and the model.
pub fn config_options(
    policy: EditPolicy,
    model: &str,
    models: &[String],
) -> Vec<SessionConfigOption> {
    let policies: Vec<SessionConfigSelectOption> = POLICIES
        .into_iter()
        .map(|p| SessionConfigSelectOption::new(p.value(), p.describe().0))
        .collect();
    let mut listed: Vec<String> = models.to_vec();
    if !listed.iter().any(|m| m == model) {
        listed.insert(0, model.to_owned());
    }
    let models: Vec<SessionConfigSelectOption> = listed
        .iter()
        .map(|m| SessionConfigSelectOption::new(m.clone(), m.clone()))
        .collect();
    vec![
        SessionConfigOption::select(
            EDIT_POLICY_OPTION,
            "Edit approval",
            policy.value(),
            policies,
        )
        .category(Some(SessionConfigOptionCategory::Mode)),
        SessionConfigOption::select(MODEL_OPTION, "Model", model.to_owned(), models)
            .category(Some(SessionConfigOptionCategory::Model)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_and_values_map_onto_one_policy_and_unknown_modes_are_default() {
        for p in POLICIES {
            assert_eq!(EditPolicy::from_mode(p.mode_id()), p);
            assert_eq!(EditPolicy::from_value(p.value()), Some(p));
        }
        assert_eq!(EditPolicy::from_mode("yolo"), EditPolicy::Ask);
        assert_eq!(EditPolicy::from_value("yolo"), None);
    }

    #[test]
    fn the_workspace_policy_approves_only_paths_inside_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("src")).unwrap();
        let p = EditPolicy::WorkspaceSession;
        assert!(p.approves(&ws.join("src/new.rs"), &ws));
        assert!(p.approves(&ws.join("a/b/c.txt"), &ws));
        assert!(!p.approves(&ws.join("../outside.txt"), &ws));
        assert!(!p.approves(&dir.path().join("outside.txt"), &ws));
        assert!(!EditPolicy::Ask.approves(&ws.join("x"), &ws));
        assert!(EditPolicy::Session.approves(&dir.path().join("x"), &ws));
    }
}
