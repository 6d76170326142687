//! The provider client: OpenAI-compatible chat completions over reqwest, always
//! streaming. SSE decoding and chunk assembly are pure (property-tested and fuzzed);
//! the client adds timeouts, error classification and retries with back-off.
//!
//! Works with any server that speaks chat completions by base URL (OpenRouter, Ollama,
//! vLLM, llama.cpp's server, LM Studio); endpoints that need another wire format
//! (Anthropic Messages, OpenAI Responses) are refused by [`endpoint::check_wire_format`].

pub mod assemble;
pub mod client;
pub mod endpoint;
pub mod error;
pub mod flow;
pub mod redact;
pub mod sse;

pub use assemble::{Assembler, DeltaEvent};
pub use client::{CallOutcome, LlmClient, RetryConfig};
pub use endpoint::{
    ApiKey, Endpoint, SharedEndpoint, check_wire_format, resolve_api_key, without_credentials,
};
pub use error::{ErrorClass, LlmError};
