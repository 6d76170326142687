//! One instance receives a bot's updates at a time: with a shared store (PostgreSQL)
//! the others stand by, and one takes over within seconds when the holder dies (a
//! Telegram poll answers two pollers with 409; a Slack app's sockets or a Discord bot's
//! gateway session belong to one process). A store only this process writes grants the
//! hold at once.

use crate::BotStatus;
use herald_store::Store;
use std::future::Future;
use std::time::Duration;
use tokio::sync::watch;

/// How often a standing-by instance tries to take the hold.
const TAKE_EVERY: Duration = Duration::from_secs(2);

/// Runs what `serve` makes while this instance holds `key`, until `stop` (or until
/// `serve` ends); a lost hold stops it and this instance stands by again. `what`
/// names the receiving in the log (`telegram: the bot's poll`).
pub async fn serve_while_held<F, Fut>(
    store: &Store,
    key: &str,
    status: &BotStatus,
    what: &str,
    serve: F,
    mut stop: watch::Receiver<bool>,
) where
    F: Fn() -> Fut,
    Fut: Future<Output = ()>,
{
    loop {
        let Some(mut hold) = take(store, key, status, what, &mut stop).await else {
            return;
        };
        tokio::select! {
            _ = serve() => return,
            _ = hold.lost() => {
                tracing::warn!("{what}: this instance lost its hold (the store was out of reach too long); it stops and stands by");
            }
        }
    }
}

/// Takes the hold, trying every [`TAKE_EVERY`] while another instance has it
/// (`None`: stopped meanwhile).
async fn take(
    store: &Store,
    key: &str,
    status: &BotStatus,
    what: &str,
    stop: &mut watch::Receiver<bool>,
) -> Option<herald_store::sessions::Hold> {
    let mut said = false;
    let hold = loop {
        match store.try_hold(key).await {
            Ok(Some(hold)) => break hold,
            Ok(None) if !said => {
                said = true;
                status.stand_by(true);
                tracing::info!(
                    "{what}: another instance holds it; this one stands by and takes over if it stops"
                );
            }
            Ok(None) => {}
            Err(e) => {
                status.failed(format!("cannot take the hold in the store: {e}"));
                tracing::warn!(error = %e, "{what}: cannot take the hold in the store; trying again");
            }
        }
        tokio::select! {
            _ = crate::stopped(stop) => return None,
            _ = tokio::time::sleep(TAKE_EVERY) => {}
        }
    };
    if said {
        status.stand_by(false);
        tracing::info!("{what}: this instance now holds it");
    }
    Some(hold)
}
