//! `inbox.retention`: a background task that deletes delivered entries (30 days by
//! default) and dead and cancelled ones (90 days), and the delivery records of the
//! same ages, a batch at a time so that the writer is never held for long.

use herald_config::inbox_settings::Retention;
use herald_store::{Store, now_ms, retention};
use std::time::Duration;

/// How often the task looks for what to delete (`HERALD_RETENTION_EVERY_MS` in tests).
const EVERY: Duration = Duration::from_secs(60);

/// Starts the task; it runs for as long as the process does.
pub fn spawn(store: Store, keep: Retention) {
    if keep.delivered.is_none() && keep.dead.is_none() {
        return;
    }
    let every = std::env::var("HERALD_RETENTION_EVERY_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(EVERY, Duration::from_millis);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            prune(&store, &keep).await;
        }
    });
}

/// One pass: each kind of row older than its keep.
async fn prune(store: &Store, keep: &Retention) {
    let backend = store.backend().as_ref();
    let finished = [
        ("delivered", keep.delivered),
        ("dead", keep.dead),
        ("cancelled", keep.dead),
    ];
    for (state, kept) in finished {
        let Some(before) = cut(kept) else {
            continue;
        };
        match retention::purge_entries(backend, state, before).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(state, removed = n, "retention: old inbox entries removed"),
            Err(e) => {
                tracing::warn!(state, error = %e, "retention: cannot remove old inbox entries")
            }
        }
        if state == "cancelled" {
            continue;
        }
        let delivered = state == "delivered";
        match retention::purge_deliveries(backend, delivered, before).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                delivered,
                removed = n,
                "retention: old delivery records removed"
            ),
            Err(e) => tracing::warn!(error = %e, "retention: cannot remove old delivery records"),
        }
    }
}

/// The time before which rows kept for `kept` go.
fn cut(kept: Option<Duration>) -> Option<i64> {
    let kept = i64::try_from(kept?.as_millis()).unwrap_or(i64::MAX);
    Some(now_ms().saturating_sub(kept))
}
