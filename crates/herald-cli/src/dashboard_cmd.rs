//! `herald dashboard token` (where the gateway serves the dashboard is herald-app's
//! server's choice).

use herald_config::Home;
use std::process::ExitCode;

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
            if let Some(g) = herald_app::gateway_state::running_gateway(home) {
                let at = g.api.first().or(g.webhook.first());
                if let Some(url) = at {
                    eprintln!("Log in at {url}/dashboard/ with it.");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
