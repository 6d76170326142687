//! The agent's built-in tools, implementing `herald_agent::Tool`: on the local machine
//! `terminal` (with the approval pipeline), `process` (background jobs), `read_file`,
//! `write_file`, `patch`, `search_files` and `clarify`; the skills tools `skills_list` and
//! `skill_view`; `memory` (Hermes's two bounded stores); and on the network `web_search` (SearXNG or Tavily, chosen in config),
//! `web_extract` (pages as text, refusing loopback, private, link-local and metadata
//! addresses unless config allows them) and `vision_analyze`. Web results are third-party
//! text, so the turn loop wraps them as untrusted.

pub mod clarify;
pub mod cronjob;
pub mod files;
pub mod memory;
pub mod process;
pub mod schedule;
pub mod skill_manage;
pub mod skills;
pub mod sudo;
pub mod terminal;
pub mod threats;
pub mod todo;
pub mod url_safety;
pub mod vision;
pub mod web;

pub use vision::VisionAnalyze;
pub use web::{SearchBackend, WebExtract, WebSearch};

use herald_agent::ToolRegistry;
use std::sync::Arc;

/// A registry with the built-in local tools (terminal's default time limit 180 s).
pub fn builtin_registry() -> ToolRegistry {
    registry_with_terminal_timeout(terminal::DEFAULT_TIMEOUT)
}

/// The built-in local tools with `terminal.timeout` as the default command limit.
pub fn registry_with_terminal_timeout(default_timeout: std::time::Duration) -> ToolRegistry {
    registry_with_jobs(default_timeout, process::Jobs::default())
}

/// The built-in local tools, their background jobs kept in `jobs`.
pub fn registry_with_jobs(
    default_timeout: std::time::Duration,
    jobs: process::Jobs,
) -> ToolRegistry {
    let mut r = ToolRegistry::new();
    r.register(Arc::new(terminal::Terminal {
        jobs: jobs.clone(),
        default_timeout,
    }));
    r.register(Arc::new(process::Process { jobs }));
    r.register(Arc::new(files::ReadFile));
    r.register(Arc::new(files::WriteFile));
    r.register(Arc::new(files::Patch));
    r.register(Arc::new(files::SearchFiles));
    r.register(Arc::new(clarify::Clarify));
    r
}

/// A JSON error result.
/// A tool's file work run off the async threads: `call`'s answer as JSON text, or
/// `{"success": false, "error": "The <tool> tool stopped."}` when it panicked.
pub(crate) async fn on_blocking_pool(
    tool: &'static str,
    call: impl FnOnce() -> serde_json::Value + Send + 'static,
) -> String {
    tokio::task::spawn_blocking(move || call().to_string())
        .await
        .unwrap_or_else(|_| {
            serde_json::json!({"success": false, "error": format!("The {tool} tool stopped.")})
                .to_string()
        })
}

pub fn error_result(message: impl std::fmt::Display) -> String {
    serde_json::json!({ "error": message.to_string() }).to_string()
}

/// Settings for the web tools (config `web:` block and environment).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WebSettings {
    pub backend: Option<SearchBackend>,
    pub allow_private_urls: bool,
}

/// Registers the web tools; they are offered only when a search backend is configured.
pub fn register_web_tools(registry: &mut ToolRegistry, settings: &WebSettings) {
    if let Some(backend) = &settings.backend {
        registry.register(Arc::new(WebSearch {
            backend: backend.clone(),
        }));
        registry.register(Arc::new(WebExtract {
            allow_private: settings.allow_private_urls,
        }));
    }
}
