//! The inbox as an operator sees and steers it: counts per state, and waking the
//! workers after a replay; with the live route table the gateway serves.

use herald_config::Route;
use herald_store::{Store, StoreError};
use std::sync::Arc;

/// The routes a running gateway serves now (config routes over subscriptions), as its
/// route table has them.
pub trait LiveRoutes: Send + Sync {
    /// Every route, in name order.
    fn routes(&self) -> Vec<Arc<Route>>;
}

/// A running gateway's inbox: its store, the wake-up its workers wait on, its routes.
#[derive(Clone)]
pub struct InboxView {
    pub store: Store,
    /// Notified when work is queued again (a replay), so an idle worker takes it.
    pub work_notify: Arc<tokio::sync::Notify>,
    pub routes: Arc<dyn LiveRoutes>,
}

impl InboxView {
    /// Counts per state, every state present (0 when empty): what `/health/detailed`,
    /// the dashboard and `herald gateway status` show.
    pub async fn counts(&self) -> Result<Vec<(String, i64)>, StoreError> {
        state_counts(&self.store).await
    }
}

/// Counts per state of `store`, every state present (0 when empty), in the store's order.
pub async fn state_counts(store: &Store) -> Result<Vec<(String, i64)>, StoreError> {
    Ok(herald_store::inbox::every_state(store.counts().await?))
}
