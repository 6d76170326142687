use super::*;

fn item(route: &str, id: &str, at: i64) -> NewInboxItem {
    NewInboxItem {
        route: route.into(),
        event_type: "push".into(),
        delivery_id: id.into(),
        received_at_ms: at,
        profile: None,
        headers: "{}".into(),
        payload: r#"{"a":1}"#.into(),
        prompt: "p".into(),
        deliver: "log".into(),
        deliver_extra: "{}".into(),
        skills: "[]".into(),
        toolsets: None,
    }
}

#[tokio::test]
async fn enqueue_dedups_per_route_and_expires() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("h.db")).unwrap();
    let t = 1_000_000_000;
    assert!(matches!(
        store.enqueue(item("a", "x", t)).await.unwrap(),
        EnqueueOutcome::Accepted { .. }
    ));
    assert_eq!(
        store.enqueue(item("a", "x", t + 10)).await.unwrap(),
        EnqueueOutcome::Duplicate
    );
    assert!(matches!(
        store.enqueue(item("b", "x", t + 10)).await.unwrap(),
        EnqueueOutcome::Accepted { .. }
    ));
    assert!(matches!(
        store
            .enqueue(item("a", "x", t + DEDUP_WINDOW_MS))
            .await
            .unwrap(),
        EnqueueOutcome::Accepted { .. }
    ));
    let reader = store.reader().unwrap();
    let all = reader.list(&InboxQuery::default()).unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!(all[0].state, "queued");
    assert_eq!(all[0].payload.value(), serde_json::json!({"a": 1}));
    let only_b = reader
        .list(&InboxQuery {
            route: Some("b".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(only_b.len(), 1);
    assert_eq!(reader.counts().unwrap(), vec![("queued".to_owned(), 3)]);
    assert!(reader.get(9999).unwrap().is_none());
}

#[tokio::test]
async fn concurrent_same_id_is_accepted_once_and_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.db");
    let store = Store::open(&path).unwrap();
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let s = store.clone();
        tasks.push(tokio::spawn(async move {
            s.enqueue(item("r", "same", now_ms())).await.unwrap()
        }));
    }
    let mut accepted = 0;
    for t in tasks {
        if matches!(t.await.unwrap(), EnqueueOutcome::Accepted { .. }) {
            accepted += 1;
        }
    }
    assert_eq!(accepted, 1);
    drop(store);
    let store = Store::open(&path).unwrap();
    assert_eq!(
        store.enqueue(item("r", "same", now_ms())).await.unwrap(),
        EnqueueOutcome::Duplicate
    );
}

fn claim_req(max: usize, per_route: usize, running: &[(&str, usize)]) -> ClaimRequest {
    ClaimRequest {
        now_ms: now_ms(),
        lease_ms: 60_000,
        max,
        running_per_route: running.iter().map(|(r, n)| ((*r).to_owned(), *n)).collect(),
        per_route_limit: per_route,
    }
}

#[tokio::test]
async fn claims_respect_global_and_per_route_limits_and_leases() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("h.db")).unwrap();
    let t = now_ms();
    for (route, n) in [("a", 0), ("a", 1), ("a", 2), ("b", 3), ("b", 4)] {
        store.enqueue(item(route, &n.to_string(), t)).await.unwrap();
    }
    // Two per route at most, three in all: a, a, b (oldest first, a's third skipped).
    let got = store.claim(claim_req(3, 2, &[])).await.unwrap();
    let routes: Vec<&str> = got.iter().map(|i| i.route.as_str()).collect();
    assert_eq!(routes, vec!["a", "a", "b"]);
    assert!(got.iter().all(|i| i.state == "running" && i.attempts == 1));
    // What this process already runs counts against the route.
    let got = store
        .claim(claim_req(5, 2, &[("a", 2), ("b", 1)]))
        .await
        .unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].route, "b");
    // The last one (a's third), then nothing is ready; a crash-recovery puts the
    // running ones back.
    assert_eq!(store.claim(claim_req(5, 5, &[])).await.unwrap().len(), 1);
    assert!(store.claim(claim_req(5, 5, &[])).await.unwrap().is_empty());
    assert_eq!(store.recover().await.unwrap(), 5);
    let got = store.claim(claim_req(10, 10, &[])).await.unwrap();
    assert_eq!(got.len(), 5);
    assert_eq!(got.iter().map(|i| i.attempts).max(), Some(2));
    // An expired lease makes an entry claimable again (another worker died).
    let mut expired = claim_req(10, 10, &[]);
    expired.now_ms += 61_000;
    assert_eq!(store.claim(expired).await.unwrap().len(), 5);
}

#[tokio::test]
async fn outcomes_retries_dead_replay_and_purge() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("h.db")).unwrap();
    store.enqueue(item("r", "1", now_ms())).await.unwrap();
    let id = store.claim(claim_req(1, 1, &[])).await.unwrap()[0].id;
    // A transient run failure waits until its time.
    let later = now_ms() + 60_000;
    store
        .retry_later(id, Stage::Run, now_ms(), later, "down".into())
        .await
        .unwrap();
    assert!(store.claim(claim_req(1, 1, &[])).await.unwrap().is_empty());
    let mut at_time = claim_req(1, 1, &[]);
    at_time.now_ms = later;
    let again = store.claim(at_time).await.unwrap();
    assert_eq!((again[0].failures, again[0].attempts), (1, 2));
    assert!(again[0].failing_since_ms.is_some());
    // The answer is kept; a failed delivery waits in `delivering` with it.
    store.store_answer(id, "A".into(), now_ms()).await.unwrap();
    store
        .retry_later(id, Stage::Delivery, now_ms(), 0, "502".into())
        .await
        .unwrap();
    let reader = store.reader().unwrap();
    let e = reader.get(id).unwrap().unwrap();
    assert_eq!(
        (e.state.as_str(), e.answer.as_deref()),
        ("delivering", Some("A"))
    );
    let claimed = store.claim(claim_req(1, 1, &[])).await.unwrap();
    assert_eq!(claimed[0].delivery_attempts, 1);
    store
        .mark_dead(
            id,
            Stage::Delivery,
            now_ms(),
            "400 chat not found".into(),
            None,
        )
        .await
        .unwrap();
    let e = reader.get(id).unwrap().unwrap();
    assert_eq!(e.state, "dead");
    assert_eq!(e.last_error.as_deref(), Some("400 chat not found"));
    let log: Vec<(String, String)> = reader
        .attempts(id)
        .unwrap()
        .into_iter()
        .map(|a| (a.stage, a.outcome))
        .collect();
    assert_eq!(
        log,
        [
            ("run", "retry"),
            ("run", "ok"),
            ("delivery", "retry"),
            ("delivery", "dead")
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    // Replay re-sends the stored answer; only finished entries can be replayed.
    assert_eq!(
        store.replay(id).await.unwrap(),
        ReplayOutcome::Queued("delivering".into())
    );
    assert_eq!(
        store.replay(id).await.unwrap(),
        ReplayOutcome::NotFinished("delivering".into())
    );
    assert_eq!(
        store.replay(id + 100).await.unwrap(),
        ReplayOutcome::NotFound
    );
    // Purge takes only the given state, older than the cut-off.
    store.claim(claim_req(1, 1, &[])).await.unwrap();
    store
        .mark_dead(id, Stage::Delivery, now_ms(), "x".into(), None)
        .await
        .unwrap();
    assert_eq!(
        store.purge("delivered".into(), now_ms() + 1).await.unwrap(),
        0
    );
    assert_eq!(
        store.purge("dead".into(), now_ms() - 60_000).await.unwrap(),
        0
    );
    assert_eq!(store.purge("dead".into(), now_ms() + 1).await.unwrap(), 1);
    assert!(reader.attempts(id).unwrap().is_empty());
}

#[tokio::test]
async fn large_payloads_are_stored_compressed_and_read_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.db");
    let store = Store::open(&path).unwrap();
    let payload = serde_json::json!({
        "action": "opened",
        "pull_request": {"title": "Ünïcode ✓ title", "body": "line\n".repeat(300)},
    });
    let mut big = item("a", "big", 1_000);
    big.payload = payload.to_string();
    store.enqueue(big).await.unwrap();
    store.enqueue(item("a", "small", 1_000)).await.unwrap();
    let all = store
        .reader()
        .unwrap()
        .list(&InboxQuery::default())
        .unwrap();
    assert_eq!(all[1].payload.value(), payload);
    // Listed as JSON, the payload is the object it is, not a string of it.
    let listed = serde_json::to_value(&all[1]).unwrap();
    assert_eq!(listed["payload"], payload);
    assert_eq!(all[0].payload.value(), serde_json::json!({"a": 1}));
    // On disk the large one is a compressed blob, clearly smaller; the small one text.
    let conn = rusqlite::Connection::open(&path).unwrap();
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
async fn dedup_keys_come_back_after_a_restart_from_inbox_rows_and_dedup_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.db");
    let now = now_ms();
    let store = Store::open(&path).unwrap();
    // Accepted events: their inbox rows are their keys. One is older than the window.
    for id in ["kept", "purged"] {
        store.enqueue(item("r", id, now - 1_000)).await.unwrap();
    }
    store
        .enqueue(item("r", "old", now - DEDUP_WINDOW_MS - 1))
        .await
        .unwrap();
    // A direct delivery's key, and a key as older stores kept it (a `dedup` row).
    let delivery = NewDelivery {
        kind: "direct".into(),
        route: "d".into(),
        delivery_id: "sent".into(),
        target: "log".into(),
        status: "delivered".into(),
        attempts: 1,
        latency_ms: 1,
        error: None,
        message: "m".into(),
        created_at_ms: now - 1_000,
    };
    store.record_delivery(delivery, true).await.unwrap();
    assert!(store.seen("d", "sent", now).await.unwrap());
    // A route's keys are shared by its direct deliveries and its inbox.
    assert_eq!(
        store.enqueue(item("d", "sent", now)).await.unwrap(),
        EnqueueOutcome::Duplicate
    );
    assert!(store.seen("r", "kept", now).await.unwrap());
    store
        .write(Durability::Full, move |c| {
            c.execute(
                "INSERT INTO dedup (route, delivery_id, seen_at_ms) VALUES ('r', 'legacy', ?1)",
                [now - 2_000],
            )
        })
        .await
        .unwrap();
    // Purging an entry keeps its key (moved to `dedup`) for the rest of the window.
    let purged_id = store
        .reader()
        .unwrap()
        .list(&InboxQuery::default())
        .unwrap()
        .into_iter()
        .find(|i| i.delivery_id == "purged")
        .unwrap()
        .id;
    store
        .write(Durability::Full, move |c| {
            c.execute(
                "UPDATE inbox SET state = 'delivered' WHERE id = ?1",
                [purged_id],
            )
        })
        .await
        .unwrap();
    assert_eq!(
        store.purge("delivered".into(), now_ms() + 1).await.unwrap(),
        1
    );
    drop(store);

    let store = Store::open(&path).unwrap();
    for (route, id) in [
        ("r", "kept"),
        ("r", "purged"),
        ("r", "legacy"),
        ("d", "sent"),
    ] {
        assert_eq!(
            store.enqueue(item(route, id, now_ms())).await.unwrap(),
            EnqueueOutcome::Duplicate,
            "{route}/{id}"
        );
        assert!(
            store.seen(route, id, now_ms()).await.unwrap(),
            "{route}/{id}"
        );
    }
    // Outside the window: accepted again.
    assert!(matches!(
        store.enqueue(item("r", "old", now_ms())).await.unwrap(),
        EnqueueOutcome::Accepted { .. }
    ));
    assert!(!store.seen("r", "never", now_ms()).await.unwrap());
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
