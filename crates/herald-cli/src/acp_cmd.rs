//! `herald acp`: the ACP server for IDEs on stdio; `--check` and `--setup` (acp.md §6).

use anyhow::Context;
use herald_acp::AcpServer;
use herald_app::HostFor;
use herald_config::Home;
use herald_config::StoreBackend;
use herald_session::{Built, Host, Platform};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct AcpArgs {
    /// Check, without any network call, that the config parses, a provider credential
    /// resolves and the store opens; exit 1 with the reason when not.
    #[arg(long, conflicts_with = "setup")]
    check: bool,
    /// Set up the provider and model interactively (the `hermes-setup` auth method).
    #[arg(long)]
    setup: bool,
}

/// The provider, when its credential resolves.
fn resolved_provider(host: &Host) -> Option<String> {
    let runtime = host.runtime();
    runtime
        .credential_resolves()
        .then(|| runtime.provider.clone())
}

/// Builds the host as serving would, on the store the home keeps (`state.db`, or
/// PostgreSQL with `store.url`), without starting it.
fn check(home: &Home) -> anyhow::Result<ExitCode> {
    let door = HostFor::serving(home, Platform::Acp);
    let built = herald_app::command_runtime()?.block_on(herald_app::build_interactive(door));
    match built {
        Ok((built, _)) => Ok(report(&built)),
        Err(why) => {
            eprintln!("herald ACP check failed: {why}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// The check's verdict on a host that could be built.
fn report(built: &Built) -> ExitCode {
    let host = &built.host;
    let runtime = host.runtime();
    let Some(provider) = resolved_provider(host) else {
        eprintln!(
            "herald ACP check failed: no credential for provider {} (model {}): set its API key or run `herald acp --setup`",
            runtime.provider,
            runtime.endpoint().model
        );
        return ExitCode::FAILURE;
    };
    let sessions = match &built.config.store.backend {
        StoreBackend::Postgres(_) => "the shared store (store.url)".to_owned(),
        _ => runtime.home.state_db_file().display().to_string(),
    };
    outln!(
        "herald ACP check OK: model {} on provider {provider}, sessions in {sessions}",
        runtime.endpoint().model,
    );
    ExitCode::SUCCESS
}

pub fn run(home: &Home, args: AcpArgs) -> anyhow::Result<ExitCode> {
    if args.setup {
        return crate::setup_cmd::run_model_only(home);
    }
    if args.check {
        return check(home);
    }
    let tokio_rt = herald_app::runtime().context("cannot start the async runtime")?;
    let served = tokio_rt.block_on(async {
        let door = HostFor::serving(home, Platform::Acp);
        let opened = match herald_app::open_interactive(door).await {
            Ok(o) => o,
            Err(e) => {
                eprintln!("herald: {e}");
                return Ok(false);
            }
        };
        let host = opened.host.clone();
        let provider = resolved_provider(&host);
        let server = AcpServer::new(host.clone(), opened.tool_names.clone(), provider);
        // Until stdin closes or a SIGTERM or SIGINT comes; then every run is stopped.
        let served = tokio::select! {
            served = herald_acp::serve_stdio(server.clone()) => {
                served.map_err(|e| anyhow::anyhow!("ACP connection: {e}"))
            }
            () = herald_app::signals::shutdown_signal() => Ok(()),
        };
        opened.stop_runs(herald_app::rpc_server::STOP_WITHIN).await;
        server.finalize_sessions().await;
        opened.finish().await;
        served.map(|()| true)
    });
    // stdin's reader may still be blocked in a read: do not wait for it.
    tokio_rt.shutdown_background();
    Ok(match served? {
        true => ExitCode::SUCCESS,
        false => ExitCode::FAILURE,
    })
}
