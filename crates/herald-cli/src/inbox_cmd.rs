//! `herald inbox list|show`: what is waiting in the durable inbox.

use anyhow::Context;
use clap::Subcommand;
use herald_config::Home;
use herald_store::{InboxItem, InboxQuery, StoreReader};
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum InboxCommand {
    /// List inbox entries, newest first.
    List {
        /// Only entries in this state (queued, running, delivered, failed, dead).
        #[arg(long)]
        state: Option<String>,
        /// Only entries of this route.
        #[arg(long)]
        route: Option<String>,
        /// At most this many entries.
        #[arg(long, default_value_t = 100)]
        limit: u32,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show one entry in full.
    Show {
        /// The inbox id (first column of `inbox list`).
        id: i64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(home: &Home, command: InboxCommand) -> anyhow::Result<ExitCode> {
    let path = home.database_file();
    let reader = if path.exists() {
        Some(
            StoreReader::open(&path)
                .with_context(|| format!("cannot open the inbox at {}", path.display()))?,
        )
    } else {
        None
    };
    match command {
        InboxCommand::List {
            state,
            route,
            limit,
            json,
        } => {
            let items = match &reader {
                Some(r) => r.list(&InboxQuery {
                    state,
                    route,
                    limit: Some(limit),
                })?,
                None => Vec::new(),
            };
            if json {
                println!("{}", serde_json::to_string_pretty(&items)?);
            } else if items.is_empty() {
                println!("No inbox entries.");
            } else {
                print_table(&items);
            }
            Ok(ExitCode::SUCCESS)
        }
        InboxCommand::Show { id, json } => {
            let item = match &reader {
                Some(r) => r.get(id)?,
                None => None,
            };
            let Some(item) = item else {
                eprintln!("herald: no inbox entry with id {id} (see `herald inbox list`)");
                return Ok(ExitCode::FAILURE);
            };
            if json {
                println!("{}", serde_json::to_string_pretty(&item)?);
            } else {
                print_item(&item);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

pub fn time(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_else(|_| ms.to_string())
}

fn print_table(items: &[InboxItem]) {
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|i| {
            vec![
                i.id.to_string(),
                i.state.clone(),
                i.route.clone(),
                i.event_type.clone(),
                i.delivery_id.clone(),
                time(i.received_at_ms),
                i.attempts.to_string(),
            ]
        })
        .collect();
    print_rows(
        &[
            "ID",
            "STATE",
            "ROUTE",
            "EVENT",
            "DELIVERY ID",
            "RECEIVED",
            "ATTEMPTS",
        ],
        &rows,
    );
}

/// Prints an aligned table.
pub fn print_rows(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_owned()
    };
    println!("{}", line(header.to_vec()));
    for row in rows {
        println!("{}", line(row.iter().map(String::as_str).collect()));
    }
}

fn print_item(i: &InboxItem) {
    println!("id:            {}", i.id);
    println!("state:         {}", i.state);
    println!("route:         {}", i.route);
    println!("event:         {}", i.event_type);
    println!("delivery id:   {}", i.delivery_id);
    println!("received:      {}", time(i.received_at_ms));
    println!("updated:       {}", time(i.updated_at_ms));
    println!("attempts:      {}", i.attempts);
    if let Some(p) = &i.profile {
        println!("profile:       {p}");
    }
    println!("deliver:       {}", i.deliver);
    println!("deliver_extra: {}", i.deliver_extra);
    println!("skills:        {}", i.skills);
    match &i.toolsets {
        Some(t) => println!("toolsets:      {t}"),
        None => println!("toolsets:      (webhook default)"),
    }
    if let Some(e) = &i.last_error {
        println!("last error:    {e}");
    }
    println!("headers:       {}", i.headers);
    println!("\nprompt:\n{}\n", i.prompt);
    println!(
        "payload:\n{}",
        serde_json::to_string_pretty(&i.payload).unwrap_or_default()
    );
}
