//! `herald inbox list|show|replay|purge`: what is in the durable inbox, what happened
//! to each event, and putting finished entries back or away.

use crate::stores::{self, Access};
use clap::Subcommand;
use herald_config::Home;
use herald_store::{CancelOutcome, DeliveryQuery, InboxItem, InboxQuery, ReplayOutcome};
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum InboxCommand {
    /// List inbox entries, newest first.
    List {
        /// Only entries in this state (queued, running, delivering, delivered, dead).
        #[arg(long)]
        state: Option<String>,
        /// Only entries of this route.
        #[arg(long)]
        route: Option<String>,
        /// Only entries received since: an age (`30m`, `2h`, `7d`) or a time
        /// (`2026-11-30T12:00:00Z`).
        #[arg(long, value_parser = parse_since)]
        since: Option<i64>,
        /// At most this many entries.
        #[arg(long, default_value_t = 100)]
        limit: u32,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show one entry in full: payload, prompt, every attempt with its error, the
    /// answer and its delivery.
    Show {
        /// The inbox id (first column of `inbox list`).
        id: i64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Queue a dead (or delivered, or cancelled) entry again: a stored answer that was
    /// never delivered is re-sent; otherwise the agent runs again.
    Replay {
        /// The inbox id (first column of `inbox list`).
        id: i64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Cancel a queued entry: it is never run (`replay` queues it again).
    Cancel {
        /// The inbox id (first column of `inbox list`).
        id: i64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Delete finished entries.
    Purge {
        /// `dead`, `delivered` or `cancelled`.
        #[arg(long)]
        state: String,
        /// Only entries last changed longer ago than this (`30m`, `12h`, `7d`).
        #[arg(long, value_parser = parse_age)]
        older_than: i64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `30s`, `15m`, `2h`, `7d`, `1w` in milliseconds.
fn parse_age(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: i64 = num
        .parse()
        .map_err(|_| format!("`{text}` is not an age like 30m, 2h or 7d"))?;
    let unit_ms = match unit.trim() {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "w" => 7 * 86_400_000,
        _ => {
            return Err(format!(
                "`{text}`: the unit must be s, m, h, d or w (e.g. 7d)"
            ));
        }
    };
    n.checked_mul(unit_ms)
        .ok_or_else(|| format!("`{text}` is too large"))
}

/// An age (relative to now) or an RFC 3339 time, as epoch milliseconds.
fn parse_since(text: &str) -> Result<i64, String> {
    if let Ok(t) = text.trim().parse::<jiff::Timestamp>() {
        return Ok(t.as_millisecond());
    }
    parse_age(text)
        .map(|age| herald_store::now_ms() - age)
        .map_err(|_| {
            format!("`{text}` is neither an age (30m, 2h, 7d) nor a time like 2026-11-30T12:00:00Z")
        })
}

pub fn run(home: &Home, command: InboxCommand) -> anyhow::Result<ExitCode> {
    let rt = stores::runtime()?;
    match command {
        InboxCommand::List {
            state,
            route,
            since,
            limit,
            json,
        } => {
            let query = InboxQuery {
                state,
                route,
                since_ms: since,
                limit: Some(limit),
            };
            let items = match stores::open(home, Access::Read, &rt)? {
                Some(store) => rt.block_on(store.list(query))?,
                None => Vec::new(),
            };
            if json {
                outln!("{}", serde_json::to_string_pretty(&items)?);
            } else if items.is_empty() {
                outln!("No inbox entries.");
            } else {
                print_table(&items);
            }
            Ok(ExitCode::SUCCESS)
        }
        InboxCommand::Show { id, json } => {
            let store = stores::open(home, Access::Read, &rt)?;
            let found = match &store {
                Some(store) => rt.block_on(store.get(id))?,
                None => None,
            };
            let (Some(store), Some(item)) = (store, found) else {
                eprintln!("herald: no inbox entry with id {id} (see `herald inbox list`)");
                return Ok(ExitCode::FAILURE);
            };
            let attempts = rt.block_on(store.attempts(id))?;
            let deliveries = rt.block_on(store.deliveries(DeliveryQuery {
                route: Some(item.route.clone()),
                delivery_id: Some(item.delivery_id.clone()),
                ..DeliveryQuery::default()
            }))?;
            if json {
                let mut value = serde_json::to_value(&item)?;
                if let Some(obj) = value.as_object_mut() {
                    obj.insert("attempt_log".into(), serde_json::to_value(&attempts)?);
                    obj.insert("deliveries".into(), serde_json::to_value(&deliveries)?);
                }
                outln!("{}", serde_json::to_string_pretty(&value)?);
            } else {
                let waiting = match item.state.as_str() {
                    "queued" => waiting_for_a_model(home, &item),
                    _ => None,
                };
                print_item(&item, waiting.as_deref(), &deliveries);
                print_history(&item, &attempts, &deliveries);
            }
            Ok(ExitCode::SUCCESS)
        }
        InboxCommand::Replay { id, json } => {
            let outcome = match stores::open(home, Access::Write, &rt)? {
                Some(store) => rt.block_on(store.replay(id))?,
                None => ReplayOutcome::NotFound,
            };
            match outcome {
                ReplayOutcome::Queued(state) => {
                    if json {
                        outln!("{}", serde_json::json!({"id": id, "state": state}));
                    } else {
                        outln!("Entry {id} is {state} again; a running gateway picks it up.");
                    }
                    Ok(ExitCode::SUCCESS)
                }
                ReplayOutcome::NotFound => {
                    eprintln!("herald: no inbox entry with id {id} (see `herald inbox list`)");
                    Ok(ExitCode::FAILURE)
                }
                ReplayOutcome::NotFinished(state) => {
                    eprintln!(
                        "herald: entry {id} is {state}; only dead, delivered or cancelled entries can be replayed"
                    );
                    Ok(ExitCode::FAILURE)
                }
            }
        }
        InboxCommand::Cancel { id, json } => cancel(home, &rt, id, json),
        InboxCommand::Purge {
            state,
            older_than,
            json,
        } => {
            if !matches!(state.as_str(), "dead" | "delivered" | "cancelled") {
                eprintln!(
                    "herald: --state must be dead, delivered or cancelled (entries still being worked are never purged)"
                );
                return Ok(ExitCode::from(2));
            }
            let before = herald_store::now_ms() - older_than;
            let removed = match stores::open(home, Access::Write, &rt)? {
                Some(store) => rt.block_on(herald_store::retention::purge_entries(
                    store.backend().as_ref(),
                    &state,
                    before,
                ))?,
                None => 0,
            };
            if json {
                outln!(
                    "{}",
                    serde_json::json!({"state": state, "removed": removed})
                );
            } else {
                outln!("Removed {removed} {state} entries.");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn print_history(
    item: &InboxItem,
    attempts: &[herald_store::Attempt],
    deliveries: &[herald_store::Delivery],
) {
    outln!("\nattempts:");
    if attempts.is_empty() {
        outln!("  (none yet)");
    }
    for a in attempts {
        let took = a.finished_at_ms - a.started_at_ms;
        match &a.error {
            Some(e) => outln!(
                "  {}  {:<8}  {:<11}  {took} ms  {e}",
                time(a.started_at_ms),
                a.stage,
                a.outcome
            ),
            None => outln!(
                "  {}  {:<8}  {:<11}  {took} ms",
                time(a.started_at_ms),
                a.stage,
                a.outcome
            ),
        }
    }
    match &item.answer {
        Some(answer) => outln!("\nanswer:\n{answer}"),
        None => outln!("\nanswer: (none yet)"),
    }
    for d in deliveries {
        outln!(
            "\ndelivery: {} to {} after {} attempt(s) at {}{}",
            d.status,
            d.target,
            d.attempts,
            time(d.created_at_ms),
            d.error
                .as_ref()
                .map(|e| format!(": {e}"))
                .unwrap_or_default()
        );
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
    outln!("{}", line(header.to_vec()));
    for row in rows {
        outln!("{}", line(row.iter().map(String::as_str).collect()));
    }
}

/// Why a queued agent event cannot run yet when no model can be chosen for its home (or
/// its profile's): the gateway's workers wait for one.
fn waiting_for_a_model(home: &Home, item: &InboxItem) -> Option<String> {
    let home = match &item.profile {
        Some(p) if p != "default" => Home::new(home.profiles_dir().join(p)),
        _ => home.clone(),
    };
    herald_config::load_dotenv(&home).ok()?;
    let config = herald_config::Config::load(&home, &herald_config::process_env).ok()?;
    let built = herald_session::Runtime::build(
        &home,
        &config,
        herald_session::Platform::Webhook,
        herald_session::ModelChoice::default(),
    );
    match built.err()? {
        e @ herald_session::RuntimeError::Model(_) => Some(format!("waiting for a model: {e}")),
        e => Some(format!("waiting: agent runs are off: {e}")),
    }
}

fn print_item(i: &InboxItem, waiting: Option<&str>, deliveries: &[herald_store::Delivery]) {
    outln!("id:            {}", i.id);
    match waiting {
        Some(why) => outln!("state:         {} ({why})", i.state),
        None => outln!("state:         {}", i.state),
    }
    outln!("route:         {}", i.route);
    outln!("event:         {}", i.event_type);
    outln!("delivery id:   {}", i.delivery_id);
    outln!("received:      {}", time(i.received_at_ms));
    outln!("updated:       {}", time(i.updated_at_ms));
    outln!("run attempts:  {}", i.attempts);
    // A delivered or failed answer's own record (below, under `delivery:`) has the
    // count; the entry's counter is shown while an answer is still being retried.
    if deliveries.is_empty() && i.delivery_attempts > 0 {
        outln!("deliveries:    {} attempt(s)", i.delivery_attempts);
    }
    if let Some(p) = &i.profile {
        outln!("profile:       {p}");
    }
    outln!("deliver:       {}", i.deliver);
    outln!("deliver_extra: {}", i.deliver_extra);
    outln!("skills:        {}", i.skills);
    match &i.toolsets {
        Some(t) => outln!("toolsets:      {t}"),
        None => outln!("toolsets:      (webhook default)"),
    }
    if let Some(e) = &i.last_error {
        outln!("last error:    {e}");
    }
    outln!("headers:       {}", i.headers);
    outln!("\nprompt:\n{}\n", i.prompt);
    outln!("payload:\n{}", i.payload.display_text());
}

/// `herald inbox cancel ID`.
fn cancel(
    home: &Home,
    rt: &tokio::runtime::Runtime,
    id: i64,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let outcome = match stores::open(home, Access::Write, rt)? {
        Some(store) => rt.block_on(store.cancel(id))?,
        None => CancelOutcome::NotFound,
    };
    match outcome {
        CancelOutcome::Cancelled => {
            if json {
                outln!("{}", serde_json::json!({"id": id, "state": "cancelled"}));
            } else {
                outln!(
                    "Entry {id} is cancelled; it will not run (`herald inbox replay {id}` queues it again)."
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        CancelOutcome::NotFound => {
            eprintln!("herald: no inbox entry with id {id} (see `herald inbox list`)");
            Ok(ExitCode::FAILURE)
        }
        CancelOutcome::NotQueued(state) => {
            eprintln!("herald: entry {id} is {state}; only a queued entry can be cancelled");
            Ok(ExitCode::FAILURE)
        }
    }
}
