//! What an operator changes and reads on a home and its store, shared by every door that
//! offers it: `herald webhook subscribe|remove` and the dashboard's routes page make
//! subscriptions the same way; the dashboard, `/health/detailed` and the metrics read the
//! inbox through the same view. Neither the dashboard nor the CLI reaches into the webhook
//! gateway for them.

pub mod inbox_view;
pub mod shared_subscriptions;
pub mod subscriptions;

pub use inbox_view::{InboxView, LiveRoutes};
