//! Serving HTTP on the open internet, for every front door that listens (the webhook
//! receiver, the OpenAI-compatible API): binding, a cap on open connections, header and
//! idle timeouts, and a shutdown bounded by the grace period whatever clients do.
//!
//! It knows nothing of routes, requests or the agent: a front door hands it a router.

pub mod bind;
pub mod connections;

pub use bind::{BindError, bind};
pub use connections::{ConnectionLimits, serve};
