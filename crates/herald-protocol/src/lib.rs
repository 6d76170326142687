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
