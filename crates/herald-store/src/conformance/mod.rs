//! One test suite for every store backend: the same checks run against SQLite (this
//! crate's tests) and PostgreSQL (herald-scale's), so that callers can never tell
//! which one they hold. A backend's tests give a [`Place`] per check: somewhere one
//! empty store lives, opened again for a restart.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod inbox;
mod sessions;

pub use inbox::item;

use crate::{SessionStore, Store};
use async_trait::async_trait;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// Where one check's store lives.
#[async_trait]
pub trait Place: Send + Sync {
    /// Opens the inbox here as instance `instance` (the same name again is a restart
    /// of that instance on its home).
    async fn open(&self, instance: &str) -> Store;
    /// Opens the session store here as instance `instance`.
    async fn open_sessions(&self, instance: &str) -> SessionStore;
    /// Whether several instances may share the store at once (PostgreSQL); the
    /// checks of shared work run only then.
    fn shared(&self) -> bool;
}

type CheckFuture = Pin<Box<dyn Future<Output = ()> + Send>>;
/// One check of the suite.
pub type Check = fn(Arc<dyn Place>) -> CheckFuture;

macro_rules! checks_of {
    ($($name:ident),* $(,)?) => {
        vec![$((stringify!($name), (|p| Box::pin($name(p))) as $crate::conformance::Check)),*]
    };
}
pub(crate) use checks_of;

/// Every check, inbox and sessions, by name.
pub fn all_checks() -> Vec<(&'static str, Check)> {
    let mut all = inbox::inbox_checks();
    all.extend(sessions::session_checks());
    all
}

/// Runs every check, each on a fresh place from `place`.
pub async fn run_all<F, Fut>(mut place: F)
where
    F: FnMut(&'static str) -> Fut,
    Fut: Future<Output = Arc<dyn Place>>,
{
    for (name, check) in all_checks() {
        let at = place(name).await;
        eprintln!("store check: {name}");
        check(at).await;
    }
}
