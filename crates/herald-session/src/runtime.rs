//! The runtime of a profile: everything an agent is built from, read once from the
//! configuration for one surface (`cli`, `webhook`): the model, the tool registry (the
//! terminal with `terminal.timeout`, files, process, clarify, skills, web, vision), the
//! skills library, SOUL.md, the limits, the retries and the approval policy.

use crate::approvals::ApprovalPolicy;
use crate::model_select::{self, SelectError};
use crate::prompt_files::{PromptFileCache, PromptFiles};
use herald_agent::skills::SkillLibrary;
use herald_agent::{Plugins, Tool, ToolRegistry, toolsets};
use herald_config::{AgentSettings, Config, Home, ModelSettings, process_env};
use herald_llm::{Endpoint, RetryConfig, SharedEndpoint};
use std::path::PathBuf;
use std::sync::Arc;

/// The surface a runtime serves, by Hermes's platform names: what plugins are told, which
/// `skills.platform_disabled` list applies, which tools its sessions get by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    /// `herald chat`.
    Cli,
    /// `herald rpc` (Hermes's TUI gateway).
    Tui,
    /// `herald acp`.
    Acp,
    /// The OpenAI-compatible HTTP API.
    Api,
    /// Webhook-started runs.
    Webhook,
    /// People talking to the Telegram bot.
    Telegram,
    /// People talking to the Slack app.
    Slack,
    /// People talking to the Discord bot.
    Discord,
}

impl Platform {
    pub fn name(self) -> &'static str {
        match self {
            Platform::Cli => "cli",
            Platform::Tui => "tui",
            Platform::Acp => "acp",
            Platform::Api => "api_server",
            Platform::Webhook => "webhook",
            Platform::Telegram => "telegram",
            Platform::Slack => "slack",
            Platform::Discord => "discord",
        }
    }

    /// The toolsets a session of this platform gets when its caller names none:
    /// `platform_toolsets.cli` for `cli` and `tui` (as Hermes's TUI gateway resolves
    /// them), `hermes-acp` for ACP, `platform_toolsets.api_server` for the API, each
    /// falling back to its `hermes-<platform>` set. Webhook runs take their route's grant
    /// instead (`toolsets::webhook_tools`); this is their narrow default.
    pub fn default_toolsets(self, config: &Config) -> Vec<String> {
        let configured = match self {
            Platform::Cli | Platform::Tui => config.platform_toolsets.cli.clone(),
            Platform::Api => config.platform_toolsets.api_server.clone(),
            Platform::Webhook => config.platform_toolsets.webhook.clone(),
            Platform::Acp | Platform::Telegram | Platform::Slack | Platform::Discord => None,
        };
        let default = match self {
            Platform::Cli | Platform::Tui => "hermes-cli",
            Platform::Acp => "hermes-acp",
            Platform::Api => "hermes-api-server",
            Platform::Webhook => "hermes-webhook",
            Platform::Telegram => "hermes-telegram",
            Platform::Slack => "hermes-slack",
            Platform::Discord => "hermes-discord",
        };
        configured
            .filter(|l| !l.is_empty())
            .unwrap_or_else(|| vec![default.to_owned()])
    }

    /// Whether `vision_analyze` may read local files. Hermes reads any host path under
    /// the local terminal backend on every platform; herald keeps webhook runs, started
    /// by outside senders, to URLs.
    fn allow_local_files(self) -> bool {
        self != Platform::Webhook
    }
}

/// A model asked for by the caller (`-m`, `--provider`) over the configured one.
#[derive(Debug, Clone, Copy, Default)]
pub struct ModelChoice<'a> {
    pub model: Option<&'a str>,
    pub provider: Option<&'a str>,
}

/// Why no runtime could be built.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("{0}")]
    Model(#[from] SelectError),
    #[error(
        "terminal.backend `{0}` is not supported yet; herald runs commands locally (set terminal.backend: local)"
    )]
    Backend(String),
}

/// Everything an agent of this profile on this surface is built from.
pub struct Runtime {
    pub home: Home,
    pub platform: Platform,
    pub settings: AgentSettings,
    /// The model settings, for switching models later (`/model`).
    model_settings: ModelSettings,
    /// The `-m` and `--provider` this runtime was built with, to choose again on reload.
    choice: (Option<String>, Option<String>),
    /// Chosen at start and again when `.env` is reloaded ([`Runtime::reselect_endpoint`]).
    endpoint: SharedEndpoint,
    /// The provider as chosen (`openrouter`, `custom`, a `providers:` key, `auto`).
    pub provider: String,
    pub registry: ToolRegistry,
    /// The background jobs the `terminal` and `process` tools started.
    pub jobs: herald_tools::process::Jobs,
    pub skills: SkillLibrary,
    pub retry: RetryConfig,
    /// `terminal.cwd`, when it names a folder.
    pub cwd: Option<PathBuf>,
    pub max_iterations: u32,
    /// `agent.max_tool_calls_per_answer` (64).
    pub max_tool_calls_per_answer: usize,
    pub approvals: ApprovalPolicy,
    /// Conversations a front door holds live at once (`max_live_sessions`, 16).
    pub max_live_sessions: usize,
    /// `display.busy_input_mode`, read at start and on every reload.
    busy_input_mode: std::sync::RwLock<herald_config::default_config::BusyInputMode>,
    /// The middleware chain and observers every agent of this runtime runs with:
    /// registered by the embedder ([`Runtime::with_plugins`]) ahead of plugins.
    pub plugins: Plugins,
    /// The Python plugins' host, when any is enabled ([`Runtime::with_python`]).
    python: std::sync::RwLock<Option<Arc<herald_plugins::PythonPlugins>>>,
    /// The home's MCP servers, once started ([`Runtime::use_mcp`]).
    mcp: std::sync::RwLock<Option<Arc<herald_mcp::McpPool>>>,
    /// The platform's toolsets, read for which MCP servers its sessions get.
    toolsets: Vec<String>,
    mcp_discovery: std::time::Duration,
    /// `delegation:`, how `delegate_task` starts children.
    pub delegation: herald_config::DelegationSettings,
    /// `SOUL.md` and the skills index, shared by sessions opened together.
    prompt_files: PromptFileCache,
}

/// Hermes's default for `max_live_sessions`.
pub const DEFAULT_MAX_LIVE_SESSIONS: usize = 16;

impl Runtime {
    pub fn build(
        home: &Home,
        config: &Config,
        platform: Platform,
        choice: ModelChoice<'_>,
    ) -> Result<Runtime, RuntimeError> {
        let settings = config.agent.clone();
        if let Some(backend) = settings
            .terminal_backend
            .as_deref()
            .filter(|b| *b != "local")
        {
            return Err(RuntimeError::Backend(backend.to_owned()));
        }
        let selected =
            model_select::select(&config.model, choice.model, choice.provider, &process_env)?;
        let endpoint = SharedEndpoint::new(selected.endpoint);
        let skills = skill_library(home, &settings, platform);
        let jobs = herald_tools::process::Jobs::default();
        let mut registry = tool_registry(jobs.clone(), &settings, &endpoint, &skills, platform);
        registry.register(Arc::new(herald_tools::memory::Memory {
            store: memory_store(home, None),
        }));
        registry.register(Arc::new(herald_tools::todo::Todo::default()));
        registry.register(Arc::new(herald_tools::cronjob::Cronjob {
            jobs: herald_tools::schedule::jobs::file_of(home.root()),
        }));
        Ok(Runtime {
            home: home.clone(),
            platform,
            model_settings: config.model.clone(),
            choice: (
                choice.model.map(str::to_owned),
                choice.provider.map(str::to_owned),
            ),
            endpoint,
            provider: selected.provider,
            registry,
            jobs,
            skills,
            retry: retry_config(&settings),
            cwd: settings.terminal_cwd.clone().filter(|p| p.is_dir()),
            max_iterations: settings
                .max_turns
                .unwrap_or(herald_agent::turn::DEFAULT_MAX_ITERATIONS)
                .max(1),
            max_tool_calls_per_answer: settings
                .max_tool_calls_per_answer
                .unwrap_or(herald_agent::budget::DEFAULT_MAX_TOOL_CALLS_PER_ANSWER),
            approvals: ApprovalPolicy::from_settings(
                &settings,
                home.always_approvals_file(),
                &process_env,
            ),
            max_live_sessions: settings
                .max_live_sessions
                .unwrap_or(DEFAULT_MAX_LIVE_SESSIONS),
            busy_input_mode: std::sync::RwLock::new(settings.busy_input_mode),
            plugins: Plugins::default(),
            python: std::sync::RwLock::new(None),
            mcp: std::sync::RwLock::new(None),
            toolsets: platform.default_toolsets(config),
            mcp_discovery: config.mcp.discovery_timeout,
            delegation: config.delegation.clone(),
            prompt_files: PromptFileCache::default(),
            settings,
        })
    }

    /// What a prompt sent while a turn runs does (`display.busy_input_mode`).
    pub fn busy_input_mode(&self) -> herald_config::default_config::BusyInputMode {
        *self
            .busy_input_mode
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Uses `mode` for busy prompts from now on (a reload, the TUI's `/busy`).
    pub fn set_busy_input_mode(&self, mode: herald_config::default_config::BusyInputMode) {
        *self
            .busy_input_mode
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = mode;
    }

    /// This runtime with the embedder's middleware and observers.
    pub fn with_plugins(mut self, plugins: Plugins) -> Runtime {
        self.plugins = plugins;
        self
    }

    /// Starts the Python plugins of this runtime's home and uses them from now on (see
    /// [`start_python_plugins`]); the host, to share with another runtime.
    pub async fn start_python_plugins(&self) -> Option<Arc<herald_plugins::PythonPlugins>> {
        let started = start_python_plugins(&self.home, &self.settings).await;
        self.use_python_plugins(started.clone());
        started
    }

    /// Uses `python`'s plugins from now on (`None`: no Python plugins).
    pub fn use_python_plugins(&self, python: Option<Arc<herald_plugins::PythonPlugins>>) {
        let skills = python.as_ref().map(|p| p.skills()).unwrap_or_default();
        self.skills.plugin_skills.set(skills);
        if let Ok(mut p) = self.python.write() {
            *p = python;
        }
    }

    /// Uses `pool`'s MCP servers from now on.
    pub fn use_mcp(&self, pool: Option<Arc<herald_mcp::McpPool>>) {
        if let Ok(mut m) = self.mcp.write() {
            *m = pool;
        }
    }

    /// The MCP servers, if started.
    pub fn mcp(&self) -> Option<Arc<herald_mcp::McpPool>> {
        self.mcp.read().ok().and_then(|m| m.clone())
    }

    /// Which MCP servers a session gets: `asked` when the door chose, else the
    /// platform's rule (webhook runs: none; the other doors: as their toolsets say,
    /// every enabled server unless they name some or say `no_mcp`).
    pub fn mcp_grant(&self, asked: Option<&herald_mcp::McpGrant>) -> herald_mcp::McpGrant {
        if let Some(g) = asked {
            return g.clone();
        }
        match (self.platform, self.mcp()) {
            (Platform::Webhook, _) | (_, None) => herald_mcp::McpGrant::Nothing,
            (_, Some(pool)) => herald_mcp::McpGrant::interactive(&self.toolsets, &pool),
        }
    }

    /// The Python plugins' host, if one runs.
    pub fn python_plugins(&self) -> Option<Arc<herald_plugins::PythonPlugins>> {
        self.python.read().ok().and_then(|p| p.clone())
    }

    /// What every agent of this runtime runs with now: the embedder's middleware and
    /// observers, then the Python plugins' (as last loaded).
    pub fn current_plugins(&self) -> Plugins {
        let Some(python) = self.python_plugins() else {
            return self.plugins.clone();
        };
        let theirs = python.plugins();
        let mut p = self.plugins.clone();
        p.llm_request.extend(theirs.llm_request);
        p.llm_execution.extend(theirs.llm_execution);
        p.tool_request.extend(theirs.tool_request);
        p.tool_execution.extend(theirs.tool_execution);
        p.observers.extend(theirs.observers);
        p.reporter = theirs.reporter;
        p
    }

    /// The tools of these names that exist and are available here, minus
    /// `agent.disabled_toolsets`, sorted by name.
    /// Whether the tool `name` is not in a disabled toolset.
    pub fn allows(&self, name: &str) -> bool {
        let (disabled, _) = toolsets::resolve(&self.settings.disabled_toolsets);
        !disabled.iter().any(|d| d == name)
    }

    pub fn tools(&self, names: &[String]) -> Vec<Arc<dyn Tool>> {
        let (disabled, _) = toolsets::resolve(&self.settings.disabled_toolsets);
        let allowed: Vec<String> = names
            .iter()
            .filter(|n| !disabled.contains(n))
            .cloned()
            .collect();
        self.registry.select(&allowed)
    }

    /// The MCP tools `grant` gives now, beside the session's own tools `taken`, less
    /// the servers `shadowed` (a session's own servers of those names win).
    pub fn mcp_tools(
        &self,
        grant: &herald_mcp::McpGrant,
        taken: &[String],
        shadowed: &[String],
    ) -> Vec<Arc<dyn Tool>> {
        let Some(pool) = self.mcp() else {
            return Vec::new();
        };
        let mut disabled = self.settings.disabled_toolsets.clone();
        disabled.extend(shadowed.iter().cloned());
        pool.tools(grant, taken, &disabled)
    }

    /// The Python plugins' tools `grant` gives now: available ones (host up, check
    /// passed, variables set) whose toolset is granted and not disabled. Webhook runs
    /// get a plugin toolset only when their toolsets name it.
    pub fn plugin_tools(
        &self,
        grant: &herald_mcp::McpGrant,
    ) -> Vec<Arc<herald_plugins::tools::PluginTool>> {
        let Some(python) = self.python_plugins() else {
            return Vec::new();
        };
        let disabled = &self.settings.disabled_toolsets;
        python
            .tools()
            .into_iter()
            .filter(|t| t.replaces || !self.clashes_with_builtin(&t.name))
            .filter(|t| Tool::available(t.as_ref()))
            .filter(|t| !disabled.iter().any(|d| *d == t.toolset))
            .filter(|t| match grant {
                herald_mcp::McpGrant::Nothing => false,
                herald_mcp::McpGrant::All => true,
                herald_mcp::McpGrant::Named(entries) => {
                    entries.iter().any(|e| e.trim() == t.toolset)
                }
            })
            .collect()
    }

    /// Whether `name` is a built-in tool's, enabled here or not (any tool of the
    /// registry or of a toolset herald defines): said once per name.
    fn clashes_with_builtin(&self, name: &str) -> bool {
        let builtin = self.registry.get(name).is_some()
            || herald_agent::toolsets::toolset_of(name) != "other";
        if builtin {
            refused_plugin_tool(name);
        }
        builtin
    }

    /// Whether a toolsets entry names tools from outside: an MCP server, `no_mcp`, or a
    /// Python plugin's toolset (not an unknown toolset, then).
    pub fn names_outside_toolset(&self, entry: &str) -> bool {
        let entry = entry.trim();
        entry == "no_mcp"
            || self.mcp().is_some_and(|p| p.names(entry))
            || self
                .python_plugins()
                .is_some_and(|p| p.tools().iter().any(|t| t.toolset == entry))
    }

    /// `mcp_discovery_timeout`, as read at start.
    pub fn mcp_discovery_timeout(&self) -> std::time::Duration {
        self.mcp_discovery
    }

    /// The persona: `<home>/SOUL.md` when it has text, else `default`.
    pub fn soul(&self, default: &str) -> String {
        self.prompt_files()
            .soul
            .clone()
            .unwrap_or_else(|| default.to_owned())
    }

    /// `SOUL.md` and the skills index as read at most
    /// [`FRESH_FOR`](crate::prompt_files::FRESH_FOR) ago.
    pub fn prompt_files(&self) -> Arc<PromptFiles> {
        self.prompt_files.get(self.home.root(), &self.skills)
    }

    /// `cwd`'s `AGENTS.md` as read at most a moment ago.
    pub fn agents_file(&self, cwd: &std::path::Path) -> crate::prompt_files::AgentsFile {
        self.prompt_files.agents(cwd)
    }

    /// Whether a prompt for a session in `cwd` can be built now without reading a file.
    pub fn prompt_files_fresh(&self, cwd: &std::path::Path) -> bool {
        self.prompt_files.fresh(cwd)
    }

    /// The model settings this runtime chose from.
    pub fn model_settings(&self) -> &ModelSettings {
        &self.model_settings
    }

    /// The context window in tokens: `model.context_length`, else 256,000 (Hermes's
    /// fallback).
    pub fn context_window(&self) -> u64 {
        const DEFAULT_CONTEXT: u64 = 256_000;
        self.model_settings
            .context_length
            .unwrap_or(DEFAULT_CONTEXT)
    }

    /// The endpoint sessions opened now start with.
    pub fn endpoint(&self) -> Endpoint {
        self.endpoint.get()
    }

    /// Chooses the endpoint again from the model settings read at start and the
    /// environment as it is now (after `.env` was reloaded), so a rotated key is used
    /// by the sessions opened from now on. A choice that lands on another provider is
    /// not taken: that needs a restart.
    pub fn reselect_endpoint(&self) -> Result<(), SelectError> {
        let (model, provider) = &self.choice;
        let selected = model_select::select(
            &self.model_settings,
            model.as_deref(),
            provider.as_deref(),
            &process_env,
        )?;
        if selected.provider != self.provider {
            return Err(SelectError(format!(
                "the provider would now be `{}`, not `{}`: restart to switch providers",
                selected.provider, self.provider
            )));
        }
        self.endpoint.set(selected.endpoint);
        Ok(())
    }

    /// Whether the model's provider has a credential: a key of its own, or a local
    /// server (loopback) that needs none.
    pub fn credential_resolves(&self) -> bool {
        endpoint_has_credential(&self.endpoint())
    }

    /// The endpoint for a `/model SPEC` switch (also `provider:model`).
    /// Hermes's picker sends `MODEL --provider SLUG` with `--tui-session` or `--global`;
    /// both switch this session only (herald writes no config from a picker).
    pub fn switch_model(&self, spec: &str) -> Result<Endpoint, SelectError> {
        let (model, provider) = model_flags(spec);
        if model.is_empty() {
            return Err(SelectError("no model named".into()));
        }
        model_select::select(
            &self.model_settings,
            Some(&model),
            provider.as_deref(),
            &process_env,
        )
        .map(|s| s.endpoint)
    }
}

/// A model switch's words: the model, and the provider of `--provider SLUG`
/// (`--global`, `--tui-session` and other flags are dropped).
fn model_flags(spec: &str) -> (String, Option<String>) {
    let mut words = spec.split_whitespace();
    let (mut model, mut provider) = (Vec::new(), None);
    while let Some(w) = words.next() {
        match w {
            "--provider" => provider = words.next().map(str::to_owned),
            flag if flag.starts_with("--") => {}
            word => model.push(word),
        }
    }
    (model.join(" "), provider)
}

/// Whether `endpoint` can be called: it has a key, or it is on this machine (a local
/// server needs none).
pub fn endpoint_has_credential(endpoint: &herald_llm::Endpoint) -> bool {
    let key = endpoint.api_key.trim();
    let keyed = !key.is_empty() && key != herald_llm::endpoint::NO_KEY;
    let local = ["://127.0.0.1", "://localhost", "://[::1]"]
        .iter()
        .any(|h| endpoint.base_url.contains(h));
    keyed || local
}

/// Starts the plugin host for the enabled Python plugins of `home` (none enabled:
/// nothing runs). A host that cannot start is logged, and herald goes on without its
/// plugins.
pub async fn start_python_plugins(
    home: &Home,
    settings: &AgentSettings,
) -> Option<Arc<herald_plugins::PythonPlugins>> {
    match herald_plugins::PythonPlugins::start(home, settings).await {
        Ok(p) => p.map(Arc::new),
        Err(e) => {
            tracing::warn!("Python plugins are not running: {e}");
            None
        }
    }
}

/// The web tools' settings: `web.{backend, searxng_url, allow_private_urls}`,
/// `security.allow_private_urls`, and `SEARXNG_URL`, `TAVILY_API_KEY` (and
/// `TAVILY_BASE_URL`) in the environment.
fn web_settings(settings: &AgentSettings) -> herald_tools::WebSettings {
    let searxng = settings
        .searxng_url
        .clone()
        .or_else(|| process_env("SEARXNG_URL"))
        .filter(|s| !s.is_empty());
    let tavily = process_env("TAVILY_API_KEY").filter(|s| !s.is_empty());
    let tavily_backend = |key: String| herald_tools::SearchBackend::Tavily {
        api_key: key,
        base_url: process_env("TAVILY_BASE_URL").unwrap_or_else(|| "https://api.tavily.com".into()),
    };
    let backend = match (settings.web_backend.as_deref(), searxng, tavily) {
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
        allow_private_urls: settings.allow_private_urls,
    }
}

/// The skills a surface sees: the home's `skills/`, `skills.external_dirs` (read as every
/// path in config.yaml is: `~`, `$VAR`, relative to the home), minus `skills.disabled` and `skills.platform_disabled.<platform>`.
fn skill_library(home: &Home, settings: &AgentSettings, platform: Platform) -> SkillLibrary {
    let mut disabled = settings.skills_disabled.clone();
    if let Some(list) = settings.skills_platform_disabled.get(platform.name()) {
        disabled.extend(list.iter().cloned());
    }
    SkillLibrary {
        root: home.skills_dir(),
        external_dirs: settings
            .skills_external_dirs
            .iter()
            .map(|d| home.resolve(d))
            .collect(),
        disabled,
        plugin_skills: Default::default(),
    }
}

/// The memory stores (`MEMORY.md`, `USER.md`) of the home (`memories/`), or of one
/// API session key (`X-Hermes-Session-Key`): `memories/keys/<its SHA-256, 32 hex>/`,
/// so each key has a long-term memory of its own and none reads another's.
pub fn memory_store(home: &Home, scope: Option<&str>) -> herald_tools::memory::MemoryStore {
    use sha2::Digest;
    let dir = home.root().join("memories");
    match scope {
        None => herald_tools::memory::MemoryStore::at(dir),
        Some(key) => {
            let digest = hex::encode(sha2::Sha256::digest(key.as_bytes()));
            herald_tools::memory::MemoryStore::at(dir.join("keys").join(&digest[..32]))
        }
    }
}

fn tool_registry(
    jobs: herald_tools::process::Jobs,
    settings: &AgentSettings,
    endpoint: &SharedEndpoint,
    skills: &SkillLibrary,
    platform: Platform,
) -> ToolRegistry {
    let terminal_timeout = settings
        .terminal_timeout_secs
        .map_or(herald_tools::terminal::DEFAULT_TIMEOUT, |s| {
            std::time::Duration::from_secs(s.max(1))
        });
    let mut registry = herald_tools::registry_with_jobs(terminal_timeout, jobs);
    registry.register(Arc::new(herald_tools::skills::SkillsList {
        library: skills.clone(),
    }));
    registry.register(Arc::new(herald_tools::skill_manage::SkillManage {
        library: skills.clone(),
    }));
    registry.register(Arc::new(herald_tools::skills::SkillView {
        library: skills.clone(),
    }));
    herald_tools::register_web_tools(&mut registry, &web_settings(settings));
    registry.register(Arc::new(herald_tools::VisionAnalyze {
        client: herald_llm::LlmClient::new(),
        endpoint: endpoint.clone(),
        allow_local_files: platform.allow_local_files(),
    }));
    registry
}

/// The provider retry settings: `agent.api_max_retries` (and `HERALD_RETRY_BASE_MS`).
fn retry_config(settings: &AgentSettings) -> RetryConfig {
    let mut retry = RetryConfig {
        max_attempts: settings.api_max_retries.unwrap_or(3).max(1),
        ..RetryConfig::default()
    };
    if let Some(ms) = process_env("HERALD_RETRY_BASE_MS").and_then(|v| v.parse::<u64>().ok()) {
        retry.base = std::time::Duration::from_millis(ms);
    }
    retry
}

/// Says once per name that a plugin tool named like a built-in is refused.
fn refused_plugin_tool(name: &str) {
    static WARNED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut warned = crate::conversation::lock(&WARNED);
    if !warned.iter().any(|w| w == name) {
        warned.push(name.to_owned());
        tracing::warn!(
            tool = name,
            "a plugin tool named like a built-in is refused: it replaces the built-in only with override=True and plugins.entries.<plugin>.allow_tool_override: true"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime(yaml: &str, platform: Platform) -> Result<Runtime, RuntimeError> {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path());
        let config = Config::from_yaml(&home, yaml, &|_| None).unwrap();
        Runtime::build(&home, &config, platform, ModelChoice::default())
    }

    const MODEL: &str = "model:\n  default: m\n  base_url: http://127.0.0.1:9/v1\n";

    #[test]
    fn the_configured_provider_is_named_on_every_surface() {
        let yaml = "model:\n  default: m\n  provider: my-vllm\nproviders:\n  my-vllm:\n    base_url: http://127.0.0.1:9/v1\n";
        for platform in [Platform::Cli, Platform::Webhook] {
            let r = runtime(yaml, platform).unwrap();
            assert_eq!(r.provider, "my-vllm");
            assert_eq!(
                r.endpoint().base_url_from.as_deref(),
                Some("providers.my-vllm.base_url")
            );
        }
    }

    #[test]
    fn disabled_toolsets_and_the_terminal_backend_apply_to_every_surface() {
        let yaml = format!("{MODEL}agent:\n  disabled_toolsets: [terminal]\n");
        for platform in [Platform::Cli, Platform::Webhook] {
            let r = runtime(&yaml, platform).unwrap();
            let names: Vec<String> = ["terminal", "read_file"].map(String::from).to_vec();
            let tools = r.tools(&names);
            let offered: Vec<&str> = tools.iter().map(|t| t.name()).collect();
            assert_eq!(offered, ["read_file"], "{platform:?}");
        }
        let docker = format!("{MODEL}terminal:\n  backend: docker\n");
        for platform in [Platform::Cli, Platform::Webhook] {
            assert!(matches!(
                runtime(&docker, platform),
                Err(RuntimeError::Backend(b)) if b == "docker"
            ));
        }
    }

    #[test]
    fn one_approval_policy_whoever_answers() {
        let yaml = format!(
            "{MODEL}approvals:\n  deny: ['touch *']\n  timeout: 5\ncommand_allowlist: ['rm -rf build']\n"
        );
        let r = runtime(&yaml, Platform::Webhook).unwrap();
        let approvals = r
            .approvals
            .approvals(crate::Attendance::Unattended, "webhook");
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let denied = rt.block_on(approvals.check("touch x"));
        assert!(
            matches!(denied, herald_agent::Verdict::Blocked(ref w) if w.contains("approvals.deny")),
            "{denied:?}"
        );
        let listed = rt.block_on(approvals.check("rm -rf build"));
        assert_eq!(listed, herald_agent::Verdict::Allowed);
        let dangerous = rt.block_on(approvals.check("rm -rf other"));
        assert!(matches!(dangerous, herald_agent::Verdict::Blocked(_)));
        assert_eq!(approvals.timeout, std::time::Duration::from_secs(5));
    }

    #[test]
    fn a_mistyped_agent_setting_names_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path());
        let err = Config::from_yaml(&home, "agent:\n  max_turns: lots\n", &|_| None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(":2:") && err.contains("agent.max_turns"),
            "{err}"
        );
        assert!(err.contains("expected a whole number"), "{err}");
    }
}
