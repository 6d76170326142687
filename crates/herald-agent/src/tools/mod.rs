//! Built-in tools that need nothing but the local machine.

pub mod clarify;
pub mod files;
pub mod terminal;

use crate::tool::ToolRegistry;
use std::sync::Arc;

/// A registry with the built-in local tools.
pub fn builtin_registry() -> ToolRegistry {
    let mut r = ToolRegistry::new();
    r.register(Arc::new(terminal::Terminal));
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
