//! Working one claimed entry: the agent run unless an answer is stored, then the
//! delivery; transient failures wait and retry, permanent ones make the entry dead.

use super::Shared;
use super::agent_run::{RunOutcome, run_agent};
use herald_deliver::OutgoingMessage;
use herald_store::{InboxItem, NewDelivery, Stage, now_ms};
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// The error of an entry whose run an operator stopped (the dashboard's Stop).
const STOPPED_BY_OPERATOR: &str = "the run was stopped by an operator (the dashboard's Stop)";

/// Works one claimed entry: runs the agent unless an answer is stored, then delivers.
pub(super) async fn process(shared: &Arc<Shared>, item: InboxItem) {
    let store = &shared.gateway.store;
    let started = now_ms();
    let item = if item.answer.is_some() {
        item
    } else {
        match run_agent(shared, &item).await {
            RunOutcome::Answer(answer) => {
                if let Err(e) = store.store_answer(item.id, answer.clone(), started).await {
                    // Not stored: the entry keeps its lease and is run again later.
                    tracing::error!(inbox_id = item.id, error = %e, "cannot store the answer");
                    return;
                }
                // As stored: the run's failure counters are cleared and this is the
                // first delivery attempt, with a retry window of its own.
                InboxItem {
                    answer: Some(answer),
                    failures: 0,
                    failing_since_ms: None,
                    delivery_attempts: 1,
                    ..item
                }
            }
            RunOutcome::Retry(error) => {
                fail_later(shared, &item, Stage::Run, started, error, None).await;
                return;
            }
            RunOutcome::Dead(error) => {
                tracing::warn!(inbox_id = item.id, route = %item.route, delivery_id = %item.delivery_id, error = %error, "agent run failed permanently; entry is dead");
                let dead = store.mark_dead(item.id, Stage::Run, started, error, None);
                log_store_error(item.id, dead.await);
                return;
            }
            RunOutcome::Interrupted
                if !shared
                    .interrupting
                    .load(std::sync::atomic::Ordering::SeqCst) =>
            {
                // Stopped by an operator, not by the shutdown: it does not run again by
                // itself (a replay runs it again).
                let why = STOPPED_BY_OPERATOR.to_owned();
                tracing::info!(inbox_id = item.id, route = %item.route, delivery_id = %item.delivery_id, "agent run stopped by an operator; entry is dead");
                let dead = store.mark_dead(item.id, Stage::Run, started, why, None);
                log_store_error(item.id, dead.await);
                return;
            }
            RunOutcome::Interrupted => {
                let why = "interrupted at shutdown".to_owned();
                let released = store.release(item.id, Stage::Run, started, why);
                log_store_error(item.id, released.await);
                return;
            }
        }
    };
    deliver(shared, &item, now_ms()).await;
}

/// The record of an entry's delivery outcome (`delivered` or `failed`).
fn delivery_record(item: &InboxItem, status: &str, error: Option<String>) -> NewDelivery {
    let now = now_ms();
    NewDelivery {
        kind: "agent".into(),
        route: item.route.clone(),
        delivery_id: item.delivery_id.clone(),
        target: item.deliver.clone(),
        status: status.into(),
        attempts: item.delivery_attempts.max(1) as u32,
        latency_ms: (now - item.received_at_ms).max(0) as u64,
        error,
        message: item.answer.clone().unwrap_or_default(),
        created_at_ms: now,
    }
}

/// Sends the entry's stored answer to its target.
async fn deliver(shared: &Shared, item: &InboxItem, started: i64) {
    let store = &shared.gateway.store;
    let target = match shared.gateway.targets.get(&item.deliver) {
        Ok(t) => t,
        Err(why) => {
            tracing::warn!(inbox_id = item.id, route = %item.route, target = %item.deliver, error = %why, "answer cannot be delivered; entry is dead");
            let rec = delivery_record(item, "failed", Some(why.clone()));
            let dead = store.mark_dead(item.id, Stage::Delivery, started, why, Some(rec));
            log_store_error(item.id, dead.await);
            return;
        }
    };
    let extra: Map<String, Value> = match &item.deliver_extra {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    let message = OutgoingMessage::new(item.answer.clone().unwrap_or_default(), extra);
    match herald_deliver::send_once(target.as_ref(), &message).await {
        Ok(_) => {
            tracing::info!(inbox_id = item.id, route = %item.route, delivery_id = %item.delivery_id, target = %item.deliver, "answer delivered");
            let rec = delivery_record(item, "delivered", None);
            log_store_error(item.id, store.mark_delivered(item.id, started, rec).await);
        }
        Err(e) if e.retryable => {
            let (error, after) = (e.message, e.retry_after);
            fail_later(shared, item, Stage::Delivery, started, error, after).await;
        }
        Err(e) => {
            tracing::warn!(inbox_id = item.id, route = %item.route, target = %item.deliver, error = %e, "target refused the answer; entry is dead");
            let rec = delivery_record(item, "failed", Some(e.message.clone()));
            let dead = store.mark_dead(item.id, Stage::Delivery, started, e.message, Some(rec));
            log_store_error(item.id, dead.await);
        }
    }
}

/// A transient failure: wait and try again, or give up once the stage has failed for
/// longer than the retry window.
async fn fail_later(
    shared: &Shared,
    item: &InboxItem,
    stage: Stage,
    started: i64,
    error: String,
    retry_after: Option<Duration>,
) {
    let store = &shared.gateway.store;
    let backoff = &shared.backoff;
    let since = item.failing_since_ms.unwrap_or(started);
    let failures = item.failures.max(0) as u32 + 1;
    let now = now_ms();
    if now - since >= backoff.retry_for.as_millis() as i64 {
        let error = format!(
            "gave up after {failures} failed {} attempts over {} s: {error}",
            stage.as_str(),
            (now - since) / 1000
        );
        tracing::warn!(inbox_id = item.id, route = %item.route, error = %error, "retries used up; entry is dead");
        let delivery = (stage == Stage::Delivery)
            .then(|| delivery_record(item, "failed", Some(error.clone())));
        log_store_error(
            item.id,
            store
                .mark_dead(item.id, stage, started, error, delivery)
                .await,
        );
        return;
    }
    // A platform's Retry-After is honoured up to the retry window (past it the entry
    // would be given up on anyway).
    let asked = retry_after.unwrap_or_default().min(backoff.retry_for);
    let wait = backoff.wait(failures).max(asked);
    tracing::info!(inbox_id = item.id, route = %item.route, stage = stage.as_str(), attempt = failures, wait_ms = wait.as_millis() as u64, error = %error, "transient failure; will retry");
    log_store_error(
        item.id,
        store
            .retry_later(
                item.id,
                stage,
                started,
                now.saturating_add(i64::try_from(wait.as_millis()).unwrap_or(i64::MAX)),
                error,
            )
            .await,
    );
}

pub(super) fn log_store_error(id: i64, r: Result<(), herald_store::StoreError>) {
    if let Err(e) = r {
        // The lease runs out and the entry is worked again: at-least-once.
        tracing::error!(inbox_id = id, error = %e, "cannot record the outcome; the entry will be worked again");
    }
}
