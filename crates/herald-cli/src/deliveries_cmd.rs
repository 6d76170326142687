//! `herald deliveries list`: every direct delivery with its outcome.

use anyhow::Context;
use clap::Subcommand;
use herald_config::Home;
use herald_store::{DeliveryQuery, StoreReader};
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum DeliveriesCommand {
    /// List deliveries, newest first.
    List {
        /// Only this route's deliveries.
        #[arg(long)]
        route: Option<String>,
        /// Only `delivered` or `failed`.
        #[arg(long)]
        status: Option<String>,
        /// At most this many deliveries.
        #[arg(long, default_value_t = 100)]
        limit: u32,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(home: &Home, command: DeliveriesCommand) -> anyhow::Result<ExitCode> {
    let DeliveriesCommand::List {
        route,
        status,
        limit,
        json,
    } = command;
    let path = home.database_file();
    let items = if path.exists() {
        let reader = StoreReader::open(&path)
            .with_context(|| format!("cannot open the store at {}", path.display()))?;
        reader.deliveries(&DeliveryQuery {
            route,
            status,
            limit: Some(limit),
            ..DeliveryQuery::default()
        })?
    } else {
        Vec::new()
    };
    if json {
        outln!("{}", serde_json::to_string_pretty(&items)?);
        return Ok(ExitCode::SUCCESS);
    }
    if items.is_empty() {
        outln!("No deliveries.");
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|d| {
            vec![
                d.id.to_string(),
                d.status.clone(),
                d.route.clone(),
                d.target.clone(),
                d.delivery_id.clone(),
                crate::inbox_cmd::time(d.created_at_ms),
                d.attempts.to_string(),
                format!("{} ms", d.latency_ms),
                d.error
                    .clone()
                    .unwrap_or_default()
                    .chars()
                    .take(80)
                    .collect(),
            ]
        })
        .collect();
    crate::inbox_cmd::print_rows(
        &[
            "ID",
            "STATUS",
            "ROUTE",
            "TARGET",
            "DELIVERY ID",
            "AT",
            "ATTEMPTS",
            "LATENCY",
            "ERROR",
        ],
        &rows,
    );
    Ok(ExitCode::SUCCESS)
}
