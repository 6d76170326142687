//! The webhook front door: the axum routes, body limit, signature verification, rate
//! limit, filters, route scripts, templates, and the durable hand-over to the inbox.
//!
//! Handlers extract, call [`Gateway::handle`] and map its [`Answer`]; the pure parts of
//! each step live in `herald-webhook`. This crate never answers 500 to request input.

pub mod answer;
mod dir_watch;
pub mod direct;
pub mod findings;
mod heavy_work;
pub mod live_targets;
pub mod pipeline;
mod process_tree;
pub mod rate_limit;
pub mod reject_log;
pub mod retention;
pub mod routes;
pub mod schedule;
pub mod script;
pub mod server;
pub mod worker;

pub use answer::Answer;
pub use live_targets::LiveTargets;
pub use pipeline::Gateway;
pub use server::router;
pub use worker::{Backoff, ProfileTemplates, RunTemplate, Workers};
