//! The session host of an interactive door (`herald chat`, `herald rpc`, `herald
//! acp`), assembled once: the home's configuration, its session store as the home
//! keeps it (`state.db`, or the shared PostgreSQL database with `store.url`, so that
//! the sessions of every door are one set), the door's tools, trace export, and at the
//! end the runs stopped and the traces sent.

use crate::stores::{self, OpenError};
use herald_config::{Config, Home};
use herald_session::{BuildError, Built, Host, HostBuilder, ModelChoice, Platform, toolsets};
use std::sync::Arc;
use std::time::Duration;

/// Why no host could be opened; the text is said to the user.
#[derive(Debug, thiserror::Error)]
pub enum InteractiveError {
    #[error(transparent)]
    Build(#[from] BuildError),
    #[error(transparent)]
    Store(#[from] OpenError),
}

/// A door's started host and what it was opened with.
pub struct Interactive {
    pub host: Arc<Host>,
    pub config: Config,
    /// The tools its sessions offer: the asked toolsets', or the platform's.
    pub tool_names: Vec<String>,
    /// Asked toolsets that name nothing herald has, MCP servers and plugins included.
    pub unknown_toolsets: Vec<String>,
    traces: Option<herald_trace::Guard>,
}

/// How a door opens its host.
pub struct HostFor<'a> {
    pub home: &'a Home,
    pub platform: Platform,
    pub choice: ModelChoice<'a>,
    /// Whether SIGHUP reloads `.env`, the plugins and MCP servers (not for a terminal
    /// program, where a hangup means the terminal went away).
    pub reload_on_sighup: bool,
    /// Toolsets asked for (`-t`); `None`: the platform's.
    pub toolsets: Option<Vec<String>>,
}

impl<'a> HostFor<'a> {
    /// A serving door (`herald rpc`, `herald acp`): the configured model, the
    /// platform's toolsets, reloaded on SIGHUP.
    pub fn serving(home: &'a Home, platform: Platform) -> HostFor<'a> {
        HostFor {
            home,
            platform,
            choice: ModelChoice::default(),
            reload_on_sighup: true,
            toolsets: None,
        }
    }
}

/// Builds (does not start) a door's host on the store the home keeps, and the toolsets
/// it asks for: what `open_interactive` starts, and what `herald acp --check` checks.
pub async fn build_interactive(
    door: HostFor<'_>,
) -> Result<(Built, Vec<String>), InteractiveError> {
    let config = herald_session::builder::prepare(door.home)?;
    let store = stores::open_sessions(&config.store, door.home, door.home, None).await?;
    let asked = door
        .toolsets
        .unwrap_or_else(|| door.platform.default_toolsets(&config));
    let built = HostBuilder::new(door.home, door.platform)
        .model(door.choice)
        .reload_on_sighup(door.reload_on_sighup)
        .loaded(config)
        .store(store)
        .build()?;
    Ok((built, asked))
}

/// Builds a door's host on the store the home keeps, with its tools, and starts it
/// and trace export (within the async runtime).
pub async fn open_interactive(door: HostFor<'_>) -> Result<Interactive, InteractiveError> {
    let (built, asked) = build_interactive(door).await?;
    let (tool_names, unknown) = toolsets::resolve(&asked);
    let traces = crate::traces::start(&built.config.tracing);
    let config = built.config.clone();
    let host = built.start().await;
    // MCP servers and plugin toolsets are known once the host started.
    let unknown_toolsets = unknown
        .into_iter()
        .filter(|u| !host.runtime().names_outside_toolset(u))
        .collect();
    Ok(Interactive {
        host,
        config,
        tool_names,
        unknown_toolsets,
        traces,
    })
}

impl Interactive {
    /// Every run stopped, each given `within` to end on its own.
    pub async fn stop_runs(&self, within: Duration) {
        self.host.stop_all(within).await;
    }

    /// At the end, once the runs are stopped: the traces sent.
    pub async fn finish(self) {
        if let Some(t) = self.traces {
            t.finish().await;
        }
    }
}
