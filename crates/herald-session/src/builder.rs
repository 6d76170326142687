//! The one way a front door gets its session host: from a home and a platform, the
//! `.env`, herald's bundled skills, the configuration, the runtime and `state.db`
//! ([`HostBuilder::build`], no async runtime needed), then the Python plugins with their
//! SIGHUP reload and the recovery of runs whose process is gone ([`Built::start`]).
//! Hosts of one process on one home (the gateway's webhook runs and its API) start
//! together and share one plugin host and one set of MCP servers ([`start_together`]).

use crate::host::{DEFAULT_MAX_RUNS, Host};
use crate::runtime::{ModelChoice, Platform, Runtime};
use herald_config::{Config, Home, load_dotenv, process_env};
use herald_llm::LlmClient;
use herald_store::SessionStore;
use std::sync::Arc;

/// Why no host could be built; the text is said to the user.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// `.env` cannot be read (the text names the file).
    #[error("{0}")]
    Dotenv(String),
    #[error("configuration error:\n{0}")]
    Config(String),
    /// No model could be chosen, or the terminal backend is not supported.
    #[error("{0}")]
    Runtime(#[from] crate::runtime::RuntimeError),
    #[error("cannot open {path}: {reason}")]
    Store { path: String, reason: String },
}

/// What a host is built from: a home and the platform it serves, and optionally the
/// caller's model choice, a shared provider client and an open store.
pub struct HostBuilder<'a> {
    home: &'a Home,
    platform: Platform,
    choice: ModelChoice<'a>,
    client: Option<LlmClient>,
    store: Option<SessionStore>,
    loaded: Option<Config>,
    sighup: bool,
}

/// A built host, with the configuration it was built from, not yet started.
pub struct Built {
    pub host: Arc<Host>,
    pub config: Config,
    sighup: bool,
}

impl<'a> HostBuilder<'a> {
    pub fn new(home: &'a Home, platform: Platform) -> HostBuilder<'a> {
        HostBuilder {
            home,
            platform,
            choice: ModelChoice::default(),
            client: None,
            store: None,
            loaded: None,
            sighup: true,
        }
    }

    /// Whether SIGHUP reloads the Python plugins (the default). A terminal program
    /// (`herald chat`) says no: there a hangup means the terminal went away.
    pub fn reload_on_sighup(mut self, yes: bool) -> HostBuilder<'a> {
        self.sighup = yes;
        self
    }

    /// The model asked for by the caller (`-m`, `--provider`) over the configured one.
    pub fn model(mut self, choice: ModelChoice<'a>) -> HostBuilder<'a> {
        self.choice = choice;
        self
    }

    /// Shares a provider client (and its connection pool) with other hosts.
    pub fn client(mut self, client: LlmClient) -> HostBuilder<'a> {
        self.client = Some(client);
        self
    }

    /// Uses a store already open (one writer per `state.db` in a process).
    pub fn store(mut self, store: SessionStore) -> HostBuilder<'a> {
        self.store = Some(store);
        self
    }

    /// Builds from a configuration the caller read already (and so loaded its `.env`
    /// for): the gateway, which serves direct deliveries without a model, and its
    /// profiles, whose `.env` is not the process's.
    pub fn loaded(mut self, config: Config) -> HostBuilder<'a> {
        self.loaded = Some(config);
        self
    }

    /// Loads `.env`, installs the bundled skills into a new home, reads the
    /// configuration (unless [`HostBuilder::loaded`]), builds the runtime and opens the
    /// store.
    pub fn build(self) -> Result<Built, BuildError> {
        let home = self.home;
        let config = match self.loaded {
            Some(config) => config,
            None => prepare(home)?,
        };
        let runtime = Runtime::build(home, &config, self.platform, self.choice)?;
        let store = match self.store {
            Some(s) => s,
            None => SessionStore::open(&home.state_db_file()).map_err(|e| BuildError::Store {
                path: home.state_db_file().display().to_string(),
                reason: e.to_string(),
            })?,
        };
        let client = self.client.unwrap_or_default();
        let host = Host::with_client(Arc::new(runtime), store, client, DEFAULT_MAX_RUNS);
        Ok(Built {
            host,
            config,
            sighup: self.sighup,
        })
    }
}

/// What building on `home` reads first: its `.env` (into the process), herald's
/// bundled skills installed into a new home, and the configuration.
pub fn prepare(home: &Home) -> Result<Config, BuildError> {
    load_dotenv(home).map_err(|e| BuildError::Dotenv(e.to_string()))?;
    crate::bundled_skills::install_quietly(home);
    Config::load(home, &process_env).map_err(|e| BuildError::Config(e.to_string()))
}

impl Built {
    /// Starts the home's Python plugins (reloaded on SIGHUP from now on) and marks
    /// failed the runs whose owning process is gone; the host, ready to serve.
    pub async fn start(self) -> Arc<Host> {
        let mut started = start_together(vec![self]).await;
        started.remove(0)
    }
}

/// Starts hosts built on one home together: one Python plugin host for all of them
/// (reloaded on SIGHUP for all at once, unless none asked for it), then each one's
/// recovery; the hosts, in order.
pub async fn start_together(built: Vec<Built>) -> Vec<Arc<Host>> {
    let Some(first) = built.first() else {
        return Vec::new();
    };
    let python =
        crate::runtime::start_python_plugins(&first.config.home, &first.config.agent).await;
    // Started even with no server, so that a reload can add some.
    let mcp = Some(herald_mcp::McpPool::start(
        &first.config.mcp,
        Some(first.host.sampler()),
    ));
    let runtimes: Vec<_> = built.iter().map(|b| b.host.runtime().clone()).collect();
    for runtime in &runtimes {
        runtime.use_python_plugins(python.clone());
        runtime.use_mcp(mcp.clone());
    }
    if built.iter().any(|b| b.sighup) {
        crate::reload::reload_on_sighup(runtimes);
    }
    for b in &built {
        recover_quietly(&b.host).await;
        b.host.serve_relayed_controls();
    }
    built.into_iter().map(|b| b.host).collect()
}

/// [`Host::recover`], its outcome logged.
pub async fn recover_quietly(host: &Host) {
    match host.recover().await {
        Ok(0) => {}
        Ok(n) => tracing::warn!(runs = n, "runs an earlier stop cut off are marked failed"),
        Err(e) => tracing::warn!(error = %e, "cannot mark the runs an earlier stop cut off"),
    }
}
