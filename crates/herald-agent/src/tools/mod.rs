//! Built-in tools that need nothing but the local machine.

pub mod clarify;
pub mod files;
pub mod process;
pub mod terminal;

use crate::tool::ToolRegistry;
use std::sync::Arc;

/// A registry with the built-in local tools (terminal's default time limit 180 s).
pub fn builtin_registry() -> ToolRegistry {
    registry_with_terminal_timeout(terminal::DEFAULT_TIMEOUT)
}

/// The built-in local tools with `terminal.timeout` as the default command limit.
pub fn registry_with_terminal_timeout(default_timeout: std::time::Duration) -> ToolRegistry {
    let mut r = ToolRegistry::new();
    let jobs = process::Jobs::default();
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
pub fn error_result(message: impl std::fmt::Display) -> String {
    serde_json::json!({ "error": message.to_string() }).to_string()
}
