//! Group commit of accepted events: whatever enqueues are waiting go to the database
//! as one statement (arrays unnested into rows) in one implicit transaction, so a
//! batch costs one round trip and one commit however many events it holds. A few
//! committers work at once, each taking everything that queued while the others were
//! at the database. A caller waits at most the store's deadline (queueing included),
//! and a batch the database does not commit within it is answered with the timeout.

use crate::deadline::Deadline;
use crate::rows::text;
use deadpool_postgres::Pool;
use herald_store::{DEDUP_WINDOW_MS, EnqueueOutcome, MAX_BATCH, NewInboxItem, StoreError};
use std::collections::HashSet;
use std::sync::Arc;
use tokio::sync::{Mutex, mpsc, oneshot};

/// Batches being committed at once.
const COMMITTERS: usize = 4;
/// Enqueues waiting for a committer before callers wait to send.
const QUEUE: usize = 8 * MAX_BATCH;

type Reply = oneshot::Sender<Result<EnqueueOutcome, StoreError>>;

struct Pending {
    item: NewInboxItem,
    payload: (Vec<u8>, bool),
    reply: Reply,
}

/// The sending side; cheap to clone.
#[derive(Clone)]
pub(crate) struct Enqueuer {
    tx: mpsc::Sender<Pending>,
    deadline: Deadline,
}

impl Enqueuer {
    pub(crate) fn start(pool: Pool, deadline: Deadline) -> Enqueuer {
        let (tx, rx) = mpsc::channel(QUEUE);
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..COMMITTERS {
            tokio::spawn(committer(pool.clone(), rx.clone(), deadline));
        }
        Enqueuer { tx, deadline }
    }

    pub(crate) async fn enqueue(
        &self,
        mut item: NewInboxItem,
    ) -> Result<EnqueueOutcome, StoreError> {
        let raw = std::mem::take(&mut item.payload);
        let payload = match herald_store::payload::pack(&raw) {
            Some(packed) => (packed, true),
            None => (raw.into_bytes(), false),
        };
        let (reply, wait) = oneshot::channel();
        self.deadline
            .bound(async {
                self.tx
                    .send(Pending {
                        item,
                        payload,
                        reply,
                    })
                    .await
                    .map_err(|_| StoreError::WriterGone)?;
                wait.await.map_err(|_| StoreError::WriterGone)?
            })
            .await
    }
}

async fn committer(pool: Pool, rx: Arc<Mutex<mpsc::Receiver<Pending>>>, deadline: Deadline) {
    loop {
        let batch = {
            let mut rx = rx.lock().await;
            let Some(first) = rx.recv().await else {
                return;
            };
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(p) => batch.push(p),
                    Err(_) => break,
                }
            }
            batch
        };
        commit(&pool, batch, deadline).await;
    }
}

const INSERT: &str = "
WITH new AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::text[], $6::text[],
                         $7::bytea[], $8::bool[], $9::text[], $10::text[], $11::text[], $12::text[],
                         $13::text[], $14::int4[])
        AS t(route, event_type, delivery_id, received_at_ms, profile, headers, payload,
             payload_packed, prompt, deliver, deliver_extra, skills, toolsets, ord)
), fresh AS (
    INSERT INTO dedup AS d (route, delivery_id, seen_at_ms)
    SELECT route, delivery_id, received_at_ms FROM new
    ON CONFLICT (route, delivery_id) DO UPDATE SET seen_at_ms = excluded.seen_at_ms
        WHERE d.seen_at_ms <= excluded.seen_at_ms - $15
    RETURNING route, delivery_id
), added AS (
    INSERT INTO inbox (route, event_type, delivery_id, received_at_ms, updated_at_ms, profile,
                       headers, payload, payload_packed, prompt, deliver, deliver_extra, skills, toolsets)
    SELECT n.route, n.event_type, n.delivery_id, n.received_at_ms, n.received_at_ms, n.profile,
           n.headers, n.payload, n.payload_packed, n.prompt, n.deliver, n.deliver_extra, n.skills, n.toolsets
    FROM new n JOIN fresh f ON f.route = n.route AND f.delivery_id = n.delivery_id
    ORDER BY n.ord
    RETURNING id, route, delivery_id
)
SELECT n.ord, a.id
FROM new n LEFT JOIN added a ON a.route = n.route AND a.delivery_id = n.delivery_id,
     (SELECT pg_notify('herald_inbox', '')) AS wake";

/// Commits one batch and answers its callers. A key twice in the batch is a
/// duplicate the second time, as in one writer's order.
async fn commit(pool: &Pool, batch: Vec<Pending>, deadline: Deadline) {
    let mut seen = HashSet::new();
    let (mut firsts, mut repeats) = (Vec::new(), Vec::new());
    for p in batch {
        if seen.insert((p.item.route.clone(), p.item.delivery_id.clone())) {
            firsts.push(p);
        } else {
            repeats.push(p);
        }
    }
    let outcome = deadline.bound(insert(pool, &firsts)).await;
    match outcome {
        Ok(ids) => {
            for (p, id) in firsts.into_iter().zip(ids) {
                let answer = match id {
                    Some(id) => EnqueueOutcome::Accepted { id },
                    None => EnqueueOutcome::Duplicate,
                };
                let _ = p.reply.send(Ok(answer));
            }
            for p in repeats {
                let _ = p.reply.send(Ok(EnqueueOutcome::Duplicate));
            }
        }
        Err(e) => {
            tracing::error!(error = %e, "store commit failed; the batch is answered with an error");
            for p in firsts.into_iter().chain(repeats) {
                let answer = match &e {
                    StoreError::TimedOut(m) => StoreError::TimedOut(m.clone()),
                    StoreError::Unreachable(m) => StoreError::Unreachable(m.clone()),
                    other => StoreError::Commit(other.to_string()),
                };
                let _ = p.reply.send(Err(answer));
            }
        }
    }
}

/// The new inbox ids, in the batch's order (`None`: a duplicate).
async fn insert(pool: &Pool, batch: &[Pending]) -> Result<Vec<Option<i64>>, StoreError> {
    let client = pool
        .get()
        .await
        .map_err(|e| StoreError::Unreachable(e.to_string()))?;
    let stmt = client
        .prepare_cached(INSERT)
        .await
        .map_err(crate::db_error)?;
    let col = |f: fn(&NewInboxItem) -> &str| -> Vec<String> {
        batch
            .iter()
            .map(|p| text(f(&p.item)).into_owned())
            .collect()
    };
    let route = col(|i| &i.route);
    let event_type = col(|i| &i.event_type);
    let delivery_id = col(|i| &i.delivery_id);
    let received: Vec<i64> = batch.iter().map(|p| p.item.received_at_ms).collect();
    let profile: Vec<Option<String>> = batch
        .iter()
        .map(|p| p.item.profile.as_deref().map(|s| text(s).into_owned()))
        .collect();
    let headers = col(|i| &i.headers);
    let payload: Vec<&[u8]> = batch.iter().map(|p| p.payload.0.as_slice()).collect();
    let packed: Vec<bool> = batch.iter().map(|p| p.payload.1).collect();
    let prompt = col(|i| &i.prompt);
    let deliver = col(|i| &i.deliver);
    let deliver_extra = col(|i| &i.deliver_extra);
    let skills = col(|i| &i.skills);
    let toolsets: Vec<Option<String>> = batch
        .iter()
        .map(|p| p.item.toolsets.as_deref().map(|s| text(s).into_owned()))
        .collect();
    let ord: Vec<i32> = (0..batch.len() as i32).collect();
    let rows = client
        .query(
            &stmt,
            &[
                &route,
                &event_type,
                &delivery_id,
                &received,
                &profile,
                &headers,
                &payload,
                &packed,
                &prompt,
                &deliver,
                &deliver_extra,
                &skills,
                &toolsets,
                &ord,
                &DEDUP_WINDOW_MS,
            ],
        )
        .await
        .map_err(crate::db_error)?;
    let mut ids = vec![None; batch.len()];
    for row in rows {
        let at: i32 = row.try_get(0).map_err(crate::db_error)?;
        let id: Option<i64> = row.try_get(1).map_err(crate::db_error)?;
        if let Some(slot) = usize::try_from(at).ok().and_then(|i| ids.get_mut(i)) {
            *slot = id;
        }
    }
    Ok(ids)
}
