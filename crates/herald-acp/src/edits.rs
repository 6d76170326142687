//! File edits in an IDE (acp.md §4, §5): the diff an edit proposes, and the session's
//! edit gate: the rule of its mode (the host puts every other edit to the IDE through
//! its pending table, as it does commands), the question asked of the IDE, and the
//! file as it was before each edit call. A denied edit never reaches the tool.

use crate::modes::EditPolicy;
use crate::permission::Answer;
use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    Diff, PermissionOption, PermissionOptionKind, RequestPermissionRequest, ToolCallContent,
    ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
pub use herald_session::is_edit;
use herald_session::{EditRule, Observer};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

static NEXT: AtomicU64 = AtomicU64::new(1);

fn arg<'a>(args: &'a Value, key: &str) -> &'a str {
    args.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// The path an edit names, resolved against the session's folder as the tools do.
pub fn target(args: &Value, cwd: &Path) -> PathBuf {
    cwd.join(arg(args, "path"))
}

/// The edit a call proposes, from the file as it was before the call (`None`: no
/// file) to the file as it would be. A patch whose text is not found shows its two
/// fragments.
pub fn proposed(tool: &str, args: &Value, before: Option<String>) -> Diff {
    let shown = arg(args, "path");
    match tool {
        "patch" => {
            let (old, new) = (arg(args, "old_string"), arg(args, "new_string"));
            match before {
                Some(text) if !old.is_empty() && text.contains(old) => {
                    let after = match args.get("replace_all").and_then(Value::as_bool) {
                        Some(true) => text.replace(old, new),
                        _ => text.replacen(old, new, 1),
                    };
                    Diff::new(shown, after).old_text(Some(text))
                }
                _ => Diff::new(shown, new).old_text(Some(old.to_owned())),
            }
        }
        _ => Diff::new(shown, arg(args, "content")).old_text(before),
    }
}

/// The diff of a finished edit: the snapshot taken before it and the file now.
pub fn made(shown: &str, before: Option<String>, path: &Path) -> Option<Diff> {
    let after = std::fs::read_to_string(path).ok()?;
    Some(Diff::new(shown, after).old_text(before))
}

/// The gate of one ACP session: its edit approval policy, and an observer whose
/// `pre_tool_call` keeps each edit's file as it was before (for the diffs).
pub struct EditGate {
    session_id: Mutex<String>,
    cwd: Mutex<PathBuf>,
    policy: Mutex<EditPolicy>,
    /// Each edit call's file before it ran, by the provider's call id.
    snapshots: Mutex<HashMap<String, Option<String>>>,
    cx: ConnectionTo<Client>,
    /// How long an edit waits for the IDE's answer (`approvals.timeout`).
    within: Duration,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl EditGate {
    pub fn new(cx: ConnectionTo<Client>, within: Duration) -> Arc<EditGate> {
        Arc::new(EditGate {
            session_id: Mutex::new(String::new()),
            cwd: Mutex::new(PathBuf::new()),
            policy: Mutex::new(EditPolicy::default()),
            snapshots: Mutex::new(HashMap::new()),
            cx,
            within,
        })
    }

    pub fn policy(&self) -> EditPolicy {
        *lock(&self.policy)
    }

    pub fn set_policy(&self, policy: EditPolicy) {
        *lock(&self.policy) = policy;
    }

    /// The session's folder, where relative paths resolve and the workspace ends.
    pub fn cwd(&self) -> PathBuf {
        lock(&self.cwd).clone()
    }

    /// Ties the gate to its ACP session, once the session is open.
    pub fn attach(&self, session_id: &str, cwd: &Path) {
        let mut id = lock(&self.session_id);
        if id.is_empty() {
            *id = session_id.to_owned();
        }
        *lock(&self.cwd) = cwd.to_path_buf();
    }

    /// Whether the policy lets this edit through without asking.
    pub fn approves(&self, args: &Value) -> bool {
        let cwd = self.cwd();
        self.policy().approves(&target(args, &cwd), &cwd)
    }

    /// The file an edit call works on as it was before the call: read by whoever
    /// asks first, the IDE's renderer or the gate (which runs before the tool).
    pub fn snapshot(&self, call_id: &str, args: &Value) -> Option<String> {
        let mut all = lock(&self.snapshots);
        if let Some(before) = all.get(call_id) {
            return before.clone();
        }
        let before = std::fs::read_to_string(target(args, &self.cwd())).ok();
        all.insert(call_id.to_owned(), before.clone());
        before
    }

    /// Forgets a call's snapshot (at its completion).
    pub fn forget(&self, call_id: &str) -> Option<Option<String>> {
        lock(&self.snapshots).remove(call_id)
    }

    /// Forgets every snapshot (at the end of a turn).
    pub fn forget_all(&self) {
        lock(&self.snapshots).clear();
    }

    /// Asks the IDE about one edit call; only `allow_once` allows it. `None` for
    /// silence, which the host's timeout has already answered.
    pub async fn ask(&self, call_id: &str, tool: &str, args: &Value) -> Option<bool> {
        let before = self.snapshot(call_id, args);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let diff = proposed(tool, args, before);
        let fields = ToolCallUpdateFields::new()
            .title(format!("Approve edit: {}", arg(args, "path")))
            .kind(ToolKind::Edit)
            .status(ToolCallStatus::Pending)
            .content(vec![ToolCallContent::Diff(diff)])
            .raw_input(Some(json!({"tool": tool, "arguments": args})));
        let call = ToolCallUpdate::new(format!("edit-approval-{n}"), fields);
        let options = vec![
            PermissionOption::new("allow_once", "Allow edit", PermissionOptionKind::AllowOnce),
            PermissionOption::new("deny", "Deny", PermissionOptionKind::RejectOnce),
        ];
        let request = RequestPermissionRequest::new(lock(&self.session_id).clone(), call, options);
        match crate::permission::selected(&self.cx, request, self.within).await {
            Answer::Selected(option) => Some(option == "allow_once"),
            Answer::Refused => Some(false),
            Answer::Silent => None,
        }
    }
}

impl EditRule for EditGate {
    fn approves(&self, _tool: &str, args: &Value) -> bool {
        self.approves(args)
    }
}

#[async_trait::async_trait]
impl Observer for EditGate {
    fn name(&self) -> &str {
        "acp-edit-snapshot"
    }

    /// It snapshots edited files only.
    fn sees_api_requests(&self) -> bool {
        false
    }

    async fn pre_tool_call(&self, payload: &Value) -> Option<herald_session::ToolDirective> {
        let tool = payload.get("tool_name").and_then(Value::as_str)?;
        if is_edit(tool) {
            let args = payload.get("args").cloned().unwrap_or(Value::Null);
            let call_id = payload.get("tool_call_id").and_then(Value::as_str);
            self.snapshot(call_id.unwrap_or_default(), &args);
        }
        None
    }
}
