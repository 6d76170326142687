//! `LISTEN herald_inbox` on a connection of its own: every instance's idle workers
//! wake as soon as any instance queues work (the workers' poll stays as a fallback).
//! A lost connection is made again, with a wake-up, since a notification may have
//! been missed meanwhile.

use crate::connect::Target;
use futures_util::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_postgres::AsyncMessage;

/// The channel enqueues and replays notify.
pub(crate) const CHANNEL: &str = "herald_inbox";

/// Runs until `wake` has no other owner.
pub(crate) fn spawn(target: Arc<Target>, wake: Arc<Notify>) {
    tokio::spawn(async move {
        let mut pause = Duration::from_millis(200);
        while Arc::strong_count(&wake) > 1 {
            match listen(&target, &wake).await {
                Ok(()) => pause = Duration::from_millis(200),
                Err(e) => {
                    tracing::warn!(error = %e, "store: listening for queued work failed; trying again");
                    pause = (pause * 2).min(Duration::from_secs(10));
                }
            }
            wake.notify_one();
            tokio::time::sleep(pause).await;
        }
    });
}

async fn listen(target: &Target, wake: &Notify) -> Result<(), tokio_postgres::Error> {
    let (client, mut conn) = target.config.connect(target.tls.clone()).await?;
    let mut messages = futures_util::stream::poll_fn(move |cx| conn.poll_message(cx));
    let sql = format!("LISTEN {CHANNEL}");
    let listening = client.batch_execute(&sql);
    tokio::pin!(listening);
    let mut listened = false;
    let mut check = tokio::time::interval(Duration::from_secs(5));
    loop {
        tokio::select! {
            done = &mut listening, if !listened => {
                done?;
                listened = true;
                wake.notify_one();
            }
            message = messages.next() => match message {
                Some(Ok(AsyncMessage::Notification(_))) => wake.notify_one(),
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
