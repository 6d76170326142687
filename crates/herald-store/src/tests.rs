use super::*;
use crate::conformance::{Place, item};
use crate::sessions::RunRow;

/// A SQLite file in a temporary folder: one instance only.
struct SqliteFile {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

#[async_trait::async_trait]
impl Place for SqliteFile {
    async fn open(&self, _instance: &str) -> Store {
        Store::open(&self.path).unwrap()
    }
    async fn open_sessions(&self, _instance: &str) -> SessionStore {
        SessionStore::open(&self.path.with_file_name("state.db")).unwrap()
    }
    fn shared(&self) -> bool {
        false
    }
}

fn sqlite_file() -> Arc<SqliteFile> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.db");
    Arc::new(SqliteFile { _dir: dir, path })
}

#[tokio::test]
async fn the_store_suite_passes_on_sqlite() {
    conformance::run_all(|_| async { sqlite_file() as Arc<dyn Place> }).await;
}

#[tokio::test]
async fn large_payloads_are_stored_compressed_small_ones_as_text() {
    let place = sqlite_file();
    let store = place.open("one").await;
    let payload = serde_json::json!({"pull_request": {"body": "line\n".repeat(300)}});
    let mut big = item("a", "big", 1_000);
    big.payload = payload.to_string();
    store.enqueue(big).await.unwrap();
    store.enqueue(item("a", "small", 1_000)).await.unwrap();
    let conn = rusqlite::Connection::open(&place.path).unwrap();
    let kinds: Vec<(String, i64)> = conn
        .prepare("SELECT typeof(payload), length(payload) FROM inbox ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(kinds[0].0, "blob");
    assert!(
        (kinds[0].1 as usize) < payload.to_string().len() / 2,
        "{kinds:?}"
    );
    assert_eq!(kinds[1].0, "text");
}

#[tokio::test]
async fn dedup_rows_of_older_stores_are_read_at_start() {
    let place = sqlite_file();
    let now = now_ms();
    let inbox = SqliteInbox::open(&place.path).unwrap();
    inbox
        .write(writer::Durability::Full, move |c| {
            c.execute(
                "INSERT INTO dedup (route, delivery_id, seen_at_ms) VALUES ('r', 'legacy', ?1)",
                [now - 2_000],
            )
        })
        .await
        .unwrap();
    drop(inbox);
    let store = place.open("one").await;
    assert!(store.seen("r", "legacy", now_ms()).await.unwrap());
    assert_eq!(
        store.enqueue(item("r", "legacy", now_ms())).await.unwrap(),
        EnqueueOutcome::Duplicate
    );
}

#[tokio::test]
async fn a_read_only_store_reads_and_refuses_writes() {
    let place = sqlite_file();
    let store = place.open("one").await;
    store.enqueue(item("r", "1", now_ms())).await.unwrap();
    let ro = Store::open_read_only(&place.path).unwrap();
    assert_eq!(ro.counts().await.unwrap(), vec![("queued".to_owned(), 1)]);
    assert!(matches!(
        ro.enqueue(item("r", "2", now_ms())).await,
        Err(StoreError::ReadOnly)
    ));
    assert!(matches!(ro.replay(1).await, Err(StoreError::ReadOnly)));
}

#[cfg(unix)]
#[test]
fn database_files_are_owner_only_also_for_stores_made_before() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let dir = tempfile::tempdir().unwrap();
    // A store made by an older build: files as the umask left them, WAL still there
    // (its writer is still open).
    let path = dir.path().join("old.db");
    let older = rusqlite::Connection::open(&path).unwrap();
    older
        .execute_batch("PRAGMA journal_mode=WAL; CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        .unwrap();
    for suffix in ["", "-wal", "-shm"] {
        let file = dir.path().join(format!("old.db{suffix}"));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let _store = Store::open(&path).unwrap();
    let _sessions = SessionStore::open(&dir.path().join("state.db")).unwrap();
    for name in [
        "old.db",
        "old.db-wal",
        "old.db-shm",
        "state.db",
        "state.db-wal",
        "state.db-shm",
    ] {
        assert_eq!(mode(&dir.path().join(name)), 0o600, "{name}");
    }
    drop(older);
}

#[test]
fn a_payload_is_listed_as_json_exactly_when_a_json_reader_takes_it() {
    for depth in [1, 100, 126, 127, 128, 129, 400] {
        let text = format!("{}\"[{{\\\"\"{}", "[".repeat(depth), "]".repeat(depth));
        let parsed = serde_json::from_str::<serde_json::Value>(&text);
        let stored = crate::inbox::StoredPayload::for_test(text.clone());
        let listed = serde_json::to_string(&stored).unwrap();
        match parsed {
            Ok(v) => assert_eq!(
                serde_json::from_str::<serde_json::Value>(&listed).unwrap(),
                v
            ),
            Err(_) => assert_eq!(
                listed,
                serde_json::to_string(&text).unwrap(),
                "depth {depth}"
            ),
        }
    }
    let stored = crate::inbox::StoredPayload::for_test("not json".into());
    assert_eq!(serde_json::to_string(&stored).unwrap(), "\"not json\"");
}

#[tokio::test]
async fn runs_are_kept_and_unfinished_ones_fail_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let store = SessionStore::open(&path)
        .unwrap()
        .owned_by("1:0:a-gone-boot");
    let live = SessionStore::open(&path).unwrap();
    let run = |id: &str, status: &str| RunRow {
        id: id.into(),
        session_id: "s".into(),
        status: status.into(),
        model: "m".into(),
        created_at: 1.0,
        updated_at: 2.0,
        output: Some("done".into()),
        ..Default::default()
    };
    store.save_run(run("r1", "completed")).await.unwrap();
    store.save_run(run("r2", "running")).await.unwrap();
    // A run of a process that still serves the same home is left alone.
    live.save_run(run("r4", "running")).await.unwrap();
    drop(store);
    let again = SessionStore::open(&path).unwrap();
    assert_eq!(
        again
            .fail_unfinished_runs("herald restarted".into())
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        again.run("r1".into()).await.unwrap().unwrap(),
        run("r1", "completed")
    );
    let r2 = again.run("r2".into()).await.unwrap().unwrap();
    assert_eq!(
        (r2.status.as_str(), r2.error.as_deref()),
        ("failed", Some("herald restarted"))
    );
    assert!(again.run("r3".into()).await.unwrap().is_none());
    assert_eq!(
        again.run("r4".into()).await.unwrap().unwrap().status,
        "running"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_their_memory_budget_dedup_keys_are_found_on_disk_and_kept_across_a_restart() {
    let place = sqlite_file();
    // Room for 100 keys in memory.
    let budget = 100 * crate::BYTES_PER_KEY;
    let store = Store::open_within(&place.path, budget).unwrap();
    let t = now_ms() - 60_000;
    for n in 0..1000 {
        let outcome = store
            .enqueue(item("r", &format!("k-{n}"), t + n))
            .await
            .unwrap();
        assert!(matches!(outcome, EnqueueOutcome::Accepted { .. }), "{n}");
    }
    // The oldest keys went to disk, a slice between batches.
    let spilled = || {
        let conn = rusqlite::Connection::open(&place.path).unwrap();
        conn.query_row("SELECT count(*) FROM dedup", [], |r| r.get::<_, i64>(0))
            .unwrap()
    };
    let started = std::time::Instant::now();
    while spilled() < 800 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{}",
            spilled()
        );
        store.seen("r", "warm", now_ms()).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    for n in [0, 1, 500, 999] {
        let again = store
            .enqueue(item("r", &format!("k-{n}"), t + 2000))
            .await
            .unwrap();
        assert_eq!(again, EnqueueOutcome::Duplicate, "k-{n}");
        assert!(store.seen("r", &format!("k-{n}"), now_ms()).await.unwrap());
    }
    assert!(!store.seen("r", "never", now_ms()).await.unwrap());
    drop(store);
    // Reopened within the same budget: the keys past it are written out at load.
    let store = Store::open_within(&place.path, budget).unwrap();
    for n in [0, 250, 998] {
        let again = store
            .enqueue(item("r", &format!("k-{n}"), t + 3000))
            .await
            .unwrap();
        assert_eq!(again, EnqueueOutcome::Duplicate, "after a restart: k-{n}");
    }
    let fresh = store.enqueue(item("r", "k-new", t + 3000)).await.unwrap();
    assert!(matches!(fresh, EnqueueOutcome::Accepted { .. }));
}
