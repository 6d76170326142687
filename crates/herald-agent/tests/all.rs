//! The turn loop against a fake provider speaking the real SSE wire format.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
