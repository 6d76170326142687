//! Network tools for the agent core, implementing `herald_agent::Tool`: `web_search`
//! (SearXNG or Tavily, chosen in config) and `web_extract` (pages as text, refusing
//! loopback, private, link-local and metadata addresses unless config allows them).
//! Both return third-party text, so the turn loop wraps their results as untrusted.

pub mod url_safety;
pub mod vision;
pub mod web;

pub use vision::VisionAnalyze;
pub use web::{SearchBackend, WebExtract, WebSearch};

use herald_agent::ToolRegistry;
use std::sync::Arc;

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
