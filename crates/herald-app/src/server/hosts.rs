//! The session hosts `herald gateway run` serves from: the webhook runs' host (and one per
//! `/p/<profile>/` on first use) and the API's, sharing one provider client and one
//! session store.

use herald_config::{Config, Home, StoreSettings, process_env};
use herald_gateway::{ProfileTemplates, RunTemplate};
use herald_session::{BuildError, Built, Host, HostBuilder, LlmClient, Platform};
use herald_store::SessionStore;
use std::sync::Arc;

/// The host of `platform`'s runs on `home`, built (not started), or why there is none
/// (no model, an unsupported terminal backend).
pub(super) fn build_host(
    home: &Home,
    platform: Platform,
    config: &Config,
    client: &LlmClient,
    store: SessionStore,
) -> Result<Built, BuildError> {
    HostBuilder::new(home, platform)
        .loaded(config.clone())
        .client(client.clone())
        .store(store)
        .build()
}

/// The webhook runs' host, or `None` after saying why agent runs are off (accepted
/// agent-route events then wait in the inbox until it is fixed).
pub(super) fn webhook_host(
    config: &Config,
    client: &LlmClient,
    store: SessionStore,
) -> Option<Built> {
    if !config.webhook.enabled {
        return None;
    }
    match build_host(&config.home, Platform::Webhook, config, client, store) {
        Ok(built) => Some(built),
        Err(e) => {
            tracing::warn!(
                "agent runs are off: {e}; accepted agent-route events wait in the inbox \
                 (direct deliveries work)"
            );
            None
        }
    }
}

/// A chat bot's host (`platform`: Telegram, Slack), or `None` after saying why the
/// bot is off (no model: the token still serves `deliver:`).
pub(super) fn chat_host(
    config: &Config,
    platform: Platform,
    client: &LlmClient,
    store: SessionStore,
) -> Option<Built> {
    let configured = match platform {
        Platform::Telegram => config.telegram.is_some(),
        Platform::Slack => config.slack.is_some(),
        Platform::Discord => config.discord.is_some(),
        _ => false,
    };
    if !configured {
        return None;
    }
    let name = platform.name();
    match build_host(&config.home, platform, config, client, store) {
        Ok(built) => Some(built),
        Err(e) => {
            tracing::warn!(
                "the {name} bot is off (nobody writing to it is answered): {e}; `deliver: {name}` works"
            );
            None
        }
    }
}

/// What a webhook host's runs use: the platform's toolsets and the working folder.
pub(super) fn run_template(config: &Config, host: Arc<Host>) -> RunTemplate {
    let runtime = host.runtime();
    let cwd = runtime
        .cwd
        .clone()
        .unwrap_or_else(|| runtime.home.root().to_path_buf());
    RunTemplate {
        host,
        platform_toolsets: config.platform_toolsets.webhook.clone(),
        cwd,
    }
}

/// Run templates for `/p/<profile>/` events: the profile's own `config.yaml`, model,
/// skills, SOUL.md and Python plugins (reloaded on SIGHUP) under
/// `<home>/profiles/<name>/`.
pub(super) fn profile_templates(
    home: Home,
    client: LlmClient,
    store: StoreSettings,
) -> ProfileTemplates {
    Box::new(move |name: String| {
        let home = home.clone();
        let client = client.clone();
        let store = store.clone();
        Box::pin(async move {
            let built = profile_host(&home, &name, &client, &store)
                .await
                .map_err(|e| tracing::warn!(profile = name, "{e}"))
                .ok()?;
            let config = built.config.clone();
            Some(run_template(&config, built.start().await))
        })
    })
}

/// The host of profile `name`'s webhook runs, built; why not, as text.
async fn profile_host(
    home: &Home,
    name: &str,
    client: &LlmClient,
    store: &StoreSettings,
) -> Result<Built, String> {
    let profile_home = Home::new(home.profiles_dir().join(name));
    let config = Config::load(&profile_home, &process_env)
        .map_err(|e| format!("profile configuration error: {e}"))?;
    let sessions = crate::stores::open_sessions(store, &profile_home, home, Some(name))
        .await
        .map_err(|e| format!("profile store: {e}"))?;
    build_host(&profile_home, Platform::Webhook, &config, client, sessions)
        .map_err(|e| format!("profile model: {e}"))
}
