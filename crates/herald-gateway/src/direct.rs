//! Direct delivery (`deliver_only: true`, spec §14.2): the rendered prompt is sent inline
//! with retries; the dedup key is recorded only when the send succeeded, and concurrent
//! requests with the same delivery id send once.

use crate::answer::Answer;
use herald_deliver::{OutgoingMessage, RetryPolicy, TargetSet, send_with_retries};
use herald_store::{NewDelivery, Store};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// One direct delivery to make.
pub struct DirectSend<'a> {
    pub route: &'a str,
    pub deliver: &'a str,
    pub delivery_id: &'a str,
    pub message: OutgoingMessage,
    pub now_ms: i64,
}

/// One lock per (route, delivery id) being delivered.
type KeyLock = Arc<tokio::sync::Mutex<()>>;

/// Serialises requests that carry the same (route, delivery id).
#[derive(Default)]
pub struct InFlight {
    keys: Mutex<HashMap<(String, String), KeyLock>>,
}

impl InFlight {
    fn lock_for(&self, route: &str, id: &str) -> KeyLock {
        let mut keys = match self.keys.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        keys.entry((route.to_owned(), id.to_owned()))
            .or_default()
            .clone()
    }

    fn release(&self, route: &str, id: &str, lock: KeyLock) {
        let mut keys = match self.keys.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        // Two references: the map's and ours. Anyone else waiting keeps the entry alive.
        if Arc::strong_count(&lock) <= 2 {
            keys.remove(&(route.to_owned(), id.to_owned()));
        }
    }
}

/// Sends, records and answers.
pub async fn deliver(
    store: &Store,
    targets: &TargetSet,
    in_flight: &InFlight,
    send: DirectSend<'_>,
) -> Answer {
    let lock = in_flight.lock_for(send.route, send.delivery_id);
    let answer = {
        let _guard = lock.lock().await;
        deliver_locked(store, targets, &send).await
    };
    in_flight.release(send.route, send.delivery_id, lock);
    answer
}

async fn deliver_locked(store: &Store, targets: &TargetSet, send: &DirectSend<'_>) -> Answer {
    let (route, id) = (send.route, send.delivery_id);
    match store.seen(route, id, send.now_ms).await {
        Ok(true) => {
            tracing::info!(route, delivery_id = id, "duplicate");
            return Answer::duplicate(id);
        }
        Ok(false) => {}
        Err(e) => {
            tracing::error!(route, delivery_id = id, error = %e, "not delivered: store unavailable");
            return Answer::unavailable();
        }
    }
    let started = Instant::now();
    let (result, attempts) = match targets.get(send.deliver) {
        Ok(target) => {
            let attempted =
                send_with_retries(target.as_ref(), &send.message, &RetryPolicy::direct()).await;
            (attempted.result.map_err(|e| e.message), attempted.attempts)
        }
        Err(why) => (Err(why), 0),
    };
    let latency_ms = started.elapsed().as_millis() as u64;
    let delivered = result.is_ok();
    let record = NewDelivery {
        kind: "direct".into(),
        route: route.to_owned(),
        delivery_id: id.to_owned(),
        target: send.deliver.to_owned(),
        status: if delivered { "delivered" } else { "failed" }.into(),
        attempts,
        latency_ms,
        error: result.as_ref().err().cloned(),
        message: send.message.text.clone(),
        created_at_ms: send.now_ms,
    };
    if let Err(e) = store.record_delivery(record, delivered).await {
        // The message went out but its dedup key could not be kept: say so loudly; the
        // sender still gets the truth about the send.
        tracing::error!(route, delivery_id = id, error = %e, "delivery not recorded in the store");
    }
    match result {
        Ok(_) => {
            tracing::info!(
                route,
                delivery_id = id,
                target = send.deliver,
                attempts,
                latency_ms,
                "delivered"
            );
            Answer::delivered(route, send.deliver, id)
        }
        Err(error) => {
            tracing::warn!(route, delivery_id = id, target = send.deliver, attempts, latency_ms, %error, "delivery failed");
            Answer::delivery_failed(id)
        }
    }
}
