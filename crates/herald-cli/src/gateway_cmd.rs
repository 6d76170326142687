//! `herald gateway run`: load config (writing the default on a first start), open the
//! store, bind, serve until SIGINT/SIGTERM.

use anyhow::Context;
use herald_config::default_config::write_default_config;
use herald_config::{Config, ConnectionSettings, Home, StoreSettings, load_dotenv, process_env};
use herald_deliver::{TargetSet, TargetSettings};
use herald_gateway::{Gateway, ProfileTemplates, RunTemplate, Workers, router};
use herald_http::{ConnectionLimits, bind, serve};
use herald_session::{Built, Host, HostBuilder, LlmClient, Platform, start_together};
use herald_store::SessionStore;
use herald_webhook::SystemClock;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

pub fn run(home: &Home) -> anyhow::Result<ExitCode> {
    if !home.root().exists() && offer_hermes_import(home) {
        return Ok(ExitCode::FAILURE);
    }
    home.create()
        .with_context(|| format!("cannot create home {}", home.root().display()))?;
    home.create_scripts_dir()
        .with_context(|| format!("cannot create {}", home.scripts_dir().display()))?;
    load_dotenv(home)?;
    herald_session::bundled_skills::install_quietly(home);
    let first_start = !home.config_file().exists();
    if first_start {
        write_default_config(home)?;
    }
    let config = match Config::load(home, &process_env) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("herald: configuration error:\n{e}");
            eprintln!("herald: not serving; fix the configuration and start again");
            return Ok(ExitCode::FAILURE);
        }
    };
    if first_start {
        print_first_start(&config)?;
    }
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    if !config.hermes_only.is_empty() {
        tracing::info!(
            "Hermes settings herald does not implement (ignored): {}",
            config.hermes_only.join(", ")
        );
    }
    if !config.start_refusals.is_empty() {
        for refusal in &config.start_refusals {
            eprintln!("herald: {refusal}");
        }
        eprintln!("herald: not serving; fix the configuration and start again");
        return Ok(ExitCode::FAILURE);
    }
    let runtime = herald_app::runtime().context("cannot start the async runtime")?;
    let client = LlmClient::new();
    // One session store for the home, shared by every host of this process.
    let sessions = runtime.block_on(crate::stores::open_sessions(
        &config.store,
        home,
        home,
        None,
    ))?;
    let template = if config.webhook.enabled {
        match webhook_host(home, &config, &client, sessions.clone()) {
            Ok(built) => Some(built),
            Err(e) => {
                tracing::warn!(
                    "agent runs are off: {e}; accepted agent-route events wait in the inbox \
                     (direct deliveries work)"
                );
                None
            }
        }
    } else {
        None
    };
    let fronts = Fronts {
        webhook_host: template,
        client,
        sessions,
    };
    runtime.block_on(serve_gateway(config, fronts))
}

/// What the listening front doors are built from.
struct Fronts {
    /// The host of webhook runs, not started yet.
    webhook_host: Option<Built>,
    client: LlmClient,
    sessions: SessionStore,
}

/// The host of webhook-started agent runs, built (not started), or why there is none
/// (no model, an unsupported terminal backend); accepted events then wait in the inbox
/// until it is fixed. Every host of the process shares one provider client.
fn webhook_host(
    home: &Home,
    config: &Config,
    client: &LlmClient,
    store: SessionStore,
) -> Result<Built, herald_session::BuildError> {
    HostBuilder::new(home, Platform::Webhook)
        .loaded(config.clone())
        .client(client.clone())
        .store(store)
        .build()
}

/// What a webhook host's runs use: the platform's toolsets and the working folder.
fn run_template(config: &Config, host: Arc<Host>) -> RunTemplate {
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
fn profile_templates(home: Home, client: LlmClient, store: StoreSettings) -> ProfileTemplates {
    Box::new(move |name: String| {
        let home = home.clone();
        let client = client.clone();
        let store = store.clone();
        Box::pin(async move {
            let profile_home = Home::new(home.profiles_dir().join(&name));
            let config = Config::load(&profile_home, &process_env)
                .map_err(|e| format!("profile configuration error: {e}"));
            let store = match &config {
                Ok(_) => crate::stores::open_sessions(&store, &profile_home, &home, Some(&name))
                    .await
                    .map_err(|e| format!("profile store: {e}")),
                Err(e) => Err(e.clone()),
            };
            let built = config.and_then(|config| {
                webhook_host(&profile_home, &config, &client, store?)
                    .map_err(|e| format!("profile model: {e}"))
            });
            let built = built
                .map_err(|e| tracing::warn!(profile = name, "{e}"))
                .ok()?;
            let config = built.config.clone();
            Some(run_template(&config, built.start().await))
        })
    })
}

async fn serve_gateway(config: Config, fronts: Fronts) -> anyhow::Result<ExitCode> {
    let traces = herald_app::traces::start(&config.tracing);
    let served = serve_fronts(config, fronts).await;
    if let Some(t) = traces {
        t.finish().await;
    }
    served
}

async fn serve_fronts(config: Config, fronts: Fronts) -> anyhow::Result<ExitCode> {
    let api_host = match config.api_server.enabled {
        true => match api_host(&config, &fronts) {
            Ok(built) => Some(built),
            Err(e) => {
                eprintln!("herald: {e}");
                return Ok(ExitCode::FAILURE);
            }
        },
        false => None,
    };
    // The webhook runs' host and the API's share one plugin host and its reload.
    let has_webhook_host = fronts.webhook_host.is_some();
    let mut hosts = start_together(fronts.webhook_host.into_iter().chain(api_host).collect())
        .await
        .into_iter();
    let template = match has_webhook_host {
        true => hosts.next().map(|host| run_template(&config, host)),
        false => None,
    };
    // The dashboard shows the runs of both hosts.
    let mut shown_hosts: Vec<Arc<Host>> = template.iter().map(|t| t.host.clone()).collect();
    let api = match hosts.next() {
        Some(host) => match prepare_api(&config, {
            shown_hosts.push(host.clone());
            host
        })
        .await
        {
            Ok(api) => Some(api),
            Err(e) => {
                eprintln!("herald: {e}");
                return Ok(ExitCode::FAILURE);
            }
        },
        None => None,
    };
    let webhook = match config.webhook.enabled {
        true => match prepare_webhook(&config).await? {
            Some(w) => Some(w),
            None => return Ok(ExitCode::FAILURE),
        },
        false => None,
    };
    let webhook_urls = webhook.as_ref().map(|w| w.urls.clone()).unwrap_or_default();
    let webhook_base = webhook_urls
        .first()
        .cloned()
        .unwrap_or_else(|| format!("http://localhost:{}", config.webhook.port));
    let dashboard = crate::dashboard_cmd::mount(
        &config,
        webhook.as_ref().map(|w| w.gateway.clone()),
        shown_hosts,
        webhook_base,
    );
    let (dashboard_on_api, dashboard_on_webhook) = match dashboard {
        Some(crate::dashboard_cmd::Mount::Api(r)) => (Some(r), None),
        Some(crate::dashboard_cmd::Mount::Webhook(r)) => (None, Some(r)),
        None => (None, None),
    };
    let api_urls = api.as_ref().map(|a| a.urls.clone()).unwrap_or_default();
    let _state = crate::gateway_status::record(&config.home, webhook_urls, api_urls)?;
    let workers = match (&webhook, template) {
        (Some(w), Some(template)) => Some(
            Workers::start(
                w.gateway.clone(),
                template,
                Some(profile_templates(
                    config.home.clone(),
                    fronts.client.clone(),
                    config.store.clone(),
                )),
                &config.webhook.workers,
                config.store.lease,
            )
            .await?,
        ),
        _ => None,
    };
    // One signal starts every drain at once, so the grace period bounds the whole stop.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        crate::systemd::stopping();
        let _ = stop_tx.send(true);
    });
    crate::systemd::ready(webhook.as_ref().map(|w| w.gateway.clone()));
    let drain_workers = {
        let rx = stop_rx.clone();
        async move {
            if let Some(workers) = workers {
                stopped(rx).await;
                workers.shutdown().await;
            }
        }
    };
    if let Some(w) = &webhook {
        herald_gateway::retention::spawn(w.gateway.store.clone(), config.inbox.retention.clone());
    }
    if config.metrics.enabled {
        herald_metrics::enable();
        if let Some(w) = &webhook {
            w.gateway.measure_inbox();
        }
    }
    let grace = Duration::from_secs(config.webhook.workers.shutdown_grace_secs);
    let limits = connection_limits(&config.webhook.connections, grace, "webhook");
    let api_limits = connection_limits(&config.api_server.connections, grace, "api");
    let serve_webhook = async {
        match webhook {
            Some(w) => {
                let loopback = config
                    .webhook
                    .host
                    .as_deref()
                    .is_some_and(herald_config::is_loopback_name);
                let app = crate::metrics_wiring::health_guarded(router(w.gateway), loopback);
                let app = crate::metrics_wiring::with_metrics(app, &config.metrics, loopback);
                let app = with_dashboard(app, dashboard_on_webhook);
                serve(w.listeners, app, limits, stopped(stop_rx.clone())).await
            }
            None => Ok(()),
        }
    };
    let serve_api = async {
        match api {
            Some(a) => {
                let rx = stop_rx.clone();
                let api = a.api.clone();
                let draining = async move {
                    stopped(rx).await;
                    // Half the grace for the runs to end, the rest for their answers.
                    api.stop(grace / 2).await;
                };
                let loopback = herald_config::is_loopback_name(&config.api_server.host);
                let app = herald_trace::traced(herald_api::router(a.api), "api");
                let app = herald_metrics::counted(app, "api");
                let app = crate::metrics_wiring::health_guarded(app, loopback);
                let app = crate::metrics_wiring::with_metrics(app, &config.metrics, loopback);
                let app = with_dashboard(app, dashboard_on_api);
                serve(a.listeners, app, api_limits, draining).await
            }
            None => Ok(()),
        }
    };
    let (webhook_served, api_served, ()) = tokio::join!(serve_webhook, serve_api, drain_workers);
    webhook_served?;
    api_served?;
    tracing::info!("gateway stopped");
    Ok(ExitCode::SUCCESS)
}

async fn stopped(mut rx: tokio::sync::watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

/// The webhook front door, bound.
struct WebhookFront {
    gateway: Arc<Gateway>,
    listeners: Vec<tokio::net::TcpListener>,
    urls: Vec<String>,
}

/// Opens the inbox and binds the webhook listener (`None` after saying why not).
async fn prepare_webhook(config: &Config) -> anyhow::Result<Option<WebhookFront>> {
    let store = crate::stores::open_for_gateway(config).await?;
    if store.shared() {
        // The subscriptions every instance shares, in this home's file before the
        // route table is built from it.
        let path = config.home.subscriptions_file();
        if let Err(e) = herald_admin::shared_subscriptions::pull(&store, &path).await {
            tracing::warn!(error = %e, "the shared subscriptions could not be read");
        }
        herald_admin::shared_subscriptions::keep_in_step(store.clone(), path);
    }
    let targets = TargetSet::build(&TargetSettings {
        platforms: &config.platforms,
        env: &process_env,
    });
    tracing::info!(targets = ?targets.names(), "delivery targets ready");
    let findings = herald_gateway::findings::gather(config, &targets);
    let gateway = Arc::new(Gateway::new(config, store, targets, Arc::new(SystemClock)));
    herald_gateway::live_targets::reload_on_sighup(gateway.targets.clone(), config.home.clone());
    let from_env = herald_config::config::webhook_port_from_env(&process_env).is_some();
    let setting = match from_env {
        true => "WEBHOOK_PORT",
        false => "platforms.webhook.extra.port",
    };
    let listeners = match bind(config.webhook.host.as_deref(), config.webhook.port, setting).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("herald: {e}");
            explain_busy_port(&config.home, config.webhook.port, from_env);
            return Ok(None);
        }
    };
    let routes = gateway.registry.current();
    let urls = urls_of(&listeners);
    for url in &urls {
        outln!(
            "herald: webhook listening on {url} (routes: {})",
            routes.len()
        );
    }
    tracing::info!(routes = ?routes.names(), "gateway started");
    drop(routes);
    print_findings(&findings);
    Ok(Some(WebhookFront {
        gateway,
        listeners,
        urls,
    }))
}

/// Where the webhook port that could not be bound came from, and the herald gateway
/// already serving this home when `gateway.json` names a live one.
fn explain_busy_port(home: &Home, port: u16, from_env: bool) {
    if from_env {
        eprintln!(
            "herald: port {port} comes from WEBHOOK_PORT ({}, or the environment; with WEBHOOK_ENABLED=true it wins over platforms.webhook.extra.port)",
            home.env_file().display()
        );
    } else {
        eprintln!(
            "herald: port {port} comes from platforms.webhook.extra.port in {} (8644 when it is not set)",
            home.config_file().display()
        );
    }
    if let Some(running) = crate::gateway_status::running_gateway(home) {
        let urls: Vec<&str> = running
            .webhook
            .iter()
            .chain(&running.api)
            .map(String::as_str)
            .collect();
        eprintln!(
            "herald: a herald gateway already runs on this home: pid {}, since {}, listening on {} (`herald gateway status`)",
            running.pid,
            running.started_at,
            urls.join(", ")
        );
    }
}

fn urls_of(listeners: &[tokio::net::TcpListener]) -> Vec<String> {
    listeners
        .iter()
        .filter_map(|l| l.local_addr().ok())
        .map(|addr| format!("http://{addr}"))
        .collect()
}

/// The API front door, bound.
struct ApiFront {
    api: Arc<herald_api::Api>,
    listeners: Vec<tokio::net::TcpListener>,
    urls: Vec<String>,
}

/// The API's session host, built (not started).
fn api_host(config: &Config, fronts: &Fronts) -> Result<Built, herald_session::BuildError> {
    HostBuilder::new(&config.home, Platform::Api)
        .loaded(config.clone())
        .client(fronts.client.clone())
        .store(fronts.sessions.clone())
        .build()
}

/// The API on its started host, with its listener bound; why not, as text.
async fn prepare_api(config: &Config, host: Arc<Host>) -> anyhow::Result<ApiFront> {
    let settings = config.api_server.clone();
    let api = herald_api::Api::new(host, settings.clone(), None)?;
    let listeners = bind(
        Some(&settings.host),
        settings.port,
        "platforms.api_server.extra.port",
    )
    .await?;
    let urls = urls_of(&listeners);
    for url in &urls {
        outln!("herald: OpenAI-compatible API listening on {url}/v1");
    }
    Ok(ApiFront {
        api,
        listeners,
        urls,
    })
}

/// The start's last words: each mistake herald serves through, impossible to miss.
fn print_findings(findings: &[String]) {
    if findings.is_empty() {
        return;
    }
    eprintln!(
        "herald: {} configuration finding(s); herald serves anyway (`herald config check` lists them):",
        findings.len()
    );
    for finding in findings {
        eprintln!("herald:   - {finding}");
    }
}

/// A port's connection bounds (`platforms.webhook.extra` or
/// `platforms.api_server.extra`), within the descriptor limit.
fn connection_limits(
    c: &ConnectionSettings,
    shutdown_grace: Duration,
    door: &'static str,
) -> ConnectionLimits {
    ConnectionLimits {
        door,
        max_connections: usize::try_from(c.max_connections).unwrap_or(usize::MAX),
        header_timeout: Duration::from_secs(c.header_timeout_secs),
        idle_timeout: Duration::from_secs(c.idle_timeout_secs),
        shutdown_grace,
    }
    .within_fd_limit()
}

pub(crate) async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutting down: no new requests, finishing the ones in flight");
}

/// A Hermes user's first start: a default config written now would be kept by the later
/// `herald setup --from-hermes` (it never overwrites), so the Hermes model, routes and API
/// server would never come across. Nothing is written and nothing served: say what to run.
/// True when a Hermes home was found (the start ends there).
fn offer_hermes_import(home: &Home) -> bool {
    let hermes = crate::hermes_import::default_hermes_home();
    if !hermes.join("config.yaml").is_file() {
        return false;
    }
    outln!(
        "herald: found a Hermes home at {} (not read: herald uses {}, which does not exist yet).",
        hermes.display(),
        home.root().display()
    );
    outln!("herald: nothing was written and nothing is served. Either:");
    outln!(
        "herald:   herald setup --from-hermes    bring its config, .env, subscriptions, scripts, skills and plugins over, then `herald gateway run`"
    );
    outln!(
        "herald:   herald gateway setup          start without it (asks the port, secret, target and model), then `herald gateway run`"
    );
    true
}

fn print_first_start(config: &Config) -> anyhow::Result<()> {
    outln!(
        "herald: first start: wrote a default configuration to {}",
        config.home.config_file().display()
    );
    outln!(
        "herald: it enables the webhook listener on 127.0.0.1:{} with a generated secret and one example route.",
        config.webhook.port
    );
    let mut text = Vec::new();
    crate::setup_cmd::print_try_it(&mut text, config, true)?;
    out!("{}", String::from_utf8_lossy(&text));
    Ok(())
}

/// `app` with the dashboard's routes when it is served on this listener.
fn with_dashboard(app: axum::Router, dashboard: Option<axum::Router>) -> axum::Router {
    match dashboard {
        Some(d) => app.merge(d),
        None => app,
    }
}
