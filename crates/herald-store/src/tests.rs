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

#[test]
fn a_payload_keeps_numbers_a_tree_cannot_hold_as_written() {
    let text = r#"{"big": 123456789012345678901234567890, "inf": 1e400, "z": -0}"#;
    let stored = crate::inbox::StoredPayload::for_test(text.into());
    // Listed as the JSON it is, every literal as written...
    assert_eq!(serde_json::to_string(&stored).unwrap(), text);
    // ...and built with stand-ins where a tree is needed.
    assert_eq!(
        stored.value(),
        serde_json::json!({"big": 1.2345678901234568e29, "inf": f64::MAX, "z": 0})
    );
    // Shown to a person as stored; other payloads indented.
    assert_eq!(stored.display_text(), text);
    let plain = crate::inbox::StoredPayload::for_test(r#"{"a":1}"#.into());
    assert_eq!(plain.display_text(), "{\n  \"a\": 1\n}");
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

/// A prompt of `len` characters of varied words (a deterministic generator), so the
/// search index holds many distinct trigrams as real prompts do.
fn varied_prompt(seed: u64, len: usize) -> String {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut out = String::with_capacity(len + 16);
    while out.len() < len {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let word_len = 3 + (state >> 60) as usize;
        for i in 0..word_len {
            out.push((b'a' + ((state >> (i * 5 % 55)) % 26) as u8) as char);
        }
        out.push(' ');
    }
    out.truncate(len);
    out
}

async fn wait_for_the_index(store: &Store) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while store.search_index_behind().await.unwrap() {
        assert!(
            std::time::Instant::now() < deadline,
            "the search index caught up"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Finding 2 of issue 42: the search index is built beside the writer, never on it.
/// While 6,000 entries of 4,000 characters are indexed, entries accepted one at a time
/// are committed without waiting for the index (before, each batch of 2,000 ran on the
/// writer thread and held every accept behind it), and the WAL is left at most at its
/// limit (before, it kept the size of the largest batch).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_search_index_is_built_beside_the_writer_and_the_wal_stays_bounded() {
    let place = sqlite_file();
    let store = place.open("one").await;
    let now = now_ms();
    for chunk in 0..12u64 {
        let mut adds = tokio::task::JoinSet::new();
        for n in 0..500u64 {
            let seq = chunk * 500 + n;
            let mut it = item("r", &format!("old-{seq}"), now + seq as i64);
            it.prompt = varied_prompt(seq, 4000);
            let store = store.clone();
            adds.spawn(async move { store.enqueue(it).await.unwrap() });
        }
        while let Some(added) = adds.join_next().await {
            added.unwrap();
        }
    }
    store.keep_search_index();
    let mut waits = Vec::new();
    let mut n = 0;
    while store.search_index_behind().await.unwrap() {
        let mut it = item("r", &format!("new-{n}"), now + 100_000 + n);
        it.prompt = varied_prompt(1_000_000 + n as u64, 4000);
        let started = std::time::Instant::now();
        store.enqueue(it).await.unwrap();
        waits.push(started.elapsed());
        n += 1;
        assert!(n < 100_000, "the index never caught up");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    waits.sort();
    let worst = waits.last().copied().unwrap_or_default();
    eprintln!(
        "{} accepts during the backfill: median {:?}, worst {worst:?}",
        waits.len(),
        waits.get(waits.len() / 2)
    );
    assert!(waits.len() >= 5, "the backfill was long enough to measure");
    assert!(
        worst < std::time::Duration::from_millis(1500),
        "an accept waited {worst:?} behind the index"
    );
    // The next write after a checkpoint resets the WAL and cuts it to its limit.
    store
        .enqueue(item("r", "after", now + 500_000))
        .await
        .unwrap();
    let conn = rusqlite::Connection::open(&place.path).unwrap();
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
        .unwrap();
    store
        .enqueue(item("r", "after-2", now + 500_001))
        .await
        .unwrap();
    let wal = std::fs::metadata(place.path.with_file_name("h.db-wal"))
        .map(|m| m.len())
        .unwrap_or(0);
    assert!(wal <= 17 * 1024 * 1024, "the WAL stayed at {wal} bytes");
}

/// The index holds trigrams without positions: an entry holding a search's trigrams
/// apart is checked and left out; ASCII letters match in either case, as a scan does.
#[tokio::test]
async fn an_indexed_search_finds_exactly_what_a_scan_finds() {
    use crate::events::EventQuery;
    let place = sqlite_file();
    let store = place.open("one").await;
    let prompts = ["abcX bcd", "xx ABCD yy", "straße ÄBC", "plain"];
    for (n, prompt) in prompts.iter().enumerate() {
        let mut it = item("r", &format!("e{n}"), 1_000 + n as i64);
        it.prompt = (*prompt).into();
        store.enqueue(it).await.unwrap();
    }
    let search = |text: &str| {
        let store = store.clone();
        let q = EventQuery {
            search: Some(text.into()),
            limit: 50,
            ..EventQuery::default()
        };
        async move {
            let mut ids: Vec<String> = store
                .events(q)
                .await
                .unwrap()
                .into_iter()
                .map(|e| e.delivery_id)
                .collect();
            ids.sort();
            ids
        }
    };
    let texts = ["abcd", "ABC", "bcd", "äbc", "ÄBC", "traße", "nothing"];
    let mut scanned = Vec::new();
    for text in texts {
        scanned.push(search(text).await);
    }
    store.keep_search_index();
    wait_for_the_index(&store).await;
    for (text, before) in texts.iter().zip(&scanned) {
        assert_eq!(&search(text).await, before, "searching {text:?}");
    }
    assert_eq!(
        scanned[0],
        ["e1"],
        "abcd: not the entry holding abc and bcd apart"
    );
    assert_eq!(scanned[1], ["e0", "e1"], "ABC: ASCII in either case");
    assert_eq!(
        scanned[3],
        Vec::<String>::new(),
        "äbc: other letters as written"
    );
    assert_eq!(scanned[4], ["e2"]);
}
