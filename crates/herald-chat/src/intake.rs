//! Every platform's updates enter the same way: committed to the inbox under the bot's
//! route, with the platform's own id as the dedup key, before the platform is told
//! they arrived. A duplicate (a redelivery, a retry) stores nothing.

use crate::BotStatus;
use herald_store::{EnqueueOutcome, NewInboxItem, Store, now_ms};
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::Notify;

/// Where a bot's payloads go, and how each is named.
#[derive(Clone)]
pub struct Intake {
    pub store: Store,
    /// `chat:<platform>:<bot>`.
    pub route: String,
    pub platform: &'static str,
    pub wake: Arc<Notify>,
    pub status: Arc<BotStatus>,
    /// A payload's kind and dedup key (`None`: a payload herald does not serve,
    /// acknowledged and not stored).
    pub identify: fn(&Value) -> Option<(&'static str, String)>,
}

impl Intake {
    /// Commits `payload`; resolves once it is durable.
    pub async fn commit(&self, payload: &Value) -> Result<(), herald_store::StoreError> {
        let Some((kind, id)) = (self.identify)(payload) else {
            tracing::debug!(
                platform = self.platform,
                "a payload herald does not serve; acknowledged"
            );
            return Ok(());
        };
        let update = Update {
            route: &self.route,
            platform: self.platform,
            kind,
            id: &id,
            payload,
        };
        commit(&self.store, update, &self.status).await?;
        self.status.polled(now_ms());
        self.wake.notify_one();
        Ok(())
    }
}

/// One update to commit.
pub struct Update<'a> {
    /// `chat:<platform>:<bot>`.
    pub route: &'a str,
    /// The platform (`telegram`, `slack`).
    pub platform: &'a str,
    /// What kind of update (`message`, `event_callback`, `block_actions`).
    pub kind: &'a str,
    /// The platform's id for it (the dedup key).
    pub id: &'a str,
    pub payload: &'a Value,
}

/// Commits `update`; resolves once it is durable.
pub async fn commit(
    store: &Store,
    update: Update<'_>,
    status: &BotStatus,
) -> Result<(), herald_store::StoreError> {
    let item = NewInboxItem {
        route: update.route.to_owned(),
        event_type: update.kind.to_owned(),
        delivery_id: update.id.to_owned(),
        received_at_ms: now_ms(),
        profile: None,
        headers: "{}".into(),
        payload: update.payload.to_string(),
        prompt: String::new(),
        deliver: update.platform.to_owned(),
        deliver_extra: "{}".into(),
        skills: "[]".into(),
        toolsets: None,
    };
    match store.enqueue(item).await? {
        EnqueueOutcome::Accepted { .. } => status.received(),
        EnqueueOutcome::Duplicate => {
            tracing::debug!(
                platform = update.platform,
                id = update.id,
                "an update seen before"
            )
        }
    }
    Ok(())
}
