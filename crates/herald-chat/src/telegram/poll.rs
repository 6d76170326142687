//! Long polling, durable before acknowledged: each batch of `getUpdates` is committed
//! to the inbox (the update id as its dedup key) before the next call's `offset`
//! confirms it to Telegram. Pending updates are never dropped: what Telegram kept while
//! herald was down is fetched and answered at start.

use super::api::{ApiError, BotApi};
use crate::BotStatus;
use herald_store::{Store, now_ms};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};

/// The longest pause after failures in a row.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// A poll that neither answers nor fails for its long-poll wait plus this long has
/// stalled (the client's own timeout is 20 s).
const STALL_MARGIN: Duration = Duration::from_secs(45);

/// One bot's poller.
#[derive(Clone)]
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
            self.status.progressed();
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
            // A pause is progress (a long `retry_after` is no stall).
            let until = tokio::time::Instant::now() + pause;
            while tokio::time::Instant::now() < until {
                tokio::select! {
                    _ = crate::stopped(&mut stop) => return,
                    _ = tokio::time::sleep_until(until.min(tokio::time::Instant::now() + Duration::from_secs(10))) => {}
                }
                self.status.progressed();
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
    let id = id.to_string();
    let update = crate::intake::Update {
        route,
        platform: "telegram",
        kind,
        id: &id,
        payload: update,
    };
    crate::intake::commit(store, update, status).await
}

/// Polls while this instance holds the bot's poll ([`crate::hold`]).
pub async fn poll_while_held(poller: Poller, stop: watch::Receiver<bool>) {
    let key = format!("poll:{}", poller.route);
    let (store, status) = (poller.store.clone(), poller.status.clone());
    let again = stop.clone();
    let serve = move || supervise(poller.clone(), again.clone());
    crate::hold::serve_while_held(
        &store,
        &key,
        &status,
        "telegram: the bot's poll",
        serve,
        stop,
    )
    .await
}

/// Runs the poller until `stop`, starting it again (with a backoff, counted) when it
/// stops making progress.
pub async fn supervise(poller: Poller, stop: watch::Receiver<bool>) {
    let stall = poller.long_poll + STALL_MARGIN;
    let status = poller.status.clone();
    let again = stop.clone();
    keep_alive(
        move || poller.clone().run(again.clone()),
        &status,
        stall,
        stop,
    )
    .await
}

/// Runs what `start` makes until it ends, starting it again when `status` saw no
/// progress for `stall`.
pub(crate) async fn keep_alive<F, Fut>(
    start: F,
    status: &BotStatus,
    stall: Duration,
    mut stop: watch::Receiver<bool>,
) where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let mut restarts = 0u32;
    loop {
        status.progressed();
        let mut task = tokio::spawn(start());
        loop {
            tokio::select! {
                ended = &mut task => match ended {
                    Err(e) if e.is_panic() => {
                        tracing::error!("telegram: the poller panicked; it is started again");
                        break;
                    }
                    _ => return,
                },
                _ = tokio::time::sleep(stall / 4) => {}
            }
            if status.since_progress() > stall {
                break;
            }
        }
        task.abort();
        status.restarted();
        restarts += 1;
        tracing::warn!(
            stalled_s = stall.as_secs(),
            restarts,
            "telegram: the long poll made no progress; it is started again"
        );
        status.failed(format!(
            "the long poll stalled; started again ({restarts} times)"
        ));
        tokio::select! {
            _ = crate::stopped(&mut stop) => return,
            _ = tokio::time::sleep(backoff(restarts)) => {}
        }
    }
}

/// 1 s, doubling, at most [`MAX_BACKOFF`].
fn backoff(failures: u32) -> Duration {
    let secs = 1u64 << failures.saturating_sub(1).min(6);
    Duration::from_secs(secs).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A poll that hangs is started again, with a backoff, and counted; one that
    /// makes progress is left alone.
    #[tokio::test(start_paused = true)]
    async fn a_stalled_poll_is_started_again_and_counted() {
        let status = Arc::new(BotStatus::new("telegram", "long polling".into()));
        let (_stop_tx, stop) = watch::channel(false);
        let starts = Arc::new(AtomicU32::new(0));
        let (s, st, watched) = (starts.clone(), status.clone(), status.clone());
        let supervisor = tokio::spawn(async move {
            keep_alive(
                move || {
                    let n = s.fetch_add(1, Ordering::SeqCst);
                    let st = st.clone();
                    async move {
                        if n < 2 {
                            // Hangs: no poll answers.
                            std::future::pending::<()>().await;
                        }
                        // Makes progress, then ends (as on stop).
                        for _ in 0..5 {
                            st.progressed();
                            tokio::time::sleep(Duration::from_secs(10)).await;
                        }
                    }
                },
                &watched,
                Duration::from_secs(60),
                stop,
            )
            .await
        });
        tokio::time::sleep(Duration::from_secs(400)).await;
        assert!(supervisor.is_finished());
        assert_eq!(starts.load(Ordering::SeqCst), 3);
        use herald_metrics::bots::ReportsBot;
        assert_eq!(status.report().poll_restarts, 2);
    }
}
