//! herald-llm: property tests of the decoder and assembler, and the client against a
//! local fake provider speaking the real SSE wire format.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
