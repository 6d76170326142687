//! Serving HTTP on the open internet, for every front door that listens (the webhook
//! receiver, the OpenAI-compatible API): binding, a cap on open connections, header and
//! idle timeouts, bodies read within a size limit, a deadline and a shared budget of
//! bytes in flight, each client's outgoing queue bounded in bytes ([`outbox`]), and a
//! shutdown bounded by the grace period whatever clients do.
//!
//! It knows nothing of routes, requests or the agent: a front door hands it a router.
//! Each request carries its client's address (axum's `ConnectInfo<SocketAddr>`), and
//! [`loopback_host`] refuses other host names on a loopback listener (DNS rebinding).

pub mod bind;
pub mod body;
pub mod body_budget;
pub mod connections;
pub mod loopback_host;
pub mod outbox;

pub use bind::{BindError, bind};
pub use body_budget::{BodyBudget, Reservation};
pub use connections::{ConnectionLimits, serve};
pub use outbox::{Outbox, Outgoing, Weight, outbox};
