//! The plugins Python packages install (entry point group `hermes_agent.plugins`, as
//! Hermes reads them), as the plugin host's interpreter finds them, with their
//! distribution's version and summary.

use serde::Deserialize;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
const MAX_OUTPUT: u64 = 4 * 1024 * 1024;

/// The entry points `python` finds, or why they could not be listed.
pub fn installed(python: &str) -> Result<Vec<EntryPoint>, String> {
    let mut child = Command::new(python)
        .args(["-c", LISTER, GROUP])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run {python}: {e}"))?;
    let Some(stdout) = child.stdout.take() else {
        return Err(format!("{python} gave no output"));
    };
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.take(MAX_OUTPUT).read_to_string(&mut text);
        text
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < WITHIN => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{python} did not list the installed plugins within {}s",
                    WITHIN.as_secs()
                ));
            }
        }
    };
    let text = reader.join().unwrap_or_default();
    if !status.success() {
        return Err(format!(
            "{python} could not list the installed plugins ({status})"
        ));
    }
    serde_json::from_str(&text)
        .map_err(|e| format!("{python} listed the installed plugins unreadably: {e}"))
}
