//! `Idempotency-Key` (§5.1, §6): within five minutes, a repeat of a whole (non-streamed)
//! request with the same key and the same fingerprint gets the first answer; duplicates
//! sent at once share one run.

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::OnceCell;

const WINDOW: Duration = Duration::from_secs(300);
/// Keys remembered at most (the oldest are forgotten first past it).
const MAX_KEYS: usize = 10_000;

/// An answer as it was sent.
#[derive(Clone)]
struct Cached {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Cached {
    async fn of(response: Response) -> Cached {
        let (parts, body) = response.into_parts();
        let body = axum::body::to_bytes(body, usize::MAX)
            .await
            .unwrap_or_default();
        Cached {
            status: parts.status,
            headers: parts.headers,
            body,
        }
    }

    fn response(&self) -> Response {
        let mut r = Response::new(Body::from(self.body.clone()));
        *r.status_mut() = self.status;
        *r.headers_mut() = self.headers.clone();
        r
    }
}

type Slot = Arc<OnceCell<Cached>>;

/// A key's fingerprint, when it was first seen, and its answer.
type Entry = ([u8; 32], Instant, Slot);

#[derive(Default)]
pub struct Idempotency {
    entries: Mutex<HashMap<String, Entry>>,
}

/// The fingerprint of a request: these fields of its body.
fn fingerprint(request: &Map<String, Value>, fields: &[&str]) -> [u8; 32] {
    let mut h = Sha256::new();
    for f in fields {
        h.update(f.as_bytes());
        h.update(
            request
                .get(*f)
                .map(Value::to_string)
                .unwrap_or_default()
                .as_bytes(),
        );
        h.update([0]);
    }
    h.finalize().into()
}

impl Idempotency {
    /// The slot of `key`: the one a request with this fingerprint filled or is filling,
    /// else a new one.
    fn slot(&self, key: &str, print: [u8; 32]) -> Slot {
        let Ok(mut entries) = self.entries.lock() else {
            return Slot::default();
        };
        let now = Instant::now();
        if entries.len() >= MAX_KEYS {
            entries.retain(|_, (_, at, _)| now.duration_since(*at) < WINDOW);
        }
        if entries.len() >= MAX_KEYS
            && let Some(oldest) = entries
                .iter()
                .min_by_key(|(_, (_, at, _))| *at)
                .map(|(k, _)| k.clone())
        {
            entries.remove(&oldest);
        }
        match entries.get(key) {
            Some((p, at, slot)) if *p == print && now.duration_since(*at) < WINDOW => slot.clone(),
            _ => {
                let slot = Slot::default();
                entries.insert(key.to_owned(), (print, now, slot.clone()));
                slot
            }
        }
    }
}

/// The answer `make` gives, made at most once per key and fingerprint within the
/// window: a whole (non-streamed) request with an `Idempotency-Key` header; any other
/// request is simply made.
pub async fn once<F, Fut>(
    store: &Idempotency,
    headers: &HeaderMap,
    request: &Map<String, Value>,
    fields: &[&str],
    make: F,
) -> Response
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Response>,
{
    let Some(key) = key_of(headers) else {
        return make().await;
    };
    let slot = store.slot(&key, fingerprint(request, fields));
    slot.get_or_init(|| async { Cached::of(make().await).await })
        .await
        .response()
}

/// The request's `Idempotency-Key`, when it has a usable one.
fn key_of(headers: &HeaderMap) -> Option<String> {
    let v = headers.get("idempotency-key")?.to_str().ok()?.trim();
    (!v.is_empty() && v.len() <= 256).then(|| v.to_owned())
}
