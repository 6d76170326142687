//! The dashboard: `herald dashboard token`, and where the gateway serves it (the API
//! listener, else the webhook listener; never without a credential on an address
//! others can reach).

use herald_config::{Config, Home};
use herald_dashboard::{Credentials, Dashboard, DashboardParts};
use herald_gateway::Gateway;
use herald_session::Host;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(clap::Subcommand, Debug)]
pub enum DashboardCommand {
    /// Print the dashboard's login token (made now when there is none; `--new` makes
    /// another, and the old one stops working).
    Token {
        #[arg(long)]
        new: bool,
    },
}

pub fn run(home: &Home, command: DashboardCommand) -> anyhow::Result<ExitCode> {
    match command {
        DashboardCommand::Token { new } => {
            std::fs::create_dir_all(home.root())?;
            let token = herald_dashboard::token::ensure(home.root(), new)?;
            outln!("{token}");
            if let Some(g) = crate::gateway_status::running_gateway(home) {
                let at = g.api.first().or(g.webhook.first());
                if let Some(url) = at {
                    eprintln!("Log in at {url}/dashboard/ with it.");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Which listener serves the dashboard.
pub enum Mount {
    Api(axum::Router),
    Webhook(axum::Router),
}

/// The dashboard's routes and where they go, or `None` (said once) when it cannot be
/// served safely.
pub fn mount(
    config: &Config,
    gateway: Option<Arc<Gateway>>,
    hosts: Vec<Arc<Host>>,
    webhook_base: String,
) -> Option<Mount> {
    let api = config.api_server.enabled;
    let host = match api {
        true => Some(config.api_server.host.as_str()),
        false => config.webhook.host.as_deref(),
    };
    let loopback = host.is_some_and(herald_config::is_loopback_name);
    let credentials = Credentials {
        api_key: api.then(|| config.api_server.key.clone()).flatten(),
        home: config.home.root().to_path_buf(),
    };
    if !api && !loopback && !credentials.any() {
        tracing::warn!(
            "the dashboard is not served: the webhook listener binds an address others can reach and there is no dashboard token (run `herald dashboard token`, then restart)"
        );
        return None;
    }
    let parts = DashboardParts {
        inbox: gateway.map(|g| g.inbox_view()),
        hosts,
        subscriptions_file: config.home.subscriptions_file(),
        config_routes: config.routes.iter().map(|r| r.name.clone()).collect(),
        webhook_base,
        credentials,
        loopback,
    };
    let router = herald_dashboard::router(Dashboard::start(parts));
    Some(match api {
        true => Mount::Api(router),
        false => Mount::Webhook(router),
    })
}
