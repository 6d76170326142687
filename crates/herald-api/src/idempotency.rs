//! `Idempotency-Key` (§5.1, §6): within five minutes, a repeat of a whole (non-streamed)
//! request with the same key and the same fingerprint gets the first answer; duplicates
//! sent at once share one run.

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use herald_session::{Host, KeptAnswer, KeyClaim};
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

    fn from_kept(kept: KeptAnswer) -> Cached {
        let mut headers = HeaderMap::new();
        for (k, v) in kept.headers {
            if let (Ok(k), Ok(v)) = (
                axum::http::HeaderName::try_from(k),
                axum::http::HeaderValue::try_from(v),
            ) {
                headers.append(k, v);
            }
        }
        Cached {
            status: StatusCode::from_u16(kept.status).unwrap_or(StatusCode::OK),
            headers,
            body: Bytes::from(kept.body),
        }
    }

    fn kept(&self) -> KeptAnswer {
        KeptAnswer {
            status: self.status.as_u16(),
            headers: self
                .headers
                .iter()
                .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
                .collect(),
            body: self.body.to_vec(),
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
    host: &Arc<Host>,
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
    let print = fingerprint(request, fields);
    let slot = store.slot(&key, print);
    slot.get_or_init(|| async { shared(host, &key, &hex::encode(print), make).await })
        .await
        .response()
}

/// How often a request waits to see whether another instance's answer to its key is
/// ready, and for how long at most before it makes its own.
const PENDING_POLL: Duration = Duration::from_millis(50);
const PENDING_LIMIT: Duration = Duration::from_secs(900);

/// The answer to `key` across instances sharing the store: another instance's kept
/// one, or `make`'s, kept for the others.
async fn shared<F, Fut>(host: &Arc<Host>, key: &str, print: &str, make: F) -> Cached
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Response>,
{
    let started = Instant::now();
    loop {
        match host.claim_key(key, print, WINDOW).await {
            Ok(KeyClaim::Mine) => break,
            Ok(KeyClaim::Answered(kept)) => return Cached::from_kept(kept),
            Ok(KeyClaim::Pending) if started.elapsed() < PENDING_LIMIT => {
                tokio::time::sleep(PENDING_POLL).await;
            }
            Ok(KeyClaim::Pending) => break,
            Err(e) => {
                tracing::warn!(error = %e, "the idempotency key could not be shared; answering alone");
                break;
            }
        }
    }
    // A client that goes away drops this future with its run: the key is given back,
    // so that its retry makes an answer of its own instead of waiting for this one.
    let claim = Claim {
        host: Some(host.clone()),
        key: key.to_owned(),
        print: print.to_owned(),
        answered: false,
    };
    let cached = Cached::of(make().await).await;
    claim.answered();
    if let Err(e) = host.keep_answer(key, print, cached.kept()).await {
        tracing::warn!(error = %e, "the idempotency key's answer could not be kept for other instances");
    }
    cached
}

/// The request's `Idempotency-Key`, when it has a usable one.
fn key_of(headers: &HeaderMap) -> Option<String> {
    let v = headers.get("idempotency-key")?.to_str().ok()?.trim();
    (!v.is_empty() && v.len() <= 256).then(|| v.to_owned())
}

/// A key this instance claimed, given back when dropped unanswered.
struct Claim {
    host: Option<Arc<Host>>,
    key: String,
    print: String,
    answered: bool,
}

impl Claim {
    fn answered(mut self) {
        self.answered = true;
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        let (Some(host), key, print) = (self.host.take(), self.key.clone(), self.print.clone())
        else {
            return;
        };
        tokio::spawn(async move {
            if let Err(e) = host.release_key(&key, &print).await {
                tracing::warn!(error = %e, "an idempotency key left unanswered could not be given back; it frees when its window ends");
            }
        });
    }
}
