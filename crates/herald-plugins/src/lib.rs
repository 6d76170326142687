//! Hermes Python plugins, unchanged (middleware.md B2): the enabled plugins of a home
//! are found, one plugin host process imports them and calls their `register(ctx)`,
//! and what they registered becomes herald's middleware chain and observers.
//!
//! Nothing runs, and nothing costs, when no Python plugin is enabled.

pub mod discover;
pub mod entry_points;
pub mod host;
pub mod remote;
pub mod tools;

pub use discover::{Plugin, discover};
use herald_agent::Plugins;
use herald_agent::middleware::{FailureReporter, Kind};
use herald_config::{AgentSettings, Home};
use host::{HostSettings, Link};
use remote::{Callback, RemoteExecution, RemoteHooks, RemoteRequest};
use serde_json::Value;
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// The embedded plugin host program.
pub const HOST_PROGRAM: &str = include_str!("host.py");

/// The plugins folder of a home.
pub fn plugins_dir(home: &Home) -> std::path::PathBuf {
    home.root().join("plugins")
}

/// Why a plugin could not be switched on or off.
#[derive(Debug, thiserror::Error)]
pub enum SwitchError {
    #[error(
        "plugin '{name}' is not installed (no folder with plugin.yaml and __init__.py in {dir}, and no installed package's `hermes_agent.plugins` entry point of that name){}",
        suggestion.as_ref().map(|s| format!("; did you mean '{s}'?")).unwrap_or_default()
    )]
    NotInstalled {
        name: String,
        dir: String,
        suggestion: Option<String>,
    },
    #[error(transparent)]
    Config(#[from] herald_config::ConfigError),
}

/// Enables or disables the installed plugin `name` (a folder's key or manifest name,
/// or an installed package's entry point) in `config.yaml`: its key, and whether that
/// changed anything. `plugins` is the home's [`inventory`].
pub fn switch(
    home: &Home,
    plugins: &[Plugin],
    name: &str,
    on: bool,
) -> Result<(String, bool), SwitchError> {
    let Some(p) = plugins
        .iter()
        .find(|p| p.installed && (p.key == name || p.name == name))
    else {
        return Err(SwitchError::NotInstalled {
            name: name.to_owned(),
            dir: plugins_dir(home).display().to_string(),
            suggestion: closest(plugins, name),
        });
    };
    let names = [p.key.as_str(), p.name.as_str()];
    let changed =
        herald_config::default_config::set_plugin_enabled(&home.config_file(), &p.key, &names, on)?;
    Ok((p.key.clone(), changed))
}

/// The installed plugin whose name is nearest `name`, if one is near.
fn closest(plugins: &[Plugin], name: &str) -> Option<String> {
    plugins
        .iter()
        .filter(|p| p.installed)
        .flat_map(|p| [&p.key, &p.name])
        .map(|n| (strsim::jaro_winkler(n, name), n))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, n)| n.clone())
}

/// The plugins of a home, enabled or not, as `plugins.enabled` / `disabled` say.
pub fn list(home: &Home, settings: &AgentSettings) -> Vec<Plugin> {
    discover(
        &plugins_dir(home),
        &settings.plugins_enabled,
        &settings.plugins_disabled,
    )
}

/// Every plugin a home can use: its folders, and the entry points of the packages the
/// plugin host's interpreter (`plugins.python`) has installed, each with whether it is
/// enabled; an enabled name found in neither is listed as not installed. Also why the
/// entry points could not be listed, if they could not (then only the folders are
/// known, and enabled names without one are taken for entry points).
pub async fn inventory(home: &Home, settings: &AgentSettings) -> (Vec<Plugin>, Option<String>) {
    let (on, off) = (&settings.plugins_enabled, &settings.plugins_disabled);
    let folders = discover(&plugins_dir(home), on, off);
    let python = settings.plugins_python.as_deref().unwrap_or("python3");
    let installed = match entry_points::installed(python).await {
        Ok(found) => found,
        Err(why) => return (folders, Some(why)),
    };
    let mut all: Vec<Plugin> = folders.into_iter().filter(|p| p.path.is_some()).collect();
    for ep in installed {
        if all.iter().any(|p| p.key == ep.name || p.name == ep.name) {
            continue;
        }
        all.push(Plugin {
            enabled: discover::named(on, &ep.name, &ep.name)
                && !discover::named(off, &ep.name, &ep.name),
            key: ep.name.clone(),
            name: ep.name,
            path: None,
            manifest: discover::Manifest {
                version: ep.version,
                description: ep.description,
                ..discover::Manifest::default()
            },
            problem: None,
            installed: true,
        });
    }
    for name in on {
        if !off.contains(name) && !all.iter().any(|p| &p.key == name || &p.name == name) {
            all.push(Plugin {
                key: name.clone(),
                name: name.clone(),
                path: None,
                manifest: discover::Manifest::default(),
                problem: Some(format!(
                    "enabled, but no folder in {} and no installed package's entry point is named so",
                    plugins_dir(home).display()
                )),
                enabled: true,
                installed: false,
            });
        }
    }
    (all, None)
}

/// How one plugin fared in the host.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub key: String,
    pub error: Option<String>,
    pub registrations: usize,
}

/// The running Python plugins: the host and the chain built from what they registered.
pub struct PythonPlugins {
    link: Arc<Link>,
    chain: Arc<RwLock<Plugins>>,
    /// The tools the plugins registered (`ctx.register_tool`), as now.
    tools: Arc<RwLock<Vec<Arc<tools::PluginTool>>>>,
    reporter: Arc<FailureReporter>,
}

impl PythonPlugins {
    /// Starts the host for the enabled Python plugins of `home`; `Ok(None)` when none is
    /// enabled (no process is started).
    pub async fn start(
        home: &Home,
        settings: &AgentSettings,
    ) -> Result<Option<PythonPlugins>, String> {
        let enabled: Vec<Value> = list(home, settings)
            .iter()
            .filter(|p| p.enabled)
            .map(|p| {
                let gate = &settings.plugins_tool_override;
                p.to_host(gate.iter().any(|id| *id == p.key || *id == p.name))
            })
            .collect();
        if enabled.is_empty() {
            return Ok(None);
        }
        let script = write_program(home)?;
        let host = HostSettings {
            python: settings
                .plugins_python
                .clone()
                .unwrap_or_else(|| "python3".into()),
            script,
            hermes_home: home.root().to_path_buf(),
            callback_timeout: Duration::from_secs(
                settings.plugins_callback_timeout_secs.unwrap_or(30),
            ),
            startup_timeout: Duration::from_secs(
                settings.plugins_startup_timeout_secs.unwrap_or(60),
            ),
            plugins: enabled,
        };
        let block_when_down = settings.plugins_pre_tool_call_when_down.as_deref() != Some("allow");
        let link = Link::start(host).await?;
        let reporter = Arc::new(FailureReporter::default());
        let first = build_chain(&link, &link.initialized(), &reporter, block_when_down);
        let chain = Arc::new(RwLock::new(first));
        let registered = build_tools(&link, &link.initialized());
        for t in &registered {
            t.recheck().await;
        }
        let tools = Arc::new(RwLock::new(registered));
        let (c, l, r, t) = (
            chain.clone(),
            Arc::downgrade(&link),
            reporter.clone(),
            tools.clone(),
        );
        link.on_restart(Box::new(move |answer: &Value| {
            let Some(link) = l.upgrade() else { return };
            if let Ok(mut current) = c.write() {
                *current = build_chain(&link, answer, &r, block_when_down);
            }
            if let Ok(mut current) = t.write() {
                *current = build_tools(&link, answer);
            }
        }));
        recheck_tools(Arc::downgrade(&tools));
        report_loading(&link.initialized());
        Ok(Some(PythonPlugins {
            link,
            chain,
            tools,
            reporter,
        }))
    }

    /// The middleware and observers the plugins registered, as now.
    pub fn plugins(&self) -> Plugins {
        self.chain.read().map(|p| p.clone()).unwrap_or_default()
    }

    /// The tools the plugins registered, as now (each says whether it is available).
    pub fn tools(&self) -> Vec<Arc<tools::PluginTool>> {
        self.tools.read().map(|t| t.clone()).unwrap_or_default()
    }

    /// The skills the plugins registered: (`<plugin>:<name>`, its SKILL.md).
    pub fn skills(&self) -> Vec<(String, std::path::PathBuf)> {
        let answer = self.link.initialized();
        let all = answer["plugins"].as_array().cloned().unwrap_or_default();
        all.iter()
            .flat_map(|p| p["registrations"].as_array().cloned().unwrap_or_default())
            .filter(|r| r["type"] == "skill")
            .filter_map(|r| {
                let name = r["name"].as_str()?.to_owned();
                Some((name, std::path::PathBuf::from(r["path"].as_str()?)))
            })
            .collect()
    }

    /// Whether the plugin host process runs now.
    pub fn host_up(&self) -> bool {
        self.link.is_up()
    }

    /// How each plugin loaded.
    pub fn loaded(&self) -> Vec<Loaded> {
        loaded(&self.link.initialized())
    }

    /// Forgets which failures were reported (a reload).
    pub fn reset_reporting(&self) {
        self.reporter.reset();
    }

    /// Stops the host.
    pub async fn stop(&self) {
        self.link.close().await;
    }
}

/// Writes the host program under the home (kept there for the host to run).
fn write_program(home: &Home) -> Result<std::path::PathBuf, String> {
    let path = home.root().join("plugin_host.py");
    let current = std::fs::read_to_string(&path).ok();
    if current.as_deref() != Some(HOST_PROGRAM) {
        // Atomically: another herald of this home may be starting its host right now.
        let tmp = path.with_extension(format!("py.{}.tmp", std::process::id()));
        std::fs::write(&tmp, HOST_PROGRAM)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(path)
}

fn loaded(answer: &Value) -> Vec<Loaded> {
    answer["plugins"]
        .as_array()
        .map(|all| {
            all.iter()
                .map(|p| Loaded {
                    key: p["key"].as_str().unwrap_or_default().to_owned(),
                    error: p["error"].as_str().map(str::to_owned),
                    registrations: p["registrations"].as_array().map_or(0, Vec::len),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// One log line per plugin that failed to load, one saying what did.
fn report_loading(answer: &Value) {
    let hermes_cli = match answer["hermes_cli"].as_str() {
        Some("installed") => "the installed hermes_cli package",
        _ => "herald's hermes_cli shim",
    };
    tracing::info!(
        python = answer["python"].as_str().unwrap_or("?"),
        "the Python plugin host runs with {hermes_cli}"
    );
    for p in loaded(answer) {
        match &p.error {
            Some(e) => tracing::warn!(plugin = %p.key, "the plugin failed to load: {e}"),
            None => {
                tracing::info!(plugin = %p.key, registrations = p.registrations, "plugin loaded")
            }
        }
    }
}

/// The tools of an `initialize` answer, in registration order. A name providers refuse
/// or an MCP tool's `mcp__` name is refused, and so is a later tool of a name already
/// registered, each with a warning (never renamed: the plugin's hooks see its names).
fn build_tools(link: &Arc<Link>, answer: &Value) -> Vec<Arc<tools::PluginTool>> {
    let mut out: Vec<Arc<tools::PluginTool>> = Vec::new();
    let all = answer["plugins"].as_array().cloned().unwrap_or_default();
    for p in &all {
        for r in p["registrations"].as_array().into_iter().flatten() {
            if r["type"] != "tool" {
                continue;
            }
            let Some(tool) = tools::PluginTool::from_registration(link, r) else {
                continue;
            };
            if let Some(why) = tools::name_refused(&tool.name) {
                let shown: String = tool.name.chars().take(80).collect();
                tracing::warn!(plugin = %p["key"], tool = ?shown, "a plugin tool is refused: {why}");
                continue;
            }
            if out.iter().any(|t| t.name == tool.name) {
                tracing::warn!(plugin = %p["key"], tool = %tool.name, "a second plugin tool of this name is refused");
                continue;
            }
            out.push(Arc::new(tool));
        }
    }
    out
}

/// Runs the tools' check functions every 30 s (Hermes caches them about as long), for
/// as long as the plugins run.
fn recheck_tools(tools: std::sync::Weak<RwLock<Vec<Arc<tools::PluginTool>>>>) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(30)).await;
            let Some(current) = tools.upgrade() else {
                return;
            };
            let list = current.read().map(|t| t.clone()).unwrap_or_default();
            drop(current);
            for t in list {
                t.recheck().await;
            }
        }
    });
}

fn callback(r: &Value) -> Option<Callback> {
    let id = r["callback_id"].as_str()?.to_owned();
    let module = r["callback"]["module"].as_str().unwrap_or("plugin");
    let qualname = r["callback"]["qualname"].as_str().unwrap_or("callback");
    Some(Callback {
        id,
        name: format!("{module}.{qualname}"),
    })
}

fn kind(name: &str) -> Option<Kind> {
    match name {
        "llm_request" => Some(Kind::LlmRequest),
        "llm_execution" => Some(Kind::LlmExecution),
        "tool_request" => Some(Kind::ToolRequest),
        "tool_execution" => Some(Kind::ToolExecution),
        _ => None,
    }
}

/// herald's chain from an `initialize` answer, in registration order.
fn build_chain(
    link: &Arc<Link>,
    answer: &Value,
    reporter: &Arc<FailureReporter>,
    block_when_down: bool,
) -> Plugins {
    let mut p = Plugins {
        reporter: reporter.clone(),
        ..Plugins::default()
    };
    let mut hooks = Vec::new();
    let all = answer["plugins"].as_array().cloned().unwrap_or_default();
    for r in all
        .iter()
        .flat_map(|p| p["registrations"].as_array().cloned().unwrap_or_default())
    {
        let Some(cb) = callback(&r) else { continue };
        match (r["type"].as_str(), r["kind"].as_str().and_then(kind)) {
            (Some("middleware"), Some(k @ (Kind::LlmRequest | Kind::ToolRequest))) => {
                let m = Arc::new(RemoteRequest {
                    link: link.clone(),
                    kind: k,
                    callback: cb,
                });
                match k {
                    Kind::LlmRequest => p.llm_request.push(m),
                    _ => p.tool_request.push(m),
                }
            }
            (Some("middleware"), Some(Kind::LlmExecution)) => {
                p.llm_execution.push(Arc::new(RemoteExecution {
                    link: link.clone(),
                    kind: Kind::LlmExecution,
                    callback: cb,
                }))
            }
            (Some("middleware"), Some(Kind::ToolExecution)) => {
                p.tool_execution.push(Arc::new(RemoteExecution {
                    link: link.clone(),
                    kind: Kind::ToolExecution,
                    callback: cb,
                }))
            }
            (Some("hook"), _) => {
                if let Some(h) = r["hook"].as_str() {
                    hooks.push((h.to_owned(), cb));
                }
            }
            _ => {}
        }
    }
    if !hooks.is_empty() {
        p.observers.push(Arc::new(RemoteHooks {
            link: link.clone(),
            hooks,
            reporter: reporter.clone(),
            block_when_down,
        }));
    }
    p
}
