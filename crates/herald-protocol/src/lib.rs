//! herald's wire types: OpenAI-compatible chat completions (request, streamed chunk,
//! normalized response), how deep a JSON text nests, and its number literals as Python
//! reads them. Data only: no tokio, no I/O.
//!
//! Unknown fields of provider chunks are ignored; optional fields stay `None` when a
//! provider leaves them out, so one type reads OpenRouter, vLLM, Ollama and llama.cpp.

pub mod chat;
pub mod json_depth;
pub mod json_literal;

pub use chat::*;

/// The Hermes Agent release whose wire behaviour herald speaks (what its API's
/// `/health` names as `version`; herald's own is `herald_version`).
pub const HERMES_VERSION: &str = "0.19.0";
