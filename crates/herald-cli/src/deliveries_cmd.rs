//! `herald deliveries list`: every direct delivery with its outcome.

use crate::stores::{self, Access};
use clap::Subcommand;
use herald_config::Home;
use herald_store::DeliveryQuery;
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
    let query = DeliveryQuery {
        route,
        status,
        limit: Some(limit),
        ..DeliveryQuery::default()
    };
    let rt = stores::runtime()?;
    let items = match stores::open(home, Access::Read, &rt)? {
        Some(store) => rt.block_on(store.deliveries(query))?,
        None => Vec::new(),
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
