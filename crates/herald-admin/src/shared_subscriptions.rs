//! The webhook subscriptions of several instances sharing a store: one document in
//! the store, mirrored into each home's `webhook_subscriptions.json`, which the route
//! registry reads as always (so the request path is unchanged). A change made on any
//! instance's home (`herald webhook subscribe`) is pushed to the store and reaches the
//! other instances' files within a second; the first instance to start imports its
//! home's file when the store has none.

use herald_store::Store;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The document's name in the store.
pub const DOCUMENT: &str = "webhook_subscriptions";
/// How often a running gateway looks for a change made by another instance.
const EVERY: Duration = Duration::from_secs(1);

/// Brings the home's file in step with the store's document (written only when it
/// differs), importing the file when the store has none; the document's version now.
pub async fn pull(store: &Store, path: &Path) -> Result<Option<i64>, String> {
    let kept = store.document(DOCUMENT).await.map_err(|e| e.to_string())?;
    let local = std::fs::read_to_string(path).ok();
    match (kept, local) {
        (Some((version, body)), local) => {
            if local.as_deref() != Some(body.as_str()) {
                herald_config::default_config::write_private_replace(path, body.as_bytes())
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                tracing::info!(
                    version,
                    "subscriptions changed in the shared store; the home's file follows"
                );
            }
            Ok(Some(version))
        }
        (None, Some(local)) => {
            if store
                .put_document(DOCUMENT, None, local)
                .await
                .map_err(|e| e.to_string())?
            {
                tracing::info!(file = %path.display(), "subscriptions imported into the shared store");
            }
            Ok(store
                .document(DOCUMENT)
                .await
                .map_err(|e| e.to_string())?
                .map(|(v, _)| v))
        }
        (None, None) => Ok(None),
    }
}

/// Pushes the home's file to the store on top of `version` (from [`pull`]); false
/// when another instance changed the subscriptions in between.
pub async fn push(store: &Store, path: &Path, version: Option<i64>) -> Result<bool, String> {
    let body = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    store
        .put_document(DOCUMENT, version, body)
        .await
        .map_err(|e| e.to_string())
}

/// Keeps the home's file in step with the store while the gateway runs.
pub fn keep_in_step(store: Store, path: PathBuf) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(EVERY);
        loop {
            tick.tick().await;
            if let Err(e) = pull(&store, &path).await {
                tracing::warn!(error = %e, "the shared subscriptions could not be read");
            }
        }
    });
}
