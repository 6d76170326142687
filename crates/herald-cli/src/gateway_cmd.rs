//! `herald gateway run`: load config (writing the default on a first start), open the
//! store, bind, serve until SIGINT/SIGTERM.

use anyhow::Context;
use herald_config::default_config::write_default_config;
use herald_config::{Config, Home, load_dotenv, process_env};
use herald_deliver::{TargetSet, TargetSettings};
use herald_gateway::{Gateway, bind, router, serve};
use herald_store::Store;
use herald_webhook::SystemClock;
use std::process::ExitCode;
use std::sync::Arc;

pub fn run(home: &Home) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(home.root())
        .with_context(|| format!("cannot create home {}", home.root().display()))?;
    std::fs::create_dir_all(home.scripts_dir())
        .with_context(|| format!("cannot create {}", home.scripts_dir().display()))?;
    load_dotenv(home)?;
    if !home.config_file().exists() {
        write_default_config(home)?;
        print_first_start(home);
    }
    let config = match Config::load(home, &process_env) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("herald: configuration error:\n{e}");
            eprintln!("herald: not serving; fix the configuration and start again");
            return Ok(ExitCode::FAILURE);
        }
    };
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    if !config.webhook.enabled {
        eprintln!(
            "herald: the webhook platform is not enabled: set `platforms.webhook.enabled: true` in {} \
             (or WEBHOOK_ENABLED=true in {})",
            home.config_file().display(),
            home.env_file().display()
        );
        return Ok(ExitCode::FAILURE);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("herald-worker")
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(serve_gateway(config))
}

async fn serve_gateway(config: Config) -> anyhow::Result<ExitCode> {
    let store = Store::open(&config.home.database_file())?;
    let targets = TargetSet::build(&TargetSettings {
        platforms: &config.platforms,
        env: &process_env,
    });
    tracing::info!(targets = ?targets.names(), "delivery targets ready");
    let gateway = Arc::new(Gateway::new(&config, store, targets, Arc::new(SystemClock)));
    let listeners = match bind(config.webhook.host.as_deref(), config.webhook.port).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("herald: {e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let routes = gateway.registry.current();
    for listener in &listeners {
        if let Ok(addr) = listener.local_addr() {
            println!(
                "herald: webhook listening on http://{addr} (routes: {})",
                routes.len()
            );
        }
    }
    tracing::info!(routes = ?routes.names(), "gateway started");
    drop(routes);
    serve(listeners, router(gateway), shutdown_signal()).await?;
    tracing::info!("gateway stopped");
    Ok(ExitCode::SUCCESS)
}

async fn shutdown_signal() {
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

fn print_first_start(home: &Home) {
    let config = home.config_file();
    println!(
        "herald: first start: wrote a default configuration to {}",
        config.display()
    );
    println!(
        "herald: it enables the webhook listener on 127.0.0.1:8644 with a generated secret and one example route."
    );
    println!("herald: send a signed test request with:");
    println!();
    println!(
        "  SECRET=$(sed -n 's/^ *secret: \"\\(.*\\)\"$/\\1/p' '{}')",
        config.display()
    );
    println!("  BODY='{{\"hello\": \"world\"}}'");
    println!(
        "  SIG=$(printf '%s' \"$BODY\" | openssl dgst -sha256 -hmac \"$SECRET\" | sed 's/^.* //')"
    );
    println!("  curl -i http://127.0.0.1:8644/webhooks/example -H 'X-GitHub-Event: ping' \\");
    println!("       -H \"X-Hub-Signature-256: sha256=$SIG\" -d \"$BODY\"");
    println!();
}
