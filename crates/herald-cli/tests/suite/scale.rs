//! Several herald instances on one PostgreSQL database (a throwaway cluster the test
//! starts): one inbox shared by every instance, dedup across them, every inbox command
//! from either, and kill -9 of either under load losing and doubling nothing.

use super::agent_runs::agent_config;
use super::fakes::*;
use super::support::*;
use herald_test_support::postgres::PgCluster;
use herald_test_support::{FakeProvider, Scripted};
use reqwest::StatusCode;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Duration;

const TOKEN: &str = "123:tg-token";

pub(super) fn cluster() -> &'static PgCluster {
    static CLUSTER: OnceLock<PgCluster> = OnceLock::new();
    CLUSTER.get_or_init(|| match PgCluster::start() {
        Ok(c) => c,
        Err(why) => panic!("these tests need PostgreSQL: {why}"),
    })
}

/// A new database's URL.
pub(super) fn database(name: &str) -> String {
    let c = cluster();
    c.create_db(name).unwrap();
    c.url(name)
}

const ROUTE: &str = "        r:\n          prompt: 'event {n}'\n          deliver: telegram\n          deliver_extra:\n            chat_id: '-100555'\n";

/// A gateway on `url`'s store, delivering to `telegram`.
fn instance(provider: &FakeProvider, telegram: &Fake, url: &str, lease: u32) -> Herald {
    let config = agent_config(&provider.base_url, "", ROUTE);
    let config = format!(
        "store:\n  url: {url}\n  lease_seconds: {lease}\nmetrics:\n  enabled: true\n{config}"
    );
    let tg = format!("{}/bot", telegram.base);
    Herald::start_with(
        &config,
        &[
            ("TELEGRAM_BOT_TOKEN", TOKEN),
            ("TELEGRAM_BASE_URL", &tg),
            ("HERALD_RETRY_BASE_MS", "10"),
        ],
    )
}

/// The instance on `home` again (after a kill).
fn restart(home: tempfile::TempDir, telegram: &Fake) -> Herald {
    let tg = format!("{}/bot", telegram.base);
    Herald::start_in(
        home,
        &[
            ("TELEGRAM_BOT_TOKEN", TOKEN),
            ("TELEGRAM_BASE_URL", &tg),
            ("HERALD_RETRY_BASE_MS", "10"),
        ],
    )
}

fn sends(telegram: &Fake) -> usize {
    telegram
        .requests()
        .iter()
        .filter(|r| r.path.ends_with("/sendMessage"))
        .count()
}

fn provider() -> FakeProvider {
    let p = FakeProvider::start(vec![]);
    p.set_fallback(Scripted::text("looked at it"));
    p
}

async fn event(h: &Herald, n: usize, delivery: &str) -> (StatusCode, Value) {
    h.github("r", "push", &format!("{{\"n\": {n}}}"), Some(delivery))
        .await
}

fn counts(h: &Herald) -> Value {
    let (code, out, err) = h.cli(&["inbox", "list", "--json", "--limit", "100000"]);
    assert_eq!(code, 0, "{err}");
    let items: Vec<Value> = serde_json::from_str(&out).unwrap();
    let mut by_state: HashMap<String, usize> = HashMap::new();
    for i in &items {
        *by_state
            .entry(i["state"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    serde_json::to_value(by_state).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_share_one_inbox_and_every_command_works_from_either() {
    let url = database("two_instances");
    let (provider, telegram) = (provider(), Fake::start(telegram_ok()));
    let a = instance(&provider, &telegram, &url, 30);
    let b = instance(&provider, &telegram, &url, 30);
    // The same delivery id to both at once: accepted once.
    for round in 0..5 {
        let id = format!("same-{round}");
        let (x, y) = tokio::join!(event(&a, round, &id), event(&b, round, &id));
        let mut statuses = vec![(x.0, x.1["status"].clone()), (y.0, y.1["status"].clone())];
        statuses.sort_by_key(|(s, _)| s.as_u16());
        assert_eq!(
            statuses,
            vec![
                (StatusCode::OK, Value::from("duplicate")),
                (StatusCode::ACCEPTED, Value::from("accepted"))
            ],
            "round {round}"
        );
    }
    for n in 5..25usize {
        let h = if n.is_multiple_of(2) { &a } else { &b };
        assert_eq!(event(h, n, &format!("d-{n}")).await.0, StatusCode::ACCEPTED);
    }
    wait_for(Duration::from_secs(60), "every event delivered", || {
        (counts(&a)["delivered"] == 25).then_some(())
    })
    .await;
    assert_eq!(sends(&telegram), 25, "each event delivered once");
    // Every inbox command answers the same from either instance.
    assert_eq!(counts(&a), counts(&b));
    let (_, health_a) = a.get("/health/detailed").await;
    let (_, health_b) = b.get("/health/detailed").await;
    let inbox_of = |body: &str| serde_json::from_str::<Value>(body).unwrap()["inbox"].clone();
    assert_eq!(inbox_of(&health_a), inbox_of(&health_b));
    assert_eq!(inbox_of(&health_a)["delivered"], 25, "{health_a}");
    // The metrics of either read the shared inbox.
    for h in [&a, &b] {
        let (status, text) = h.get("/metrics").await;
        assert_eq!(status, StatusCode::OK);
        for series in [
            "herald_inbox_events{state=\"delivered\"} 25",
            "herald_inbox_events{state=\"queued\"} 0",
            "herald_inbox_leases_held 0",
            "herald_store_shared 1",
        ] {
            assert!(text.lines().any(|l| l == series), "{series}:\n{text}");
        }
    }
    let (_, status_a, _) = a.cli(&["gateway", "status"]);
    let (_, status_b, _) = b.cli(&["gateway", "status"]);
    let inbox_line = |s: &str| {
        s.lines()
            .find(|l| l.starts_with("Inbox:"))
            .map(str::to_owned)
    };
    assert_eq!(inbox_line(&status_a), inbox_line(&status_b));
    assert_eq!(
        inbox_line(&status_a).as_deref(),
        Some("Inbox: delivered 25")
    );
    let (code, deliveries_a, _) = a.cli(&["deliveries", "list", "--json"]);
    assert_eq!(code, 0);
    let (_, deliveries_b, _) = b.cli(&["deliveries", "list", "--json"]);
    assert_eq!(deliveries_a, deliveries_b);
    // An event one instance accepted is shown and replayed through the other.
    let items: Vec<Value> = serde_json::from_str(&a.cli(&["inbox", "list", "--json"]).1).unwrap();
    let first = items.iter().find(|i| i["delivery_id"] == "same-0").unwrap();
    let id = first["id"].to_string();
    let (code, shown, err) = b.cli(&["inbox", "show", &id, "--json"]);
    assert_eq!(code, 0, "{err}");
    let shown: Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(shown["deliveries"][0]["status"], "delivered", "{shown}");
    let (code, _, err) = b.cli(&["inbox", "replay", &id]);
    assert_eq!(code, 0, "{err}");
    wait_for(Duration::from_secs(30), "the replay delivered", || {
        (sends(&telegram) == 26).then_some(())
    })
    .await;
    let (code, out, err) = a.cli(&[
        "inbox",
        "purge",
        "--state",
        "delivered",
        "--older-than",
        "0s",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"removed\""), "{out}");
    // Purged, the keys still hold: a redelivery to either is a duplicate.
    assert_eq!(event(&b, 7, "d-7").await.1["status"], "duplicate");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_check_tells_a_bad_password_and_a_missing_database() {
    let c = cluster();
    let wrong = c
        .url("postgres")
        .replace(herald_test_support::postgres::PASSWORD, "not-it");
    let missing = c.url("no_such_database");
    for (url, expected) in [(wrong, "password"), (missing, "create it")] {
        let home = tempfile::tempdir().unwrap();
        let config = format!(
            "store:\n  url: {url}\n{}",
            config_with_routes("        r: {prompt: x}\n")
        );
        std::fs::write(home.path().join("config.yaml"), config).unwrap();
        let (code, out, _) = run_cli(home.path(), &["config", "check"]);
        assert_eq!(code, 1, "{out}");
        let finding = out
            .lines()
            .find(|l| l.contains("store.url"))
            .unwrap_or_default();
        assert!(finding.contains(expected), "{out}");
        assert!(
            !out.contains("not-it"),
            "the password is never shown: {out}"
        );
    }
}

/// What a sender saw of its events.
#[derive(Default)]
struct Sent {
    /// Delivery ids answered 202.
    accepted: Vec<String>,
    /// Delivery ids answered duplicate (the other instance had it).
    duplicate: Vec<String>,
}

/// Sends events to whichever instance `bases[side]` is now, until `stop`: its own
/// ids, and every fifth one an id the other sender sends to the other instance too.
async fn sender(
    side: usize,
    bases: std::sync::Arc<std::sync::Mutex<[String; 2]>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Sent {
    let client = http_client(Duration::from_secs(5));
    let mut sent = Sent::default();
    let mut n = 0usize;
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        n += 1;
        let id = if n.is_multiple_of(5) {
            format!("both-{n}")
        } else {
            format!("s{side}-{n}")
        };
        let base = bases.lock().unwrap()[side].clone();
        let body = format!("{{\"n\": {n}}}");
        let answer = client
            .post(format!("{base}/webhooks/r"))
            .header("x-github-event", "push")
            .header("x-github-delivery", &id)
            .header(
                "x-hub-signature-256",
                herald_webhook::verify::sign::github(SECRET, body.as_bytes()),
            )
            .body(body)
            .send()
            .await;
        match answer {
            Ok(r) if r.status() == StatusCode::ACCEPTED => sent.accepted.push(id),
            Ok(r) if r.status() == StatusCode::OK => sent.duplicate.push(id),
            Ok(r) => panic!("unexpected answer {} for {id}", r.status()),
            // The instance was killed mid-request: the outcome is unknown; its id is
            // neither counted as accepted nor sent again.
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    sent
}

/// One entry of the drained inbox, with how many times its delivery is on record and
/// whether an attempt of it was cut off by a kill.
struct Drained {
    delivery_id: String,
    state: String,
    delivered_records: usize,
    cut_off: bool,
}

fn drained(h: &Herald) -> Vec<Drained> {
    let items: Vec<Value> =
        serde_json::from_str(&h.cli(&["inbox", "list", "--json", "--limit", "100000"]).1).unwrap();
    let (_, deliveries, _) = h.cli(&["deliveries", "list", "--json", "--limit", "100000"]);
    let deliveries: Vec<Value> = serde_json::from_str(&deliveries).unwrap();
    let mut records: HashMap<String, usize> = HashMap::new();
    for d in deliveries.iter().filter(|d| d["status"] == "delivered") {
        *records
            .entry(d["delivery_id"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    // Attempts a kill cut off, as the store keeps them (what `inbox show` lists).
    let cut_off: std::collections::HashSet<String> = cluster()
        .psql(
            "chaos",
            "SELECT DISTINCT inbox_id FROM inbox_attempts WHERE outcome = 'interrupted'",
        )
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    items
        .iter()
        .map(|i| {
            let delivery_id = i["delivery_id"].as_str().unwrap().to_owned();
            Drained {
                delivered_records: records.get(&delivery_id).copied().unwrap_or(0),
                state: i["state"].as_str().unwrap().to_owned(),
                cut_off: cut_off.contains(&i["id"].to_string()),
                delivery_id,
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_either_instance_under_load_loses_and_doubles_nothing() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    let url = database("chaos");
    let (provider, telegram) = (provider(), Fake::start(telegram_ok()));
    let mut instances = [
        Some(instance(&provider, &telegram, &url, 3)),
        Some(instance(&provider, &telegram, &url, 3)),
    ];
    let bases = Arc::new(Mutex::new(
        instances
            .each_ref()
            .map(|h| h.as_ref().unwrap().base.clone()),
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let senders: Vec<_> = (0..2)
        .map(|side| tokio::spawn(sender(side, bases.clone(), stop.clone())))
        .collect();
    // Kills at pseudo-random points: a, b, a, b, each restarted on its home after a
    // moment; the last one stays down a lease long, so its leases are taken over.
    let mut seed = 0x2545_f491_u32;
    let kills = 4;
    for k in 0..kills {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        tokio::time::sleep(Duration::from_millis(400 + u64::from(seed % 800))).await;
        let side = k % 2;
        let home = instances[side].take().unwrap().into_home();
        let down = if k + 1 == kills { 4_000 } else { 300 };
        tokio::time::sleep(Duration::from_millis(down)).await;
        let h = tokio::task::block_in_place(|| restart(home, &telegram));
        bases.lock().unwrap()[side] = h.base.clone();
        instances[side] = Some(h);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::SeqCst);
    let mut accepted = Vec::new();
    let mut duplicates = 0;
    for s in senders {
        let sent = s.await.unwrap();
        accepted.extend(sent.accepted);
        duplicates += sent.duplicate.len();
    }
    let a = instances[0].as_ref().unwrap();
    let drain_started = std::time::Instant::now();
    wait_for(Duration::from_secs(120), "the inbox drained", || {
        let c = counts(a);
        let total: u64 = c
            .as_object()
            .unwrap()
            .values()
            .filter_map(Value::as_u64)
            .sum();
        (c["delivered"].as_u64() == Some(total)).then_some(())
    })
    .await;
    eprintln!("chaos: drained in {:?}", drain_started.elapsed());
    let entries = drained(a);
    let by_id: HashMap<&str, &Drained> = entries
        .iter()
        .map(|e| (e.delivery_id.as_str(), e))
        .collect();
    assert_eq!(
        by_id.len(),
        entries.len(),
        "a delivery id is in the inbox twice"
    );
    for id in &accepted {
        let e = by_id
            .get(id.as_str())
            .unwrap_or_else(|| panic!("accepted {id} is not in the inbox"));
        assert_eq!(e.state, "delivered", "{id}");
    }
    let mut twice = 0;
    for e in &entries {
        assert!(
            e.delivered_records >= 1,
            "{} has no delivery on record",
            e.delivery_id
        );
        if e.delivered_records > 1 {
            assert!(
                e.cut_off,
                "{} was delivered {} times but never cut off",
                e.delivery_id, e.delivered_records
            );
            twice += 1;
        }
    }
    let cut_off = entries.iter().filter(|e| e.cut_off).count();
    let both = accepted.iter().filter(|id| id.starts_with("both-")).count();
    eprintln!(
        "chaos: {} accepted, {duplicates} duplicates, {kills} kills, {} in the inbox, {cut_off} cut off by a kill, {twice} delivered twice, {} sends to the chat, {both} ids sent to both accepted once",
        accepted.len(),
        entries.len(),
        sends(&telegram)
    );
    assert!(accepted.len() > 100, "too little load: {}", accepted.len());
    assert!(duplicates > 0, "no id was sent to both instances");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_migrate_copies_a_sqlite_home_keeping_row_ids_and_runs_again_harmlessly() {
    let (provider, telegram) = (provider(), Fake::start(telegram_ok()));
    // A home on SQLite with delivered events and their sessions.
    let sqlite = {
        let config = agent_config(&provider.base_url, "", ROUTE);
        let tg = format!("{}/bot", telegram.base);
        Herald::start_with(
            &config,
            &[("TELEGRAM_BOT_TOKEN", TOKEN), ("TELEGRAM_BASE_URL", &tg)],
        )
    };
    for n in 0..12 {
        assert_eq!(
            event(&sqlite, n, &format!("m-{n}")).await.0,
            StatusCode::ACCEPTED
        );
    }
    wait_for(Duration::from_secs(60), "every event delivered", || {
        (counts(&sqlite)["delivered"] == 12).then_some(())
    })
    .await;
    let before: Vec<Value> =
        serde_json::from_str(&sqlite.cli(&["inbox", "list", "--json"]).1).unwrap();
    let home = sqlite.into_home();
    let state = herald_store::SessionStore::open(&home.path().join("state.db")).unwrap();
    let session = "webhook:r:m-3".to_owned();
    let sqlite_rows: Vec<i64> = state
        .history(session.clone())
        .await
        .unwrap()
        .iter()
        .map(|m| m.id)
        .collect();
    assert!(!sqlite_rows.is_empty());
    drop(state);
    // Point the home at PostgreSQL and copy, twice.
    let url = database("migrated");
    let config = std::fs::read_to_string(home.path().join("config.yaml")).unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        format!("store:\n  url: {url}\n{config}"),
    )
    .unwrap();
    for round in 0..2 {
        let (code, out, err) = run_cli(home.path(), &["store", "migrate", "--from-sqlite"]);
        assert_eq!(code, 0, "round {round}: {out}{err}");
        assert!(err.contains("inbox: 12/12 rows"), "{err}");
        assert!(err.contains("messages:"), "{err}");
    }
    let pg = |sql: &str| cluster().psql("migrated", sql).unwrap();
    assert_eq!(pg("SELECT count(*) FROM inbox"), "12", "copied once");
    let pg_rows: Vec<i64> = pg(&format!(
        "SELECT id FROM messages WHERE session_id = '{session}' AND active = 1 ORDER BY seq"
    ))
    .lines()
    .map(|l| l.parse().unwrap())
    .collect();
    assert_eq!(pg_rows, sqlite_rows, "message row ids are kept");
    // The instance on PostgreSQL serves what was copied: the same entries and ids,
    // the keys still in the window, new ids past the copied ones.
    let tg = format!("{}/bot", telegram.base);
    let h = Herald::start_in(
        home,
        &[("TELEGRAM_BOT_TOKEN", TOKEN), ("TELEGRAM_BASE_URL", &tg)],
    );
    let after: Vec<Value> = serde_json::from_str(&h.cli(&["inbox", "list", "--json"]).1).unwrap();
    let ids = |items: &[Value]| {
        items
            .iter()
            .map(|i| {
                (
                    i["id"].clone(),
                    i["delivery_id"].clone(),
                    i["state"].clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&after), ids(&before));
    assert_eq!(event(&h, 3, "m-3").await.1["status"], "duplicate");
    let (status, answer) = event(&h, 99, "m-new").await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let max_before = before
        .iter()
        .map(|i| i["id"].as_i64().unwrap())
        .max()
        .unwrap();
    assert!(
        answer["id"].as_i64().is_none_or(|id| id > max_before),
        "{answer}"
    );
    wait_for(Duration::from_secs(30), "the new event delivered", || {
        (counts(&h)["delivered"] == 13).then_some(())
    })
    .await;
    let newest = pg("SELECT max(id) FROM inbox").parse::<i64>().unwrap();
    assert!(newest > max_before);
}

/// Starts a run of the runs API on `h`; its id.
async fn start_run(h: &Herald, session: &str, input: &str) -> String {
    let body = serde_json::json!({"input": input, "session_id": session});
    let (status, answer) = super::api::post_json(h, "/v1/runs", body).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{answer}");
    answer["run_id"].as_str().unwrap().to_owned()
}

/// The run's status as `h` reads it, once it is final.
async fn finished(h: &Herald, run: &str) -> Value {
    let started = std::time::Instant::now();
    loop {
        let (_, status) = super::api::get_json(h, &format!("/v1/runs/{run}")).await;
        if ["completed", "failed", "cancelled"].contains(&status["status"].as_str().unwrap_or("")) {
            return status;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{status}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_continues_on_the_other_instance_and_turns_at_once_run_one_after_the_other() {
    let url = database("shared_sessions");
    let provider = FakeProvider::start(vec![]);
    let slow = Scripted::Delayed(
        Duration::from_millis(500),
        Box::new(Scripted::text("noted")),
    );
    provider.set_fallback(slow);
    let config = format!(
        "store:\n  url: {url}\n{}",
        super::api::api_config(&provider.base_url, "")
    );
    let (a, b) = (Herald::start(&config), Herald::start(&config));
    // A turn through `a`, the next through `b`: `b` sends the model the history.
    let first = start_run(&a, "shared-1", "the first question").await;
    assert_eq!(finished(&a, &first).await["status"], "completed");
    let second = start_run(&b, "shared-1", "the second question").await;
    assert_eq!(finished(&b, &second).await["status"], "completed");
    let sent = provider.requests().last().unwrap().body["messages"].to_string();
    assert!(
        sent.contains("the first question") && sent.contains("noted"),
        "{sent}"
    );
    // Two turns at once, one through each: one waits for the other, and the
    // history alternates question and answer.
    let (x, y) = tokio::join!(
        start_run(&a, "shared-1", "third, through a"),
        start_run(&b, "shared-1", "fourth, through b")
    );
    assert_eq!(finished(&a, &x).await["status"], "completed");
    assert_eq!(finished(&b, &y).await["status"], "completed");
    let roles = cluster()
        .psql(
            "shared_sessions",
            "SELECT string_agg(role, ',' ORDER BY seq) FROM messages WHERE session_id = 'shared-1' AND active = 1",
        )
        .unwrap();
    assert_eq!(
        roles,
        "user,assistant,user,assistant,user,assistant,user,assistant"
    );
    let last = provider.requests().last().unwrap().body["messages"].to_string();
    assert!(
        last.contains("third, through a") && last.contains("fourth, through b"),
        "the later turn saw the earlier one: {last}"
    );
    // Either instance answers for any run from the shared store.
    assert_eq!(finished(&b, &first).await["status"], "completed");
    assert_eq!(finished(&a, &y).await["status"], "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_one_instance_is_steered_and_stopped_through_the_other() {
    let url = database("relayed_runs");
    let provider = FakeProvider::start(vec![]);
    let slow = Scripted::Delayed(Duration::from_secs(20), Box::new(Scripted::text("late")));
    provider.set_fallback(slow);
    let config = format!(
        "store:\n  url: {url}\n{}",
        super::api::api_config(&provider.base_url, "")
    );
    let (a, b) = (Herald::start(&config), Herald::start(&config));
    let run = start_run(&a, "relayed-1", "take your time").await;
    // Running on `a` (its status is in the store for `b` too).
    let started = std::time::Instant::now();
    loop {
        let (_, status) = super::api::get_json(&b, &format!("/v1/runs/{run}")).await;
        if status["status"] == "running" {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{status}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let steer = serde_json::json!({"input": "also check the tests"});
    let (status, answer) = super::api::post_json(&b, &format!("/v1/runs/{run}/steer"), steer).await;
    assert_eq!(
        (status, answer["accepted"].clone()),
        (StatusCode::OK, Value::Bool(true)),
        "{answer}"
    );
    let empty = serde_json::json!({"input": "  "});
    let (status, _) = super::api::post_json(&b, &format!("/v1/runs/{run}/steer"), empty).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, answer) =
        super::api::post_json(&b, &format!("/v1/runs/{run}/stop"), Value::Null).await;
    assert_eq!(
        (status, answer["status"].clone()),
        (StatusCode::OK, "stopping".into()),
        "{answer}"
    );
    let done = finished(&b, &run).await;
    assert_eq!(done["status"], "cancelled", "{done}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "stopped, not finished"
    );
    // A run whose instance is gone: 409 run_not_active.
    let lost = start_run(&a, "relayed-2", "and this one").await;
    let started = std::time::Instant::now();
    while super::api::get_json(&b, &format!("/v1/runs/{lost}"))
        .await
        .1["status"]
        != "running"
    {
        assert!(started.elapsed() < Duration::from_secs(10));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Its events followed through `b` while `a` dies: the stream ends as the store
    // tells the run's end.
    let expire = format!(
        "UPDATE herald_instances SET alive_until_ms = 0 WHERE owner = (SELECT owner FROM herald_runs WHERE id = '{lost}')"
    );
    let die = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let home = a.into_home();
        // Its heartbeat stops; as if its 30 s ran out at once. Until another instance
        // marks it failed, it is a run nobody runs: 409 run_not_active.
        cluster().psql("relayed_runs", &expire).unwrap();
        let stop = format!("/v1/runs/{lost}/stop");
        (super::api::post_json(&b, &stop, Value::Null).await, home)
    };
    let ((events, text), ((status, answer), _home)) =
        tokio::join!(super::api::run_events(&b, &lost), die);
    assert_eq!(status, StatusCode::CONFLICT, "{answer}");
    assert_eq!(answer["error"]["code"], "run_not_active", "{answer}");
    let last = events.last().unwrap();
    assert_eq!(
        (last["event"].as_str(), last["error"].as_str()),
        (Some("run.failed"), Some("interrupted: instance lost")),
        "{text}"
    );
    assert!(text.ends_with(": stream closed\n\n"), "{text}");
    let (status, _) = super::api::post_json(&b, "/v1/runs/no-such-run/stop", Value::Null).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_delivery_id_sent_directly_to_both_instances_is_sent_once() {
    let url = database("direct_sends");
    let mut slow_ok = telegram_ok();
    slow_ok.delay = Duration::from_millis(600);
    let telegram = Fake::start(slow_ok);
    let routes = "        d:\n          deliver_only: true\n          deliver: telegram\n          prompt: 'n={n}'\n          deliver_extra: {chat_id: '1'}\n";
    let config = format!("store:\n  url: {url}\n{}", config_with_routes(routes));
    let tg = format!("{}/bot", telegram.base);
    let env = [
        ("TELEGRAM_BOT_TOKEN", TOKEN),
        ("TELEGRAM_BASE_URL", tg.as_str()),
    ];
    let (a, b) = (
        Herald::start_with(&config, &env),
        Herald::start_with(&config, &env),
    );
    for round in 0..3 {
        let id = format!("direct-{round}");
        let body = format!("{{\"n\": {round}}}");
        let (x, y) = tokio::join!(
            a.github("d", "push", &body, Some(&id)),
            b.github("d", "push", &body, Some(&id))
        );
        let mut statuses = vec![x.1["status"].clone(), y.1["status"].clone()];
        statuses.sort_by_key(|s| s.to_string());
        assert_eq!(
            statuses,
            vec![Value::from("delivered"), Value::from("duplicate")],
            "round {round}"
        );
        assert_eq!(sends(&telegram), round + 1, "sent once, round {round}");
    }
}

/// A chat completion with `Idempotency-Key: k-1`: its status and body.
async fn keyed(h: &Herald, body: &Value) -> (StatusCode, String) {
    let key = [("Idempotency-Key", "k-1")];
    let r = super::api::call(h, "POST", "/v1/chat/completions", Some(body.clone()), &key).await;
    (r.status(), r.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_idempotency_key_sent_to_both_instances_runs_once() {
    let url = database("idempotency");
    let provider = FakeProvider::start(vec![]);
    let slow = Scripted::Delayed(Duration::from_millis(500), Box::new(Scripted::text("once")));
    provider.set_fallback(slow);
    let config = format!(
        "store:\n  url: {url}\n{}",
        super::api::api_config(&provider.base_url, "")
    );
    let (a, b) = (Herald::start(&config), Herald::start(&config));
    let body = serde_json::json!({"model": "hermes-agent", "messages": [{"role": "user", "content": "do it once"}]});
    let (x, y) = tokio::join!(keyed(&a, &body), keyed(&b, &body));
    assert_eq!((x.0, y.0), (StatusCode::OK, StatusCode::OK), "{x:?} {y:?}");
    assert_eq!(x.1, y.1, "the same answer from both");
    assert_eq!(provider.requests().len(), 1, "one run for both");
    // Later, through either: still the same answer, no new run.
    let (z_status, z) = keyed(&b, &body).await;
    assert_eq!((z_status, z), (StatusCode::OK, x.1.clone()));
    assert_eq!(provider.requests().len(), 1);
    // Another body under the same key is another request.
    let other = serde_json::json!({"model": "hermes-agent", "messages": [{"role": "user", "content": "something else"}]});
    let r = super::api::call(
        &a,
        "POST",
        "/v1/chat/completions",
        Some(other),
        &[("Idempotency-Key", "k-1")],
    )
    .await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(provider.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_made_on_either_instance_reach_both() {
    let url = database("subscriptions");
    let config = format!(
        "store:\n  url: {url}\n{}",
        config_with_routes("        r: {prompt: x}\n")
    );
    // `a`'s home has a subscriptions file from before: the first start imports it.
    let home_a = tempfile::tempdir().unwrap();
    std::fs::write(home_a.path().join("config.yaml"), &config).unwrap();
    let file = serde_json::json!({"old": {"description": "from before", "events": [], "secret": "old-secret", "prompt": "old {n}", "skills": [], "deliver": "log", "created_at": "2026-12-01T00:00:00Z"}});
    std::fs::write(
        home_a.path().join("webhook_subscriptions.json"),
        file.to_string(),
    )
    .unwrap();
    let a = Herald::start_in(home_a, &[]);
    let b = Herald::start(&config);
    wait_until(|| async { reaches(&b, "old", "old-secret").await == StatusCode::ACCEPTED }).await;
    // Subscribed through `a`'s home: `b` serves it within a few seconds.
    let (code, out, err) = a.cli(&[
        "webhook",
        "subscribe",
        "fresh",
        "--prompt",
        "p {n}",
        "--secret",
        "fresh-secret",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    wait_until(|| async { reaches(&b, "fresh", "fresh-secret").await == StatusCode::ACCEPTED })
        .await;
    let (_, listed, _) = b.cli(&["webhook", "list"]);
    assert!(
        listed.contains("fresh") && listed.contains("old"),
        "{listed}"
    );
    // Removed through `b`'s home: `a` stops serving it.
    let (code, out, _) = b.cli(&["webhook", "remove", "fresh"]);
    assert_eq!(code, 0, "{out}");
    wait_until(|| async { reaches(&a, "fresh", "fresh-secret").await == StatusCode::NOT_FOUND })
        .await;
}

/// The status of a signed push to `route` of `h`.
async fn reaches(h: &Herald, route: &str, secret: &str) -> StatusCode {
    let headers = vec![
        ("x-github-event", "push".to_owned()),
        (
            "x-hub-signature-256",
            herald_webhook::verify::sign::github(secret, b"{}"),
        ),
        ("x-github-delivery", format!("sub-{}", uuid_like())),
    ];
    h.post(&format!("/webhooks/{route}"), "{}", &headers)
        .await
        .0
}

fn uuid_like() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Waits up to 10 s for `check` to hold.
async fn wait_until<F, Fut>(mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = std::time::Instant::now();
    while !check().await {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "not within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_waiting_on_one_instance_is_approved_through_the_other() {
    let url = database("relayed_approvals");
    let dir = tempfile::tempdir().unwrap();
    let doomed = dir.path().join("doomed.txt");
    std::fs::write(&doomed, "x").unwrap();
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("c1", "terminal", r#"{"command": "rm -f doomed.txt"}"#)]),
        Scripted::text("Removed."),
    ]);
    let api = super::api::api_config(&provider.base_url, "").replace(
        "agent:\n",
        &format!("terminal:\n  cwd: {}\nagent:\n", dir.path().display()),
    );
    let config = format!("store:\n  url: {url}\n{api}");
    let (a, b) = (Herald::start(&config), Herald::start(&config));
    let run = start_run(&a, "approvals-1", "clean up").await;
    // The owner says when it waits (the store keeps a run's state at its start and end).
    let started = std::time::Instant::now();
    while super::api::get_json(&a, &format!("/v1/runs/{run}")).await.1["status"]
        != "waiting_for_approval"
    {
        assert!(started.elapsed() < Duration::from_secs(10));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let path = format!("/v1/runs/{run}/approval");
    // Refusals come back from the owner as they would from it.
    let (status, answer) =
        super::api::post_json(&b, &path, serde_json::json!({"choice": "maybe"})).await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_approval_choice"))
    );
    let wrong = serde_json::json!({"choice": "once", "request_id": "no-such-request"});
    let (status, answer) = super::api::post_json(&b, &path, wrong).await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("approval_not_pending")),
        "{answer}"
    );
    // The run's events followed through `b`, from the run's start, while it is
    // approved through `b` too.
    let approve = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        super::api::post_json(&b, &path, serde_json::json!({"choice": "once"})).await
    };
    let ((events, text), (status, answer)) =
        tokio::join!(super::api::run_events(&b, &run), approve);
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(
        (answer["choice"].as_str(), answer["resolved"].as_u64()),
        (Some("once"), Some(1))
    );
    let names: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(
        names,
        [
            "tool.started",
            "approval.request",
            "approval.responded",
            "tool.completed",
            "message.delta",
            "run.completed"
        ],
        "{text}"
    );
    assert!(events.iter().all(|e| e["run_id"] == run.as_str()), "{text}");
    assert_eq!(events[1]["command"], "rm -f doomed.txt", "{text}");
    assert_eq!(events[5]["output"], "Removed.", "{text}");
    assert!(text.ends_with(": stream closed\n\n"), "{text}");
    assert_eq!(finished(&a, &run).await["status"], "completed");
    assert!(!doomed.exists(), "the approved command ran on the owner");
    // One reader: the events were taken, on either instance.
    for h in [&a, &b] {
        let (status, _) = super::api::get_json(h, &format!("/v1/runs/{run}/events")).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
}

/// One GET while the database is frozen: its status, whether it said `Retry-After`,
/// its error code, and how long it took.
async fn frozen_get(h: &Herald, path: &str) -> (StatusCode, bool, Value, Duration) {
    let started = std::time::Instant::now();
    let r = super::api::call(h, "GET", path, None, &[]).await;
    let took = started.elapsed();
    let status = r.status();
    let retry = r.headers().contains_key("retry-after");
    let body: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap_or(Value::Null);
    (status, retry, body["error"]["code"].clone(), took)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_database_gets_503_with_retry_after_at_the_statement_timeout_and_herald_recovers()
{
    // Its own cluster: freezing the shared one would stall the other tests. The freeze
    // lasts 20 s (HERALD_TEST_PG_FREEZE_SECONDS to measure another).
    let pg = match PgCluster::start() {
        Ok(c) => c,
        Err(why) => panic!("this test needs PostgreSQL: {why}"),
    };
    pg.create_db("frozen").unwrap();
    let freeze = Duration::from_secs(
        std::env::var("HERALD_TEST_PG_FREEZE_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(20),
    );
    const DEADLINE: Duration = Duration::from_secs(2);
    let provider = provider();
    let config = format!(
        "store:\n  url: {}\n  statement_timeout_seconds: {}\n{}",
        pg.url("frozen"),
        DEADLINE.as_secs(),
        super::api::api_config(&provider.base_url, "")
    );
    let h = Herald::start(&config);
    // A stored response, and a run another instance kept (not in this one's memory):
    // both read from the database.
    let (status, response) =
        super::api::post_json(&h, "/v1/responses", serde_json::json!({"input": "hello"})).await;
    assert_eq!(status, StatusCode::OK, "{response}");
    let response = response["id"].as_str().unwrap().to_owned();
    pg.psql(
        "frozen",
        "INSERT INTO herald_runs (id, session_id, status, model, created_at, updated_at)
         VALUES ('run_elsewhere', 's', 'completed', 'm', 1, 2)",
    )
    .unwrap();
    let paths = [
        "/v1/runs/run_elsewhere".to_owned(),
        format!("/v1/responses/{response}"),
    ];
    for path in &paths {
        let (status, _, _, _) = frozen_get(&h, path).await;
        assert_eq!(status, StatusCode::OK, "{path} before the freeze");
    }

    pg.freeze().unwrap();
    let frozen_at = std::time::Instant::now();
    let mut slowest = Duration::ZERO;
    let mut answers = 0;
    while frozen_at.elapsed() + DEADLINE < freeze {
        for path in &paths {
            let (status, retry, code, took) = frozen_get(&h, path).await;
            assert_eq!(
                (status, retry, code.as_str()),
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    true,
                    Some("store_unavailable")
                ),
                "{path} during the freeze, after {took:?}"
            );
            assert!(
                took < DEADLINE + Duration::from_secs(3),
                "{path} took {took:?} during the freeze"
            );
            slowest = slowest.max(took);
            answers += 1;
        }
    }
    let held = frozen_at.elapsed();
    eprintln!(
        "frozen for {:?}: {answers} answers, each 503 with Retry-After, the slowest in {slowest:?}",
        held.max(freeze)
    );
    tokio::time::sleep(freeze.saturating_sub(held)).await;
    pg.thaw().unwrap();

    let thawed = std::time::Instant::now();
    for path in &paths {
        loop {
            let (status, _, _, _) = frozen_get(&h, path).await;
            if status == StatusCode::OK {
                break;
            }
            assert!(
                thawed.elapsed() < Duration::from_secs(30),
                "{path} still {status} after the thaw"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    eprintln!("serving again {:?} after the thaw", thawed.elapsed());
    // The store's own words stay in the log, a generic message outward.
    let log = h.log();
    assert!(
        log.contains("a request found the store unavailable")
            && log.contains("no answer within 2 s"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_request_whose_client_left_gives_its_key_back_for_the_retry() {
    use tokio::io::AsyncWriteExt;
    let url = database("idempotency_left");
    let provider = FakeProvider::start(vec![Scripted::Delayed(
        Duration::from_secs(60),
        Box::new(Scripted::text("too late")),
    )]);
    provider.set_fallback(Scripted::text("retried"));
    let config = format!(
        "store:\n  url: {url}\n{}",
        super::api::api_config(&provider.base_url, "")
    );
    let h = Herald::start(&config);
    let body = serde_json::json!({"messages": [{"role": "user", "content": "once"}]}).to_string();
    // The client asks with a key, and leaves while its run waits on the model.
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nIdempotency-Key: k-left\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        super::api::KEY,
        body.len()
    );
    let mut socket = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    socket.write_all(head.as_bytes()).await.unwrap();
    wait_for(Duration::from_secs(10), "the first provider call", || {
        (!provider.requests().is_empty()).then_some(())
    })
    .await;
    drop(socket);
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Its retry (as the openai SDK's) gets an answer of its own at once.
    let started = std::time::Instant::now();
    let (status, answer) = keyed_as(&h, &body, "k-left").await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert!(answer.contains("retried"), "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the retry waited {:?} for the key",
        started.elapsed()
    );
}

/// A whole chat completion of `body` with `Idempotency-Key: key`: status and text.
async fn keyed_as(h: &Herald, body: &str, key: &str) -> (StatusCode, String) {
    let body: Value = serde_json::from_str(body).unwrap();
    let r = super::api::call(
        h,
        "POST",
        "/v1/chat/completions",
        Some(body),
        &[("Idempotency-Key", key)],
    )
    .await;
    (r.status(), r.text().await.unwrap())
}

/// With `store.url`, `herald chat` and `herald rpc` keep their sessions in the shared
/// database, not the home's `state.db`: a chat session of one home is listed and
/// resumed over RPC from another home on the same database, and its model switch is
/// kept there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_interactive_doors_keep_their_sessions_in_the_shared_store() {
    let url = database("door_sessions");
    let provider = FakeProvider::start(vec![Scripted::text("stored in postgres")]);
    let config = format!(
        "store:\n  url: {url}\nmodel:\n  default: fake-model\n  base_url: {}\n",
        provider.base_url
    );
    let homes = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    for h in &homes {
        std::fs::write(h.path().join("config.yaml"), &config).unwrap();
    }
    let out = std::process::Command::new(BIN)
        .args(["chat", "-Q", "-q", "hello there"])
        .env("HERALD_HOME", homes[0].path())
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("stored in postgres"));
    assert!(
        !homes[0].path().join("state.db").exists(),
        "nothing in the home's state.db"
    );
    let stored = cluster()
        .psql(
            "door_sessions",
            "SELECT id FROM sessions WHERE source = 'cli'",
        )
        .unwrap();
    assert!(!stored.is_empty());
    let mut rpc = super::rpc::Piped::start(homes[1].path());
    let c = &mut rpc.client;
    let list = c.call("session.list", serde_json::json!({})).await;
    assert!(list.to_string().contains(stored.trim()), "{list}");
    let resumed = c
        .call(
            "session.resume",
            serde_json::json!({"session_id": stored.trim()}),
        )
        .await;
    assert_eq!(resumed["message_count"], 2, "{resumed}");
    let sid = resumed["session_id"].clone();
    c.call(
        "config.set",
        serde_json::json!({"session_id": sid, "key": "model", "value": "other-model"}),
    )
    .await;
    let model = cluster()
        .psql(
            "door_sessions",
            &format!("SELECT model FROM sessions WHERE id = '{}'", stored.trim()),
        )
        .unwrap();
    assert_eq!(model.trim(), "other-model");
}

/// With PostgreSQL one instance polls a bot at a time: the other stands by (and says
/// so on `/health/detailed`), and takes the poll over when the first is killed; a
/// message sent then is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_instance_polls_a_bot_and_another_takes_over_when_it_dies() {
    use herald_test_support::telegram::FakeTelegram;
    let url = database("bot_poll");
    let provider = FakeProvider::start(vec![]);
    provider.set_fallback(herald_test_support::Scripted::text("answered"));
    let tg = FakeTelegram::start();
    let config = format!(
        "store:\n  url: {url}\n{}",
        super::telegram::config(&provider)
    );
    let env = super::telegram::env(&tg, "7");
    let mut a = Herald::start_with(&config, &env);
    wait_for(
        Duration::from_secs(30),
        "the first instance polling",
        || (tg.polls() > 0).then_some(()),
    )
    .await;
    let b = Herald::start_with(&config, &env);
    let mut standing = false;
    for _ in 0..100 {
        let (_, body) = b.get("/health/detailed").await;
        if body.contains("standing by") {
            standing = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(standing, "the second instance stands by");
    let (_, body) = a.get("/health/detailed").await;
    assert!(body.contains("\"receiving\":\"long polling\""), "{body}");
    tg.dm(7, "one");
    tg.wait_texts(7, 1, Duration::from_secs(30));
    a.kill9();
    tg.dm(7, "two");
    // The dead instance's hold runs out within half a minute.
    let texts = tg.wait_texts(7, 2, Duration::from_secs(90));
    assert_eq!(texts, ["answered", "answered"]);
    assert!(
        b.log()
            .contains("the bot's poll: this instance now holds it"),
        "{}",
        b.log()
    );
}
