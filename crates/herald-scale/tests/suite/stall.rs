//! A database that stops answering (its server frozen with SIGSTOP): every store call
//! fails with a timeout at `store.statement_timeout_seconds` instead of waiting for
//! the stall to end, the session write queue stays bounded, and the store works again
//! once the server does.

use herald_config::{PostgresSettings, SslMode};
use herald_store::sessions::{NewMessage, RunRow};
use herald_store::{SessionStore, StoreError};
use herald_test_support::postgres::PgCluster;
use std::sync::Arc;
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(1);
/// What a timed-out call may take beyond the deadline on a loaded machine.
const MARGIN: Duration = Duration::from_secs(3);

fn run(id: &str) -> RunRow {
    RunRow {
        id: id.into(),
        session_id: "s".into(),
        status: "completed".into(),
        model: "m".into(),
        created_at: 1.0,
        updated_at: 2.0,
        ..Default::default()
    }
}

/// Awaits `call`, asserting it failed with a timeout within the deadline and margin.
async fn times_out<T: std::fmt::Debug>(
    what: &str,
    call: impl std::future::Future<Output = Result<T, StoreError>>,
) {
    let started = Instant::now();
    let out = call.await;
    let took = started.elapsed();
    assert!(
        matches!(out, Err(StoreError::TimedOut(_))),
        "{what}: {out:?} after {took:?}"
    );
    assert!(took < DEADLINE + MARGIN, "{what} took {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_database_fails_store_calls_at_the_deadline_and_serves_again_once_thawed() {
    // Its own cluster: freezing the binary's shared one would stall the other tests.
    let cluster = match PgCluster::start() {
        Ok(c) => c,
        Err(why) => panic!("this test needs PostgreSQL: {why}"),
    };
    cluster.create_db("stall").unwrap();
    let settings = PostgresSettings {
        url: cluster.url("stall"),
        password: None,
        pool_size: 4,
        connect_timeout: Duration::from_secs(5),
        statement_timeout: DEADLINE,
        sslmode: SslMode::Disable,
        sslrootcert: None,
    };
    let pg = herald_scale::open_sessions(&settings, None, "a")
        .await
        .unwrap();
    let owner = pg.owner().to_owned();
    let store = SessionStore::on(Arc::new(pg)).owned_by(&owner);
    let inbox = herald_scale::open_inbox(&settings, "a").await.unwrap();
    store.save_run(run("r1")).await.unwrap();

    cluster.freeze().unwrap();
    times_out("a read", store.run("r1".into())).await;
    times_out("a write", store.save_run(run("r2"))).await;
    times_out("an inbox read", herald_store::InboxBackend::counts(&inbox)).await;
    // Writes nobody waits for fill the queue up to its bound, then are refused at
    // once rather than held in memory for as long as the stall lasts.
    let started = Instant::now();
    let mut refused = 0;
    for n in 0..herald_scale::SESSION_WRITES + 50 {
        let m = NewMessage {
            role: "user".into(),
            content: Some(format!("message {n}")),
            ..Default::default()
        };
        if let Err(e) = store.append_detached("s".into(), m) {
            assert!(e.to_string().contains("waiting for the store"), "{e}");
            refused += 1;
        }
    }
    assert!(refused >= 49, "only {refused} refused");
    assert!(started.elapsed() < Duration::from_secs(1));
    // A waited-for write meets the full queue: it waits for room within its deadline.
    times_out("a write behind a full queue", store.save_run(run("r3"))).await;

    cluster.thaw().unwrap();
    let started = Instant::now();
    loop {
        match store.run("r1".into()).await {
            Ok(Some(r)) => {
                assert_eq!(r.status, "completed");
                break;
            }
            other => assert!(
                started.elapsed() < Duration::from_secs(30),
                "not back after the thaw: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    store.save_run(run("r4")).await.unwrap();
    assert!(store.run("r4".into()).await.unwrap().is_some());
    assert!(herald_store::InboxBackend::counts(&inbox).await.is_ok());
}
