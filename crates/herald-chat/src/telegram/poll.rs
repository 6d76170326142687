//! Long polling, durable before acknowledged: each batch of `getUpdates` is committed
//! to the inbox (the update id as its dedup key) before the next call's `offset`
//! confirms it to Telegram. Pending updates are never dropped: what Telegram kept while
//! herald was down is fetched and answered at start.

use super::api::{ApiError, BotApi};
use crate::BotStatus;
use herald_store::{EnqueueOutcome, NewInboxItem, Store, now_ms};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};

/// The longest pause after failures in a row.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// One bot's poller.
pub struct Poller {
    pub api: BotApi,
    pub store: Store,
    /// The inbox route of this bot's updates (`chat:telegram:<bot id>`).
    pub route: String,
    /// Woken when updates were committed.
    pub wake: Arc<Notify>,
    pub status: Arc<BotStatus>,
    /// How long one poll waits (shorter in tests).
    pub long_poll: Duration,
}

impl Poller {
    /// Polls until `stop` is set.
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        self.forget_webhook().await;
        let mut offset: Option<i64> = None;
        let mut failures = 0u32;
        loop {
            let polled = tokio::select! {
                _ = crate::stopped(&mut stop) => return,
                polled = self.poll(offset) => polled,
            };
            let pause = match polled {
                Ok(next) => {
                    failures = 0;
                    offset = next.or(offset);
                    continue;
                }
                Err(wait) => wait,
            };
            failures += 1;
            let pause = pause.unwrap_or_else(|| backoff(failures));
            tokio::select! {
                _ = crate::stopped(&mut stop) => return,
                _ = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// Long polling needs no webhook; pending updates stay (never dropped).
    async fn forget_webhook(&self) {
        let body = json!({"drop_pending_updates": false});
        if let Err(e) = self
            .api
            .call::<Value>("deleteWebhook", &body, Duration::ZERO)
            .await
        {
            tracing::warn!(error = %e, "telegram: deleteWebhook failed; polling anyway");
        }
    }

    /// One `getUpdates` and the commit of what it brought: the next offset, or how
    /// long to wait (`None`: the backoff).
    async fn poll(&self, offset: Option<i64>) -> Result<Option<i64>, Option<Duration>> {
        let mut body = json!({
            "timeout": self.long_poll.as_secs(),
            "allowed_updates": ["message", "callback_query"],
        });
        if let Some(o) = offset {
            body["offset"] = json!(o);
        }
        let updates = match self
            .api
            .call::<Vec<Value>>("getUpdates", &body, self.long_poll)
            .await
        {
            Ok(u) => u,
            Err(e) => return Err(self.failed(&e)),
        };
        self.status.polled(now_ms());
        let mut next = None;
        for update in &updates {
            let Some(id) = update.get("update_id").and_then(Value::as_i64) else {
                tracing::warn!("telegram: an update without update_id is skipped");
                continue;
            };
            if let Err(e) = self.commit(id, update).await {
                tracing::error!(error = %e, update_id = id, "telegram: cannot store an update; it is fetched again");
                // Those stored before it are confirmed; it and the rest come again.
                return match next {
                    Some(n) => Ok(Some(n)),
                    None => Err(None),
                };
            }
            next = Some(id.saturating_add(1));
        }
        if next.is_some() {
            self.wake.notify_one();
        }
        Ok(next)
    }

    async fn commit(&self, id: i64, update: &Value) -> Result<(), herald_store::StoreError> {
        store_update(&self.store, &self.route, id, update, &self.status).await
    }

    /// Says why a poll failed (once per kind of failure in a row) and how long to wait.
    fn failed(&self, e: &ApiError) -> Option<Duration> {
        self.status.failed(e.to_string());
        match e {
            ApiError::Flood(wait) => Some(*wait),
            ApiError::Conflict(_) => {
                tracing::error!(
                    "telegram: another poller (Hermes?) holds this bot's token: getUpdates answered 409 Conflict; turn off the other gateway's Telegram adapter"
                );
                None
            }
            other => {
                tracing::warn!(error = %other, "telegram: getUpdates failed");
                None
            }
        }
    }
}

/// Commits one update to the inbox under `route`, its id as the dedup key; resolves
/// once it is durable (a duplicate stores nothing).
pub(crate) async fn store_update(
    store: &Store,
    route: &str,
    id: i64,
    update: &Value,
    status: &BotStatus,
) -> Result<(), herald_store::StoreError> {
    let kind = ["message", "callback_query"]
        .into_iter()
        .find(|k| update.get(k).is_some())
        .unwrap_or("other");
    let item = NewInboxItem {
        route: route.to_owned(),
        event_type: kind.to_owned(),
        delivery_id: id.to_string(),
        received_at_ms: now_ms(),
        profile: None,
        headers: "{}".into(),
        payload: update.to_string(),
        prompt: String::new(),
        deliver: "telegram".into(),
        deliver_extra: "{}".into(),
        skills: "[]".into(),
        toolsets: None,
    };
    match store.enqueue(item).await? {
        EnqueueOutcome::Accepted { .. } => status.received(),
        EnqueueOutcome::Duplicate => {
            tracing::debug!(update_id = id, "telegram: update seen before")
        }
    }
    Ok(())
}

/// 1 s, doubling, at most [`MAX_BACKOFF`].
fn backoff(failures: u32) -> Duration {
    let secs = 1u64 << failures.saturating_sub(1).min(6);
    Duration::from_secs(secs).min(MAX_BACKOFF)
}
