//! Direct delivery (`deliver_only: true`, spec §14.2): the rendered prompt is sent inline
//! with retries; the dedup key is recorded only when the send succeeded, and concurrent
//! requests with the same delivery id send once (the others get its outcome).

use crate::answer::Answer;
use crate::live_targets::LiveTargets;
use herald_deliver::{OutgoingMessage, RetryPolicy, send_with_retries};
use herald_store::{NewDelivery, Store};
use herald_webhook::quoted::cut;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// One direct delivery to make.
pub struct DirectSend<'a> {
    pub route: &'a str,
    pub deliver: &'a str,
    pub delivery_id: &'a str,
    pub message: OutgoingMessage,
    pub now_ms: i64,
}

/// The outcome of one in-flight send, for the requests waiting on it.
type Outcome = tokio::sync::watch::Receiver<Option<Answer>>;

/// The sends in flight per (route, delivery id): the first request sends, later ones
/// with the same key wait for its outcome instead of each retrying a failing target.
#[derive(Default)]
pub struct InFlight {
    keys: Mutex<HashMap<(String, String), Outcome>>,
}

/// What a request does about its key.
enum Role<'a> {
    /// Send, then publish the answer (the guard removes the key, even if cancelled).
    Send(SendGuard<'a>),
    /// Wait for the request that is sending.
    Wait(Outcome),
}

/// Publishes a sender's answer; its key leaves the in-flight map when the answer is
/// published, or when the sending request is cancelled.
struct SendGuard<'a> {
    in_flight: &'a InFlight,
    key: (String, String),
    outcome: tokio::sync::watch::Sender<Option<Answer>>,
    published: bool,
}

impl SendGuard<'_> {
    /// Later requests send on their own; the ones already waiting get `answer`.
    fn publish(mut self, answer: &Answer) {
        lock(&self.in_flight.keys).remove(&self.key);
        self.published = true;
        let _ = self.outcome.send(Some(answer.clone()));
    }
}

impl Drop for SendGuard<'_> {
    fn drop(&mut self) {
        if !self.published {
            lock(&self.in_flight.keys).remove(&self.key);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl InFlight {
    fn role(&self, route: &str, id: &str) -> Role<'_> {
        let key = (route.to_owned(), id.to_owned());
        let mut keys = lock(&self.keys);
        if let Some(outcome) = keys.get(&key) {
            return Role::Wait(outcome.clone());
        }
        let (outcome, receiver) = tokio::sync::watch::channel(None);
        keys.insert(key.clone(), receiver);
        Role::Send(SendGuard {
            in_flight: self,
            key,
            outcome,
            published: false,
        })
    }
}

/// Sends, records and answers; a request whose delivery id is being sent by another
/// gets that send's outcome (a success as `duplicate`, since its key is now recorded).
pub async fn deliver(
    store: &Store,
    targets: &LiveTargets,
    in_flight: &InFlight,
    send: DirectSend<'_>,
) -> Answer {
    loop {
        match in_flight.role(send.route, send.delivery_id) {
            Role::Send(guard) => {
                // Other instances sharing the store send it once too: the first holds
                // it, the others wait and then find it delivered (or send it
                // themselves when that send failed).
                let _hold = match store.hold_send(send.route, send.delivery_id).await {
                    Ok(hold) => hold,
                    Err(e) => {
                        tracing::error!(route = send.route, delivery_id = %cut(send.delivery_id), error = %e, "not delivered: store unavailable");
                        let answer = Answer::unavailable();
                        guard.publish(&answer);
                        return answer;
                    }
                };
                let answer = deliver_locked(store, targets, &send).await;
                guard.publish(&answer);
                return answer;
            }
            Role::Wait(mut outcome) => {
                // A sender that was cancelled publishes nothing: try again ourselves.
                let Ok(published) = outcome.wait_for(Option::is_some).await else {
                    continue;
                };
                let Some(answer) = published.clone() else {
                    continue;
                };
                tracing::info!(route = send.route, delivery_id = %cut(send.delivery_id), status = answer.status.as_u16(), "answered with a concurrent send's outcome");
                return if answer.status == http::StatusCode::OK
                    && answer.body.status() == Some("delivered")
                {
                    Answer::duplicate(send.delivery_id)
                } else {
                    answer
                };
            }
        }
    }
}

async fn deliver_locked(store: &Store, targets: &LiveTargets, send: &DirectSend<'_>) -> Answer {
    let (route, id) = (send.route, send.delivery_id);
    match store.seen(route, id, send.now_ms).await {
        Ok(true) => {
            tracing::info!(route, delivery_id = %cut(id), "duplicate");
            return Answer::duplicate(id);
        }
        Ok(false) => {}
        Err(e) => {
            tracing::error!(route, delivery_id = %cut(id), error = %e, "not delivered: store unavailable");
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
        tracing::error!(route, delivery_id = %cut(id), error = %e, "delivery not recorded in the store");
    }
    match result {
        Ok(_) => {
            tracing::info!(
                route,
                delivery_id = %cut(id),
                target = send.deliver,
                attempts,
                latency_ms,
                "delivered"
            );
            Answer::delivered(route, send.deliver, id)
        }
        Err(error) => {
            tracing::warn!(route, delivery_id = %cut(id), target = send.deliver, attempts, latency_ms, %error, "delivery failed");
            Answer::delivery_failed(id)
        }
    }
}
