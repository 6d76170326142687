//! End-to-end tests: the real `herald` binary over real sockets, files and processes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
