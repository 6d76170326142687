//! Property tests for the pure webhook logic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
