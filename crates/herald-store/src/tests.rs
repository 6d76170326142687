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
    assert_eq!(all[0].payload, serde_json::json!({"a": 1}));
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
