//! Working one claimed entry: the agent run unless an answer is stored, then the
//! delivery; transient failures wait and retry, permanent ones make the entry dead.

use super::Shared;
use super::agent_run::{RunOutcome, run_agent};
use herald_deliver::OutgoingMessage;
use herald_store::{InboxItem, NewDelivery, Stage, now_ms};
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// Works one claimed entry: runs the agent unless an answer is stored, then delivers.
pub(super) async fn process(shared: &Arc<Shared>, item: InboxItem) {
    let store = &shared.gateway.store;
    let started = now_ms();
    let claimed_stage = Stage::of(&item);
    let answer = match item.answer.clone() {
        Some(answer) => answer,
        None => match run_agent(shared, &item).await {
            RunOutcome::Answer(answer) => {
                if let Err(e) = store.store_answer(item.id, answer.clone(), started).await {
                    // Not stored: the entry keeps its lease and is run again later.
                    tracing::error!(inbox_id = item.id, error = %e, "cannot store the answer");
                    return;
                }
                answer
            }
            RunOutcome::Retry(error) => {
                fail_later(shared, &item, Stage::Run, started, error, None).await;
                return;
            }
            RunOutcome::Dead(error) => {
                tracing::warn!(inbox_id = item.id, route = %item.route, delivery_id = %item.delivery_id, error = %error, "agent run failed permanently; entry is dead");
                log_store_error(
                    item.id,
                    store
                        .mark_dead(item.id, Stage::Run, started, error, None)
                        .await,
                );
                return;
            }
            RunOutcome::Interrupted => {
                log_store_error(
                    item.id,
                    store
                        .release(
                            item.id,
                            Stage::Run,
                            started,
                            "interrupted at shutdown".into(),
                        )
                        .await,
                );
                return;
            }
        },
    };
    // A delivery right after a fresh answer starts its own retry window.
    let delivery_started = now_ms();
    let fresh = claimed_stage == Stage::Run;
    deliver(shared, &item, answer, delivery_started, fresh).await;
}

async fn deliver(shared: &Shared, item: &InboxItem, answer: String, started: i64, fresh: bool) {
    let store = &shared.gateway.store;
    let record = |status: &str, attempts: i64, error: Option<String>, text: &str| NewDelivery {
        kind: "agent".into(),
        route: item.route.clone(),
        delivery_id: item.delivery_id.clone(),
        target: item.deliver.clone(),
        status: status.into(),
        attempts: attempts.max(1) as u32,
        latency_ms: (now_ms() - item.received_at_ms).max(0) as u64,
        error,
        message: text.to_owned(),
        created_at_ms: now_ms(),
    };
    let attempts = if fresh { 1 } else { item.delivery_attempts };
    let target = match shared.gateway.targets.get(&item.deliver) {
        Ok(t) => t,
        Err(why) => {
            tracing::warn!(inbox_id = item.id, route = %item.route, target = %item.deliver, error = %why, "answer cannot be delivered; entry is dead");
            let rec = record("failed", attempts, Some(why.clone()), &answer);
            log_store_error(
                item.id,
                store
                    .mark_dead(item.id, Stage::Delivery, started, why, Some(rec))
                    .await,
            );
            return;
        }
    };
    let extra: Map<String, Value> = match &item.deliver_extra {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    let message = OutgoingMessage::new(answer.clone(), extra);
    match target.send(&message).await {
        Ok(_) => {
            tracing::info!(inbox_id = item.id, route = %item.route, delivery_id = %item.delivery_id, target = %item.deliver, "answer delivered");
            let rec = record("delivered", attempts, None, &answer);
            log_store_error(item.id, store.mark_delivered(item.id, started, rec).await);
        }
        Err(e) if e.retryable => {
            let item = if fresh {
                // The claimed row's failure counters were the run's.
                InboxItem {
                    failures: 0,
                    failing_since_ms: None,
                    delivery_attempts: 1,
                    ..item.clone()
                }
            } else {
                item.clone()
            };
            fail_later(
                shared,
                &item,
                Stage::Delivery,
                started,
                e.message,
                e.retry_after,
            )
            .await;
        }
        Err(e) => {
            tracing::warn!(inbox_id = item.id, route = %item.route, target = %item.deliver, error = %e, "target refused the answer; entry is dead");
            let rec = record("failed", attempts, Some(e.message.clone()), &answer);
            log_store_error(
                item.id,
                store
                    .mark_dead(item.id, Stage::Delivery, started, e.message, Some(rec))
                    .await,
            );
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
    let backoff = &shared.settings.backoff;
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
        let delivery = (stage == Stage::Delivery).then(|| NewDelivery {
            kind: "agent".into(),
            route: item.route.clone(),
            delivery_id: item.delivery_id.clone(),
            target: item.deliver.clone(),
            status: "failed".into(),
            attempts: item.delivery_attempts.max(1) as u32,
            latency_ms: (now - item.received_at_ms).max(0) as u64,
            error: Some(error.clone()),
            message: item.answer.clone().unwrap_or_default(),
            created_at_ms: now,
        });
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
