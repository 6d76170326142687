//! The plugins Python packages install (entry point group `hermes_agent.plugins`, as
//! Hermes reads them), as the plugin host's interpreter finds them, with their
//! distribution's version and summary.

use herald_process::RunFailed;
use serde::Deserialize;
use std::time::Duration;

/// An installed package's plugin.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct EntryPoint {
    /// The entry point's name: what `plugins.enabled` names.
    pub name: String,
    /// The module it loads.
    pub module: String,
    pub distribution: Option<String>,
    pub version: Option<String>,
    pub description: Option<String>,
}

/// The entry point group Hermes's plugins are published under.
pub const GROUP: &str = "hermes_agent.plugins";

const LISTER: &str = r#"
import json, sys
from importlib.metadata import entry_points
found = []
for ep in entry_points(group=sys.argv[1]):
    dist = getattr(ep, "dist", None)
    meta = dist.metadata if dist is not None else None
    found.append({"name": ep.name, "module": ep.value,
                  "distribution": meta["Name"] if meta else None,
                  "version": dist.version if dist is not None else None,
                  "description": meta["Summary"] if meta else None})
json.dump(found, sys.stdout)
"#;

/// Longest the interpreter may take to list them.
const WITHIN: Duration = Duration::from_secs(20);
/// Most output read from it.
const MAX_OUTPUT: usize = 4 * 1024 * 1024;

/// The entry points `python` finds, or why they could not be listed.
pub async fn installed(python: &str) -> Result<Vec<EntryPoint>, String> {
    let mut cmd = herald_process::command(python);
    cmd.args(["-c", LISTER, GROUP]);
    let done = herald_process::run_bounded(cmd, WITHIN, MAX_OUTPUT)
        .await
        .map_err(|failed| match failed {
            RunFailed::Spawn(e) => format!("cannot run {python}: {e}"),
            RunFailed::Timeout => format!(
                "{python} did not list the installed plugins within {}s",
                WITHIN.as_secs()
            ),
            RunFailed::Wait(e) => format!("{python} could not be waited for: {e}"),
        })?;
    if !done.status.success() {
        return Err(format!(
            "{python} could not list the installed plugins ({})",
            done.status
        ));
    }
    serde_json::from_slice(&done.stdout)
        .map_err(|e| format!("{python} listed the installed plugins unreadably: {e}"))
}
