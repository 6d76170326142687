//! The session host of the interactive front doors that serve a program (`herald rpc`,
//! `herald acp`): the home's config, model and `state.db`, the `hermes-cli` tools.

use anyhow::Context;
use herald_config::{Config, Home, load_dotenv, process_env};
use herald_session::{Host, ModelChoice, Platform, Runtime, toolsets};
use herald_store::SessionStore;
use std::sync::Arc;

/// The host, or why the model could not be chosen (said to the user, exit 1).
pub fn interactive_host(home: &Home) -> anyhow::Result<Result<Arc<Host>, String>> {
    load_dotenv(home)?;
    crate::bundled_skills::install_quietly(home);
    let config = Config::load(home, &process_env)
        .map_err(|e| anyhow::anyhow!("configuration error:\n{e}"))?;
    let choice = ModelChoice {
        model: None,
        provider: None,
    };
    let runtime = match Runtime::build(home, &config, Platform::Cli, choice) {
        Ok(r) => r,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let store = SessionStore::open(&home.state_db_file())
        .with_context(|| format!("cannot open {}", home.state_db_file().display()))?;
    Ok(Ok(Host::new(Arc::new(runtime), store)))
}

/// The tools an interactive session is offered.
pub fn interactive_tools() -> Vec<String> {
    toolsets::resolve(&["hermes-cli".to_owned()]).0
}
