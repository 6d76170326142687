//! What every agent front door builds from the configuration: the tool registry, the
//! provider retry settings, the web tools' settings.

use herald_agent::ToolRegistry;
use herald_agent::skills::{self, SkillLibrary};
use herald_config::{Config, Home, process_env};
use herald_llm::{Endpoint, RetryConfig};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;

/// A list of strings from an agent config section (absent or mistyped: empty).
pub fn string_list(config: &Config, name: &str, key: &str) -> Vec<String> {
    section(config, name, key)
        .map(herald_agent::string_list)
        .unwrap_or_default()
}

pub fn section<'a>(config: &'a Config, name: &str, key: &str) -> Option<&'a Value> {
    config.agent_sections.get(name).and_then(|s| s.get(key))
}

/// `terminal.cwd`, when it names a directory.
pub fn configured_cwd(config: &Config) -> Option<PathBuf> {
    section(config, "terminal", "cwd")
        .and_then(Value::as_str)
        .map(PathBuf::from)
        .filter(|p| p.is_dir())
}

/// `agent.max_turns`.
pub fn max_turns(config: &Config) -> Option<u32> {
    section(config, "agent", "max_turns")
        .and_then(Value::as_u64)
        .map(|v| u32::try_from(v).unwrap_or(u32::MAX))
}

/// The persona: `<home>/SOUL.md` when it has text, else `default`.
pub fn soul(home: &Home, default: &str) -> String {
    std::fs::read_to_string(home.root().join("SOUL.md"))
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| default.to_owned())
}

/// The web tools' settings: `web.{backend, searxng_url, allow_private_urls}` and
/// `security.allow_private_urls` (Hermes's key for the same) in config,
/// `SEARXNG_URL`, `TAVILY_API_KEY` (and `TAVILY_BASE_URL`) in the environment.
fn web_settings(config: &Config) -> herald_tools::WebSettings {
    let web = config
        .agent_sections
        .get("web")
        .cloned()
        .unwrap_or(Value::Null);
    let searxng = web
        .get("searxng_url")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| process_env("SEARXNG_URL"))
        .filter(|s| !s.is_empty());
    let tavily = process_env("TAVILY_API_KEY").filter(|s| !s.is_empty());
    let wanted = web
        .get("backend")
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase);
    let tavily_backend = |key: String| herald_tools::SearchBackend::Tavily {
        api_key: key,
        base_url: process_env("TAVILY_BASE_URL").unwrap_or_else(|| "https://api.tavily.com".into()),
    };
    let backend = match (wanted.as_deref(), searxng, tavily) {
        (Some("tavily"), _, Some(key)) => Some(tavily_backend(key)),
        (Some("searxng") | None, Some(url), _) => {
            Some(herald_tools::SearchBackend::Searxng { base_url: url })
        }
        (None, None, Some(key)) => Some(tavily_backend(key)),
        (_, Some(url), _) => Some(herald_tools::SearchBackend::Searxng { base_url: url }),
        _ => None,
    };
    herald_tools::WebSettings {
        backend,
        allow_private_urls: web.get("allow_private_urls") == Some(&Value::Bool(true))
            || section(config, "security", "allow_private_urls") == Some(&Value::Bool(true)),
    }
}

/// The skills a front door on `platform` (`cli`, `webhook`) sees: the home's `skills/`,
/// `skills.external_dirs` (`~` expanded), minus `skills.disabled` and
/// `skills.platform_disabled.<platform>`.
pub fn skill_library(home: &Home, config: &Config, platform: &str) -> SkillLibrary {
    let mut disabled = string_list(config, "skills", "disabled");
    if let Some(list) = section(config, "skills", "platform_disabled").and_then(|p| p.get(platform))
    {
        disabled.extend(herald_agent::string_list(list));
    }
    SkillLibrary {
        root: home.skills_dir(),
        external_dirs: string_list(config, "skills", "external_dirs")
            .iter()
            .map(|d| expand_home(d))
            .collect(),
        disabled,
    }
}

/// `~/x` under the user's home folder; other paths as written.
fn expand_home(path: &str) -> PathBuf {
    match path.strip_prefix("~/") {
        Some(rest) => dirs_home().join(rest),
        None => PathBuf::from(path),
    }
}

fn dirs_home() -> PathBuf {
    std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from)
}

/// Every tool herald has, configured from `config.yaml`: terminal (with
/// `terminal.timeout`), files, process, clarify, skills, web and vision. Webhook runs
/// pass `allow_local_files: false` so vision only reads URLs.
pub fn tool_registry(
    config: &Config,
    endpoint: &Endpoint,
    skills: &SkillLibrary,
    allow_local_files: bool,
) -> ToolRegistry {
    let terminal_timeout = section(config, "terminal", "timeout")
        .and_then(Value::as_u64)
        .map_or(herald_agent::tools::terminal::DEFAULT_TIMEOUT, |s| {
            std::time::Duration::from_secs(s.max(1))
        });
    let mut registry = herald_agent::tools::registry_with_terminal_timeout(terminal_timeout);
    registry.register(Arc::new(skills::SkillsList {
        library: skills.clone(),
    }));
    registry.register(Arc::new(skills::SkillView {
        library: skills.clone(),
    }));
    herald_tools::register_web_tools(&mut registry, &web_settings(config));
    registry.register(Arc::new(herald_tools::VisionAnalyze {
        client: herald_llm::LlmClient::new(),
        endpoint: endpoint.clone(),
        allow_local_files,
    }));
    registry
}

/// The provider retry settings: `agent.api_max_retries` (and `HERALD_RETRY_BASE_MS`).
pub fn retry_config(config: &Config) -> RetryConfig {
    let retries = section(config, "agent", "api_max_retries")
        .and_then(Value::as_u64)
        .map_or(3, |v| v as u32)
        .max(1);
    let mut retry = RetryConfig {
        max_attempts: retries,
        ..RetryConfig::default()
    };
    if let Some(ms) = process_env("HERALD_RETRY_BASE_MS").and_then(|v| v.parse::<u64>().ok()) {
        retry.base = std::time::Duration::from_millis(ms);
    }
    retry
}
