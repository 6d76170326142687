//! `LISTEN herald_inbox` on a connection of its own: every instance's idle workers
//! wake as soon as any instance queues work (the workers' poll stays as a fallback).
//! A lost connection is made again, with a wake-up, since a notification may have
//! been missed meanwhile.

use crate::connect::Target;
use futures_util::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};
use tokio_postgres::AsyncMessage;

/// The channel enqueues and replays notify.
pub(crate) const CHANNEL: &str = "herald_inbox";

/// Runs until `wake` has no other owner.
pub(crate) fn spawn(target: Arc<Target>, wake: Arc<Notify>) {
    let hear = {
        let wake = Arc::downgrade(&wake);
        Arc::new(move |_: &str| {
            if let Some(w) = wake.upgrade() {
                w.notify_one();
            }
        }) as Arc<dyn Fn(&str) + Send + Sync>
    };
    spawn_on(target, CHANNEL, hear, Some(wake));
}

/// Listens on `channel`, handing each notification's payload to `hear`, for as long
/// as `alive` (when given) has another owner; `alive` is also woken after every
/// (re)connection.
pub(crate) fn spawn_on(
    target: Arc<Target>,
    channel: &'static str,
    hear: Arc<dyn Fn(&str) + Send + Sync>,
    alive: Option<Arc<Notify>>,
) {
    tokio::spawn(async move {
        let mut pause = Duration::from_millis(200);
        while alive.as_ref().is_none_or(|a| Arc::strong_count(a) > 1) {
            match listen(&target, channel, &*hear).await {
                Ok(()) => pause = Duration::from_millis(200),
                Err(e) => {
                    tracing::warn!(error = %e, "store: listening for queued work failed; trying again");
                    pause = (pause * 2).min(Duration::from_secs(10));
                }
            }
            if let Some(a) = &alive {
                a.notify_one();
            }
            tokio::time::sleep(pause).await;
        }
    });
}

/// A listener started on first use, for as long as the process runs.
#[derive(Default)]
pub(crate) struct OnDemand {
    /// Whether it listens (set once it does).
    listening: std::sync::OnceLock<watch::Receiver<bool>>,
}

impl OnDemand {
    /// Starts listening on `channel` with `hear` unless already started, and returns
    /// once it listens (within a few seconds), so that no notification meant for the
    /// caller can come before it.
    pub(crate) async fn start(
        &self,
        target: &Arc<Target>,
        channel: &'static str,
        hear: impl FnOnce() -> Arc<dyn Fn(&str) + Send + Sync>,
    ) {
        let mut ready = self
            .listening
            .get_or_init(|| {
                let (ready_tx, ready_rx) = watch::channel(false);
                let hear = hear();
                let told = Arc::new(move |payload: &str| {
                    if payload.is_empty() {
                        // Said by the listener once it listens.
                        let _ = ready_tx.send(true);
                    } else {
                        hear(payload);
                    }
                });
                spawn_on(target.clone(), channel, told, None);
                ready_rx
            })
            .clone();
        let _ = tokio::time::timeout(Duration::from_secs(5), ready.wait_for(|r| *r)).await;
    }
}

async fn listen(
    target: &Target,
    channel: &str,
    hear: &(dyn Fn(&str) + Send + Sync),
) -> Result<(), tokio_postgres::Error> {
    let (client, mut conn) = target.config.connect(target.tls.clone()).await?;
    let mut messages = futures_util::stream::poll_fn(move |cx| conn.poll_message(cx));
    let sql = format!("LISTEN {channel}");
    let listening = client.batch_execute(&sql);
    tokio::pin!(listening);
    let mut listened = false;
    let mut check = tokio::time::interval(Duration::from_secs(5));
    loop {
        tokio::select! {
            done = &mut listening, if !listened => {
                done?;
                listened = true;
                hear("");
            }
            message = messages.next() => match message {
                Some(Ok(AsyncMessage::Notification(n))) => hear(n.payload()),
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => return Ok(()),
            },
            _ = check.tick() => {
                if client.is_closed() {
                    return Ok(());
                }
            }
        }
    }
}
