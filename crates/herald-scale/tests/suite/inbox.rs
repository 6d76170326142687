use super::{cluster, settings};
use herald_store::conformance::{self, Place};
use herald_store::{InboxBackend, SessionStore, Store};
use std::sync::Arc;

/// One database of the cluster per check.
struct PgDatabase {
    db: String,
}

#[async_trait::async_trait]
impl Place for PgDatabase {
    async fn open(&self, instance: &str) -> Store {
        let inbox = herald_scale::open_inbox(&settings(&self.db), instance)
            .await
            .unwrap();
        Store::on(Arc::new(inbox))
    }
    async fn open_sessions(&self, instance: &str) -> SessionStore {
        super::sessions_of(&self.db, instance).await
    }
    fn shared(&self) -> bool {
        true
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_suite_passes_on_postgresql() {
    conformance::run_all(|name| async move {
        Arc::new(PgDatabase {
            db: format!("suite_{name}"),
        }) as Arc<dyn Place>
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_migrating_at_once_both_start() {
    let s = settings("migrate_race");
    let (a, b) = tokio::join!(
        herald_scale::open_inbox(&s, "a"),
        herald_scale::open_inbox(&s, "b")
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.counts().await.unwrap(), b.counts().await.unwrap());
    let versions = cluster()
        .psql("migrate_race", "SELECT count(*) FROM herald_schema")
        .unwrap();
    assert_eq!(versions, "4", "every migration applied once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_event_wakes_the_other_instance_at_once() {
    let s = settings("wake");
    let a = herald_scale::open_inbox(&s, "a").await.unwrap();
    let b = herald_scale::open_inbox(&s, "b").await.unwrap();
    let wake = Arc::new(tokio::sync::Notify::new());
    b.wake_on_remote_work(wake.clone());
    // The first wake-up says the listener is ready.
    tokio::time::timeout(std::time::Duration::from_secs(10), wake.notified())
        .await
        .unwrap();
    let started = std::time::Instant::now();
    a.enqueue(conformance::item("r", "1", herald_store::now_ms()))
        .await
        .unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(5), wake.notified())
        .await
        .expect("no wake-up");
    assert!(started.elapsed() < std::time::Duration::from_secs(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_credentials_and_a_missing_database_are_told_apart() {
    let mut s = settings("postgres");
    s.url = s
        .url
        .replace(herald_test_support::postgres::PASSWORD, "wrong");
    let e = herald_scale::check(&s).await.unwrap_err().to_string();
    assert!(e.contains("password"), "{e}");
    assert!(!e.contains("wrong"), "the password is not shown: {e}");
    let mut s = settings("postgres");
    s.url = s.url.replace("/postgres", "/no_such_db");
    let e = herald_scale::check(&s).await.unwrap_err().to_string();
    assert!(e.contains("no_such_db") && e.contains("create it"), "{e}");
    let mut s = settings("postgres");
    s.url = "postgres://herald@127.0.0.1:1/x".into();
    let e = herald_scale::check(&s).await.unwrap_err().to_string();
    assert!(e.contains("127.0.0.1:1"), "{e}");
    herald_scale::check(&settings("postgres")).await.unwrap();
}

/// A hold taken with `try_hold` is one instance's at a time; the other gets it once it
/// is let go; and a holder whose hold was taken over (it ran out unrenewed) is told at
/// its next renewal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_try_hold_is_one_instances_and_its_loss_is_told() {
    let s = settings("try_hold");
    let a = herald_scale::open_inbox(&s, "a").await.unwrap();
    let b = herald_scale::open_inbox(&s, "b").await.unwrap();
    let held = a.try_hold("poll:bot").await.unwrap();
    assert!(held.is_some());
    assert!(b.try_hold("poll:bot").await.unwrap().is_none());
    drop(held);
    let mut b_hold = None;
    for _ in 0..100 {
        if let Some(h) = b.try_hold("poll:bot").await.unwrap() {
            b_hold = Some(h);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let mut b_hold = b_hold.expect("let go, the hold is the other instance's");
    // Another holder takes the row over (as after b's hold ran out unrenewed).
    cluster()
        .psql(
            "try_hold",
            "UPDATE direct_sends SET owner = 'someone-else' WHERE send_key LIKE 'hold%'",
        )
        .unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(20), b_hold.lost())
        .await
        .expect("the loss is told at the next renewal");
}
