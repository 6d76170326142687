//! The inbox's checks, run on every backend.

use super::Place;
use crate::{
    CancelOutcome, ClaimRequest, ClaimScope, DEDUP_WINDOW_MS, DeliveryQuery, EnqueueOutcome,
    InboxQuery, NewDelivery, NewInboxItem, ReplayOutcome, Stage, Store, now_ms,
};
use std::sync::Arc;

/// Every inbox check, by name.
pub fn inbox_checks() -> Vec<(&'static str, super::Check)> {
    super::checks_of!(
        enqueue_dedups_per_route_and_expires,
        concurrent_same_id_is_accepted_once_and_survives_a_restart,
        claims_respect_global_and_per_route_limits_and_leases,
        outcomes_retries_dead_replay_and_purge,
        a_release_gives_the_entry_back_unchanged,
        large_payloads_are_read_back_whole,
        dedup_keys_survive_a_restart_and_a_purge,
        deliveries_are_listed_newest_first_and_filtered,
        purges_take_batches_oldest_first_and_deliveries_by_outcome,
        a_cancelled_entry_never_runs_and_can_be_replayed,
        events_are_paged_filtered_and_searched,
        two_instances_accept_a_delivery_id_once,
        two_instances_never_claim_one_entry_twice,
        an_instance_takes_back_only_its_own_leases_and_a_dead_ones_when_they_expire,
        chat_entries_are_claimed_only_by_the_chat_door,
    )
}

pub fn item(route: &str, id: &str, at: i64) -> NewInboxItem {
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

fn claim_req(max: usize, per_route: usize, running: &[(&str, usize)]) -> ClaimRequest {
    ClaimRequest {
        now_ms: now_ms(),
        lease_ms: 60_000,
        max,
        running_per_route: running.iter().map(|(r, n)| ((*r).to_owned(), *n)).collect(),
        per_route_limit: per_route,
        scope: ClaimScope::Webhooks,
    }
}

fn delivery(route: &str, id: &str, status: &str, at: i64) -> NewDelivery {
    NewDelivery {
        kind: "direct".into(),
        route: route.into(),
        delivery_id: id.into(),
        target: "log".into(),
        status: status.into(),
        attempts: 1,
        latency_ms: 1,
        error: (status != "delivered").then(|| "502".to_owned()),
        message: "m".into(),
        created_at_ms: at,
    }
}

fn accepted(o: EnqueueOutcome) -> bool {
    matches!(o, EnqueueOutcome::Accepted { .. })
}

async fn enqueue_dedups_per_route_and_expires(place: Arc<dyn Place>) {
    let store = place.open("one").await;
    let t = 1_000_000_000;
    assert!(accepted(store.enqueue(item("a", "x", t)).await.unwrap()));
    assert_eq!(
        store.enqueue(item("a", "x", t + 10)).await.unwrap(),
        EnqueueOutcome::Duplicate
    );
    assert!(accepted(
        store.enqueue(item("b", "x", t + 10)).await.unwrap()
    ));
    let later = item("a", "x", t + DEDUP_WINDOW_MS);
    assert!(accepted(store.enqueue(later).await.unwrap()));
    let all = store.list(InboxQuery::default()).await.unwrap();
    assert_eq!(all.len(), 3);
    assert!(
        all[0].id > all[1].id && all[1].id > all[2].id,
        "newest first"
    );
    assert_eq!(all[0].state, "queued");
    assert_eq!(all[0].payload.value(), serde_json::json!({"a": 1}));
    let only_b = InboxQuery {
        route: Some("b".into()),
        ..Default::default()
    };
    assert_eq!(store.list(only_b).await.unwrap().len(), 1);
    let limited = InboxQuery {
        limit: Some(2),
        state: Some("queued".into()),
        since_ms: Some(t + 5),
        ..Default::default()
    };
    assert_eq!(store.list(limited).await.unwrap().len(), 2);
    assert_eq!(
        store.counts().await.unwrap(),
        vec![("queued".to_owned(), 3)]
    );
    assert!(store.get(9999).await.unwrap().is_none());
    let one = store.get(all[2].id).await.unwrap().unwrap();
    assert_eq!(one, all[2]);
}

async fn concurrent_same_id_is_accepted_once_and_survives_a_restart(place: Arc<dyn Place>) {
    let store = place.open("one").await;
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let s = store.clone();
        tasks.push(tokio::spawn(async move {
            s.enqueue(item("r", "same", now_ms())).await.unwrap()
        }));
    }
    let mut n = 0;
    for t in tasks {
        n += usize::from(accepted(t.await.unwrap()));
    }
    assert_eq!(n, 1);
    drop(store);
    let store = place.open("one").await;
    assert_eq!(
        store.enqueue(item("r", "same", now_ms())).await.unwrap(),
        EnqueueOutcome::Duplicate
    );
}

async fn claims_respect_global_and_per_route_limits_and_leases(place: Arc<dyn Place>) {
    let store = place.open("one").await;
    let t = now_ms();
    for (route, n) in [("a", 0), ("a", 1), ("a", 2), ("b", 3), ("b", 4)] {
        store.enqueue(item(route, &n.to_string(), t)).await.unwrap();
    }
    // Two per route at most, three in all: a, a, b (oldest first, a's third skipped).
    let got = store.claim(claim_req(3, 2, &[])).await.unwrap();
    let routes: Vec<&str> = got.iter().map(|i| i.route.as_str()).collect();
    assert_eq!(routes, vec!["a", "a", "b"]);
    assert!(got.iter().all(|i| i.state == "running" && i.attempts == 1));
    // What this instance already runs counts against the route.
    let got = store
        .claim(claim_req(5, 2, &[("a", 2), ("b", 1)]))
        .await
        .unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].route, "b");
    // The last one (a's third), then nothing is ready; recovery after a restart puts
    // the running ones back.
    assert_eq!(store.claim(claim_req(5, 5, &[])).await.unwrap().len(), 1);
    assert!(store.claim(claim_req(5, 5, &[])).await.unwrap().is_empty());
    drop(store);
    let store = place.open("one").await;
    assert_eq!(store.recover().await.unwrap(), 5);
    let got = store.claim(claim_req(10, 10, &[])).await.unwrap();
    assert_eq!(got.len(), 5);
    assert_eq!(got.iter().map(|i| i.attempts).max(), Some(2));
    // A renewed lease holds; an expired one makes an entry claimable again.
    let ids: Vec<i64> = got.iter().map(|i| i.id).collect();
    store.renew_leases(ids, now_ms() + 120_000).await.unwrap();
    let mut expired = claim_req(10, 10, &[]);
    expired.now_ms += 61_000;
    assert!(store.claim(expired.clone()).await.unwrap().is_empty());
    expired.now_ms += 60_000;
    assert_eq!(store.claim(expired).await.unwrap().len(), 5);
}

async fn outcomes_retries_dead_replay_and_purge(place: Arc<dyn Place>) {
    let store = place.open("one").await;
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
    let e = store.get(id).await.unwrap().unwrap();
    assert_eq!(
        (e.state.as_str(), e.answer.as_deref()),
        ("delivering", Some("A"))
    );
    let claimed = store.claim(claim_req(1, 1, &[])).await.unwrap();
    assert_eq!(claimed[0].delivery_attempts, 1);
    let failed = delivery("r", "1", "failed", now_ms());
    let why = "400 chat not found".to_owned();
    store
        .mark_dead(id, Stage::Delivery, now_ms(), why, Some(failed))
        .await
        .unwrap();
    let e = store.get(id).await.unwrap().unwrap();
    assert_eq!(e.state, "dead");
    assert_eq!(e.last_error.as_deref(), Some("400 chat not found"));
    let log: Vec<(String, String)> = store
        .attempts(id)
        .await
        .unwrap()
        .into_iter()
        .map(|a| (a.stage, a.outcome))
        .collect();
    let expected = [
        ("run", "retry"),
        ("run", "ok"),
        ("delivery", "retry"),
        ("delivery", "dead"),
    ];
    assert_eq!(log, expected.map(|(a, b)| (a.to_owned(), b.to_owned())));
    // Replay re-sends the stored answer; only finished entries can be replayed.
    let queued = ReplayOutcome::Queued("delivering".into());
    assert_eq!(store.replay(id).await.unwrap(), queued);
    let refused = ReplayOutcome::NotFinished("delivering".into());
    assert_eq!(store.replay(id).await.unwrap(), refused);
    assert_eq!(
        store.replay(id + 100).await.unwrap(),
        ReplayOutcome::NotFound
    );
    // Delivered, then replayed: the agent runs again (the answer is dropped).
    store.claim(claim_req(1, 1, &[])).await.unwrap();
    let sent = delivery("r", "1", "delivered", now_ms());
    store.mark_delivered(id, now_ms(), sent).await.unwrap();
    assert_eq!(store.get(id).await.unwrap().unwrap().state, "delivered");
    let rerun = ReplayOutcome::Queued("queued".into());
    assert_eq!(store.replay(id).await.unwrap(), rerun);
    assert_eq!(store.get(id).await.unwrap().unwrap().answer, None);
    // Purge takes only the given state, older than the cut-off.
    store.claim(claim_req(1, 1, &[])).await.unwrap();
    store
        .mark_dead(id, Stage::Run, now_ms(), "x".into(), None)
        .await
        .unwrap();
    let dead = || "dead".to_owned();
    assert_eq!(
        store
            .purge("delivered".into(), now_ms() + 1, 10)
            .await
            .unwrap(),
        0
    );
    assert_eq!(store.purge(dead(), now_ms() - 60_000, 10).await.unwrap(), 0);
    assert_eq!(store.purge(dead(), now_ms() + 1, 10).await.unwrap(), 1);
    assert!(store.attempts(id).await.unwrap().is_empty());
    assert!(store.get(id).await.unwrap().is_none());
}

async fn a_release_gives_the_entry_back_unchanged(place: Arc<dyn Place>) {
    let store = place.open("one").await;
    store.enqueue(item("r", "1", now_ms())).await.unwrap();
    let id = store.claim(claim_req(1, 1, &[])).await.unwrap()[0].id;
    store.store_answer(id, "A".into(), now_ms()).await.unwrap();
    let why = "shutting down".to_owned();
    store
        .release(id, Stage::Delivery, now_ms(), why)
        .await
        .unwrap();
    let e = store.get(id).await.unwrap().unwrap();
    assert_eq!(
        (e.state.as_str(), e.answer.as_deref()),
        ("delivering", Some("A"))
    );
    let last = store.attempts(id).await.unwrap().pop().unwrap();
    assert_eq!(
        (last.outcome.as_str(), last.error.as_deref()),
        ("interrupted", Some("shutting down"))
    );
    assert_eq!(store.claim(claim_req(1, 1, &[])).await.unwrap()[0].id, id);
}

async fn large_payloads_are_read_back_whole(place: Arc<dyn Place>) {
    let store = place.open("one").await;
    let payload = serde_json::json!({
        "action": "opened",
        "pull_request": {"title": "Ünïcode ✓ title", "body": "line\n".repeat(300)},
    });
    let mut big = item("a", "big", 1_000);
    big.payload = payload.to_string();
    store.enqueue(big).await.unwrap();
    let mut text = item("a", "text", 1_000);
    text.payload = "not json \u{0} at all".into();
    store.enqueue(text).await.unwrap();
    // A NUL in a rendered prompt (from a JSON "\u0000") is no reason to refuse.
    let mut nul = item("a", "nul", 1_000);
    nul.prompt = "before\u{0}after".into();
    assert!(accepted(store.enqueue(nul).await.unwrap()));
    let all = store.list(InboxQuery::default()).await.unwrap();
    assert!(all[0].prompt.starts_with("before") && all[0].prompt.ends_with("after"));
    let all = &all[1..];
    assert_eq!(all[1].payload.value(), payload);
    // Listed as JSON, the payload is the object it is, not a string of it.
    let listed = serde_json::to_value(&all[1]).unwrap();
    assert_eq!(listed["payload"], payload);
    assert_eq!(all[0].payload.text(), "not json \u{0} at all");
    assert_eq!(
        serde_json::to_value(&all[0]).unwrap()["payload"],
        "not json \u{0} at all"
    );
}

async fn dedup_keys_survive_a_restart_and_a_purge(place: Arc<dyn Place>) {
    let store = place.open("one").await;
    let now = now_ms();
    for id in ["kept", "purged"] {
        store.enqueue(item("r", id, now - 1_000)).await.unwrap();
    }
    let old = item("r", "old", now - DEDUP_WINDOW_MS - 1);
    store.enqueue(old).await.unwrap();
    // A direct delivery's key; a route's keys are shared by its direct deliveries and
    // its inbox.
    let sent = delivery("d", "sent", "delivered", now - 1_000);
    store.record_delivery(sent, true).await.unwrap();
    let unmarked = delivery("d", "unmarked", "failed", now - 1_000);
    store.record_delivery(unmarked, false).await.unwrap();
    assert!(store.seen("d", "sent", now).await.unwrap());
    assert!(!store.seen("d", "unmarked", now).await.unwrap());
    assert_eq!(
        store.enqueue(item("d", "sent", now)).await.unwrap(),
        EnqueueOutcome::Duplicate
    );
    assert!(store.seen("r", "kept", now).await.unwrap());
    // Purging an entry keeps its key for the rest of the window.
    let purged = store.list(InboxQuery::default()).await.unwrap();
    let purged = purged
        .iter()
        .find(|i| i.delivery_id == "purged")
        .unwrap()
        .id;
    let mut all = claim_req(10, 10, &[]);
    all.now_ms = now;
    for claimed in store.claim(all).await.unwrap() {
        if claimed.id == purged {
            let sent = delivery("r", "purged", "delivered", now);
            store.mark_delivered(purged, now, sent).await.unwrap();
        }
    }
    let n = store
        .purge("delivered".into(), now_ms() + 1, 10)
        .await
        .unwrap();
    assert_eq!(n, 1);
    drop(store);

    let store = place.open("one").await;
    for (route, id) in [("r", "kept"), ("r", "purged"), ("d", "sent")] {
        let again = store.enqueue(item(route, id, now_ms())).await.unwrap();
        assert_eq!(again, EnqueueOutcome::Duplicate, "{route}/{id}");
        assert!(
            store.seen(route, id, now_ms()).await.unwrap(),
            "{route}/{id}"
        );
    }
    // Outside the window: accepted again.
    assert!(accepted(
        store.enqueue(item("r", "old", now_ms())).await.unwrap()
    ));
    assert!(!store.seen("r", "never", now_ms()).await.unwrap());
}

async fn deliveries_are_listed_newest_first_and_filtered(place: Arc<dyn Place>) {
    let store = place.open("one").await;
    let now = now_ms();
    let mut long = delivery("a", "1", "delivered", now);
    long.message = "é".repeat(3000);
    let first = store.record_delivery(long, false).await.unwrap();
    let second = store
        .record_delivery(delivery("a", "2", "failed", now), false)
        .await
        .unwrap();
    store
        .record_delivery(delivery("b", "1", "delivered", now), false)
        .await
        .unwrap();
    assert!(second > first);
    let all = store.deliveries(DeliveryQuery::default()).await.unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!((all[0].route.as_str(), all[2].id), ("b", first));
    // Messages are kept as a preview.
    let preview = crate::deliveries::MESSAGE_PREVIEW_CHARS;
    assert_eq!(all[2].message.chars().count(), preview);
    let q = DeliveryQuery {
        route: Some("a".into()),
        status: Some("failed".into()),
        ..Default::default()
    };
    let failed = store.deliveries(q).await.unwrap();
    assert_eq!(failed.len(), 1);
    assert_eq!(
        (failed[0].delivery_id.as_str(), failed[0].error.as_deref()),
        ("2", Some("502"))
    );
    let q = DeliveryQuery {
        delivery_id: Some("1".into()),
        limit: Some(1),
        ..Default::default()
    };
    assert_eq!(store.deliveries(q).await.unwrap().len(), 1);
}

async fn two_instances_accept_a_delivery_id_once(place: Arc<dyn Place>) {
    if !place.shared() {
        return;
    }
    let (a, b) = (place.open("a").await, place.open("b").await);
    for round in 0..20 {
        let id = format!("d{round}");
        let (x, y) = tokio::join!(
            a.enqueue(item("r", &id, now_ms())),
            b.enqueue(item("r", &id, now_ms()))
        );
        let n = usize::from(accepted(x.unwrap())) + usize::from(accepted(y.unwrap()));
        assert_eq!(n, 1, "round {round}");
    }
    let sent = delivery("d", "direct", "delivered", now_ms());
    a.record_delivery(sent, true).await.unwrap();
    assert!(b.seen("d", "direct", now_ms()).await.unwrap());
    assert_eq!(b.counts().await.unwrap(), a.counts().await.unwrap());
}

async fn two_instances_never_claim_one_entry_twice(place: Arc<dyn Place>) {
    if !place.shared() {
        return;
    }
    let (a, b) = (place.open("a").await, place.open("b").await);
    for n in 0..200 {
        a.enqueue(item("r", &n.to_string(), now_ms()))
            .await
            .unwrap();
    }
    let take = |s: Store| async move {
        let mut ids = Vec::new();
        loop {
            let got = s.claim(claim_req(7, 1000, &[])).await.unwrap();
            if got.is_empty() {
                return ids;
            }
            ids.extend(got.into_iter().map(|i| i.id));
        }
    };
    let (x, y) = tokio::join!(tokio::spawn(take(a)), tokio::spawn(take(b)));
    let (x, y) = (x.unwrap(), y.unwrap());
    let mut all: Vec<i64> = x.iter().chain(&y).copied().collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 200);
    assert_eq!(x.len() + y.len(), 200, "an entry was claimed twice");
}

async fn an_instance_takes_back_only_its_own_leases_and_a_dead_ones_when_they_expire(
    place: Arc<dyn Place>,
) {
    if !place.shared() {
        return;
    }
    let (a, b) = (place.open("a").await, place.open("b").await);
    for n in 0..4 {
        a.enqueue(item("r", &n.to_string(), now_ms()))
            .await
            .unwrap();
    }
    let mine = a.claim(claim_req(2, 10, &[])).await.unwrap();
    let theirs = b.claim(claim_req(2, 10, &[])).await.unwrap();
    assert_eq!((mine.len(), theirs.len()), (2, 2));
    // `a` restarts: its own two wait again at once, `b`'s stay with `b`.
    drop(a);
    let a = place.open("a").await;
    assert_eq!(a.recover().await.unwrap(), 2);
    let back = a.claim(claim_req(10, 10, &[])).await.unwrap();
    let mut back: Vec<i64> = back.iter().map(|i| i.id).collect();
    back.sort_unstable();
    let mut expected: Vec<i64> = mine.iter().map(|i| i.id).collect();
    expected.sort_unstable();
    assert_eq!(back, expected);
    // `b` dies: its entries wait for their lease to run out, then `a` takes them
    // over (the lost attempt is on record) and `b`'s late outcome changes nothing.
    drop(b);
    assert!(a.claim(claim_req(10, 10, &[])).await.unwrap().is_empty());
    a.renew_leases(back, now_ms() + 120_000).await.unwrap();
    let mut later = claim_req(10, 10, &[]);
    later.now_ms += 61_000;
    let taken = a.claim(later).await.unwrap();
    assert_eq!(taken.len(), 2);
    let lost = a.attempts(taken[0].id).await.unwrap();
    assert_eq!(lost.last().map(|l| l.outcome.as_str()), Some("interrupted"));
    let b = place.open("b").await;
    let late = delivery("r", "late", "delivered", now_ms());
    b.mark_delivered(taken[0].id, now_ms(), late).await.unwrap();
    assert_eq!(a.get(taken[0].id).await.unwrap().unwrap().state, "running");
}

async fn purges_take_batches_oldest_first_and_deliveries_by_outcome(place: Arc<dyn Place>) {
    let store = place.open("one").await;
    let now = now_ms();
    let mut ids = Vec::new();
    for n in 0..5 {
        let d = format!("p-{n}");
        let EnqueueOutcome::Accepted { id } = store.enqueue(item("r", &d, now)).await.unwrap()
        else {
            panic!("not accepted");
        };
        ids.push(id);
    }
    for id in &ids {
        store.claim(claim_req(1, 1, &[])).await.unwrap();
        let sent = delivery("r", "x", "delivered", now);
        store.mark_delivered(*id, now, sent).await.unwrap();
    }
    let cut = now_ms() + 1;
    assert_eq!(store.purge("delivered".into(), cut, 2).await.unwrap(), 2);
    // Oldest first.
    assert!(store.get(ids[0]).await.unwrap().is_none());
    assert!(store.get(ids[2]).await.unwrap().is_some());
    let rest = crate::retention::purge_entries(store.backend().as_ref(), "delivered", cut);
    assert_eq!(rest.await.unwrap(), 3);
    assert!(store.list(InboxQuery::default()).await.unwrap().is_empty());
    // The deliveries the entries recorded, and two failed ones, made long ago.
    let old = now - 40 * 86_400_000;
    for (id, status) in [("a", "delivered"), ("b", "failed"), ("c", "failed")] {
        store
            .record_delivery(delivery("d", id, status, old), false)
            .await
            .unwrap();
    }
    let before = now - 86_400_000;
    let gone = crate::retention::purge_deliveries(store.backend().as_ref(), true, before);
    assert_eq!(gone.await.unwrap(), 1);
    let left = store.deliveries(DeliveryQuery::default()).await.unwrap();
    assert_eq!(
        left.len(),
        7,
        "the recent ones and the failed old ones stay"
    );
    assert_eq!(store.purge_deliveries(false, before, 1).await.unwrap(), 1);
    assert_eq!(store.purge_deliveries(false, before, 10).await.unwrap(), 1);
    assert_eq!(store.purge_deliveries(true, before, 10).await.unwrap(), 0);
}

async fn a_cancelled_entry_never_runs_and_can_be_replayed(place: Arc<dyn Place>) {
    let store = place.open("one").await;
    let id_of = |o: EnqueueOutcome| match o {
        EnqueueOutcome::Accepted { id } => id,
        EnqueueOutcome::Duplicate => panic!("a duplicate"),
    };
    let a = id_of(store.enqueue(item("r", "c-a", now_ms())).await.unwrap());
    let b = id_of(store.enqueue(item("r", "c-b", now_ms())).await.unwrap());
    assert_eq!(store.cancel(a).await.unwrap(), CancelOutcome::Cancelled);
    assert_eq!(
        store.cancel(a).await.unwrap(),
        CancelOutcome::NotQueued("cancelled".into())
    );
    assert_eq!(
        store.cancel(a + b + 100).await.unwrap(),
        CancelOutcome::NotFound
    );
    let claimed = store.claim(claim_req(5, 5, &[])).await.unwrap();
    let ids: Vec<i64> = claimed.iter().map(|i| i.id).collect();
    assert_eq!(ids, [b], "the cancelled entry is never claimed");
    assert_eq!(
        store.cancel(b).await.unwrap(),
        CancelOutcome::NotQueued("running".into())
    );
    let counts = store.counts().await.unwrap();
    assert!(counts.contains(&("cancelled".to_owned(), 1)), "{counts:?}");
    let again = ReplayOutcome::Queued("queued".into());
    assert_eq!(store.replay(a).await.unwrap(), again);
    let outcomes: Vec<String> = store
        .attempts(a)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.outcome)
        .collect();
    assert_eq!(outcomes, ["cancelled", "replayed"]);
    let claimed = store.claim(claim_req(5, 5, &[])).await.unwrap();
    assert_eq!(claimed.iter().map(|i| i.id).collect::<Vec<_>>(), [a]);
}

async fn events_are_paged_filtered_and_searched(place: Arc<dyn Place>) {
    use crate::events::EventQuery;
    let store = place.open("one").await;
    let now = now_ms();
    for n in 0..6 {
        let mut it = item(
            if n % 2 == 0 { "even" } else { "odd" },
            &format!("evt-{n}"),
            now + n,
        );
        it.prompt = format!("prompt number {n} about the 50% discount_{n}");
        store.enqueue(it).await.unwrap();
    }
    store.keep_search_index();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while store.search_index_behind().await.unwrap() {
        assert!(
            std::time::Instant::now() < deadline,
            "the search index caught up"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // One more, not indexed yet: searches still find it.
    let mut late = item("odd", "evt-late", now + 10);
    late.prompt = "a needle in the haystack".into();
    store.enqueue(late).await.unwrap();
    let q = |f: fn(&mut EventQuery)| {
        let mut q = EventQuery {
            limit: 100,
            ..EventQuery::default()
        };
        f(&mut q);
        q
    };
    let ids = |page: Vec<crate::events::EventSummary>| {
        page.into_iter().map(|e| e.delivery_id).collect::<Vec<_>>()
    };
    let all = store.events(q(|_| {})).await.unwrap();
    assert_eq!(all.len(), 7);
    assert_eq!(all[0].delivery_id, "evt-late", "newest first");
    assert!(all[1].prompt.starts_with("prompt number 5"));
    let page = store
        .events(q(|q| {
            q.limit = 2;
        }))
        .await
        .unwrap();
    let next = EventQuery {
        limit: 2,
        before_id: Some(page[1].id),
        ..EventQuery::default()
    };
    assert_eq!(ids(store.events(next).await.unwrap()), ["evt-4", "evt-3"]);
    let even = store
        .events(q(|q| q.route = Some("even".into())))
        .await
        .unwrap();
    assert_eq!(ids(even), ["evt-4", "evt-2", "evt-0"]);
    let one = store
        .events(q(|q| q.delivery_id = Some("evt-3".into())))
        .await
        .unwrap();
    assert_eq!(ids(one), ["evt-3"]);
    let found = store
        .events(q(|q| q.search = Some("number 2".into())))
        .await
        .unwrap();
    assert_eq!(ids(found), ["evt-2"]);
    let found = store
        .events(q(|q| q.search = Some("needle".into())))
        .await
        .unwrap();
    assert_eq!(
        ids(found),
        ["evt-late"],
        "the unindexed tail is searched too"
    );
    let found = store
        .events(q(|q| q.search = Some("EVT-4".into())))
        .await
        .unwrap();
    assert_eq!(ids(found), ["evt-4"], "case does not matter");
    let found = store
        .events(q(|q| q.search = Some("0% d".into())))
        .await
        .unwrap();
    assert_eq!(found.len(), 6, "% is a character, not a wildcard");
    let found = store
        .events(q(|q| q.search = Some("t_5".into())))
        .await
        .unwrap();
    assert_eq!(ids(found), ["evt-5"], "_ is a character, not a wildcard");
    let none = store
        .events(q(|q| q.search = Some("zz".into())))
        .await
        .unwrap();
    assert!(none.is_empty());
    let later = store
        .events(q(|q| q.since_ms = Some(now_ms() + 1_000)))
        .await
        .unwrap();
    assert!(later.is_empty());
}

/// A chat platform's messages (`chat:` routes) and the webhook routes' events are
/// claimed apart: neither worker takes the other's, however many wait ahead; nor does
/// one platform's door take another's.
async fn chat_entries_are_claimed_only_by_the_chat_door(place: Arc<dyn Place>) {
    let store = place.open("one").await;
    let t = now_ms();
    for i in 0..70 {
        let chat = item("chat:telegram:7", &i.to_string(), t);
        assert!(accepted(store.enqueue(chat).await.unwrap()));
    }
    assert!(accepted(store.enqueue(item("hook", "h", t)).await.unwrap()));
    assert!(accepted(
        store.enqueue(item("chat:slack:A1", "s", t)).await.unwrap()
    ));
    let hooks = store.claim(claim_req(10, 10, &[])).await.unwrap();
    assert_eq!(hooks.len(), 1, "the webhook entry behind 70 chat ones");
    assert_eq!(hooks[0].route, "hook");
    let mut chat = claim_req(100, 100, &[]);
    chat.scope = ClaimScope::Chat("telegram");
    let chats = store.claim(chat).await.unwrap();
    assert_eq!(chats.len(), 70);
    assert!(chats.iter().all(|c| c.route == "chat:telegram:7"));
    let mut slack = claim_req(100, 100, &[]);
    slack.scope = ClaimScope::Chat("slack");
    let slacks = store.claim(slack).await.unwrap();
    assert_eq!(slacks.len(), 1);
    assert_eq!(slacks[0].route, "chat:slack:A1");
}
