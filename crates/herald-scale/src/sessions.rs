//! The session store on PostgreSQL: sessions, messages, runs and stored responses of
//! one profile (its own schema), shared by every instance. Writes of one instance run
//! in the order they were made (a queue drained by one task), detached ones included;
//! reads use the pool. A session's messages are ordered by their per-session `seq`.
//!
//! Every call is bounded by the store's deadline (`store.statement_timeout_seconds`),
//! and the queue of writes holds at most [`SESSION_WRITES`]: while the database
//! stalls, a write whose caller waits waits for room within its deadline, and a
//! detached one (nobody waits for it) is refused at once, so a stall cannot grow the
//! queue without limit.

use crate::db_error;
use crate::deadline::Deadline;
use crate::rows::{opt_text, text};
use async_trait::async_trait;
use deadpool_postgres::{GenericClient, Pool};
use herald_store::sessions::{
    ControlHandler, ControlReply, Followed, Follower, Hold, Imported, ImportedSession, KeptAnswer,
    KeyClaim, NewMessage, NewSession, Relayed, RelayedEvents, RewindRefused, RewindTarget,
    RunControl, RunRecord, RunRow, SearchHit, SearchQuery, SessionRow, SessionSummary,
    SessionUsage, StoredMessage, StoredResponse, TitleRefused, rewind_row,
};
use herald_store::{SessionBackend, StoreError, now_ms, now_secs};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// How often an instance says it is alive, and how long that holds.
const HEARTBEAT: Duration = Duration::from_secs(10);
const ALIVE_FOR_MS: i64 = 30_000;
/// What a run of a lost instance is failed with.
pub const INSTANCE_LOST: &str = "interrupted: instance lost";
/// Session writes queued at most (each one message, run state or response).
pub const SESSION_WRITES: usize = 512;
/// How much longer than the deadline the queue's task gives one job before dropping it
/// (a job bounds its own write by the deadline; this catches what does not).
const JOB_GRACE: Duration = Duration::from_secs(1);

type Job = Box<dyn FnOnce(Pool) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;
/// Where a queued write's outcome arrives.
type Outcome<T> = oneshot::Receiver<Result<T, StoreError>>;

/// One profile's sessions on PostgreSQL, written as `owner`.
pub struct PgSessions {
    pool: Pool,
    /// Answers awaited from the instances that own runs.
    replies: crate::replies::Replies,
    /// The run event streams this instance follows.
    streams: crate::follow::Streams,
    target: std::sync::Arc<crate::connect::Target>,
    shown: String,
    queue: mpsc::Sender<Job>,
    deadline: Deadline,
    /// `<instance>@<process>#<opening>`: whose runs these are, and whose heartbeat this keeps.
    owner: String,
    /// `<instance>@`: an earlier process of this instance's home.
    instance_prefix: String,
    _alive: oneshot::Sender<()>,
}

impl PgSessions {
    /// Starts the store of `instance`, alive from the start: its runs are never taken
    /// for a lost instance's.
    pub(crate) async fn start(
        pool: Pool,
        target: crate::connect::Target,
        instance: &str,
    ) -> Result<PgSessions, StoreError> {
        let shown = target.shown.clone();
        let deadline = target.deadline;
        let (queue, jobs) = mpsc::channel(SESSION_WRITES);
        tokio::spawn(run_jobs(pool.clone(), jobs, deadline));
        static OPENED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = OPENED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let owner = format!("{instance}@{}#{n}", herald_store::instance::current());
        deadline.bound(beat(&pool, &owner)).await?;
        let (alive, dropped) = oneshot::channel();
        tokio::spawn(heartbeat(pool.clone(), owner.clone(), dropped, deadline));
        Ok(PgSessions {
            replies: crate::replies::Replies::default(),
            streams: crate::follow::Streams::default(),
            pool,
            target: std::sync::Arc::new(target),
            shown,
            queue,
            deadline,
            instance_prefix: format!("{instance}@"),
            owner,
            _alive: alive,
        })
    }

    /// The owner this store's runs must be saved as ([`herald_store::SessionStore::owned_by`]).
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The job of write `f` (bounded by the deadline) and where its outcome goes. A
    /// job whose caller `awaited` it and stopped waiting before it started (the
    /// deadline passed while it was queued) is not made: that caller was told it failed.
    fn job<T, F, Fut>(&self, f: F, awaited: bool) -> (Job, Outcome<T>)
    where
        T: Send + 'static,
        F: FnOnce(Pool) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let deadline = self.deadline;
        let job: Job = Box::new(move |pool| {
            Box::pin(async move {
                if awaited && tx.is_closed() {
                    tracing::debug!("a session write whose caller gave up was not made");
                    return;
                }
                let out = deadline.bound(f(pool)).await;
                if let Err(Err(e)) = tx.send(out) {
                    tracing::warn!(error = %e, "a session write nobody waited for failed");
                }
            })
        });
        (job, rx)
    }

    /// Queues write `f` without waiting: refused at once when the queue is full.
    fn detach<T, F, Fut>(&self, f: F) -> Result<(), StoreError>
    where
        T: Send + 'static,
        F: FnOnce(Pool) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        let (job, _) = self.job(f, false);
        self.queue.try_send(job).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => StoreError::Unreachable(format!(
                "{SESSION_WRITES} session writes are waiting for the store (the most kept): this one is dropped"
            )),
            mpsc::error::TrySendError::Closed(_) => StoreError::WriterGone,
        })
    }

    /// Queues write `f` and waits for it: for room in the queue and for the write,
    /// both within the deadline.
    async fn write<T, F, Fut>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(Pool) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        let (job, outcome) = self.job(f, true);
        self.deadline
            .bound(async {
                self.queue
                    .send(job)
                    .await
                    .map_err(|_| StoreError::WriterGone)?;
                outcome.await.map_err(|_| StoreError::WriterGone)?
            })
            .await
    }

    /// The id in the first row of `sql` (one text parameter), if any.
    async fn newest(&self, sql: &'static str, value: String) -> Result<Option<String>, StoreError> {
        self.deadline
            .bound(async {
                let row = self
                    .conn()
                    .await?
                    .query_opt(sql, &[&value])
                    .await
                    .map_err(db_error)?;
                row.map(|r| r.try_get(0)).transpose().map_err(db_error)
            })
            .await
    }

    async fn conn(&self) -> Result<deadpool_postgres::Object, StoreError> {
        get(&self.pool).await
    }
}

async fn get(pool: &Pool) -> Result<deadpool_postgres::Object, StoreError> {
    pool.get()
        .await
        .map_err(|e| StoreError::Unreachable(e.to_string()))
}

/// Runs the queued writes one after the other, none for longer than the deadline (and
/// a little grace): a stall holds the queue one deadline per write at most.
async fn run_jobs(pool: Pool, mut jobs: mpsc::Receiver<Job>, deadline: Deadline) {
    while let Some(job) = jobs.recv().await {
        let limit = deadline.limit() + JOB_GRACE;
        if tokio::time::timeout(limit, job(pool.clone()))
            .await
            .is_err()
        {
            tracing::warn!(error = %deadline.missed(), "a queued session write was dropped");
        }
    }
}

/// Keeps `owner` alive in `herald_instances` until the store is dropped.
async fn heartbeat(
    pool: Pool,
    owner: String,
    mut dropped: oneshot::Receiver<()>,
    deadline: Deadline,
) {
    let mut tick = tokio::time::interval(HEARTBEAT);
    // The first beat was made before the store was handed out.
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = &mut dropped => break,
        }
        if let Err(e) = deadline.bound(beat(&pool, &owner)).await {
            tracing::warn!(error = %e, "store: the instance heartbeat failed");
        }
        match deadline.bound(fail_lost_runs(&pool, &owner)).await {
            Ok(0) => {}
            Ok(n) => tracing::warn!(runs = n, "runs of a lost instance are marked failed"),
            Err(e) => tracing::warn!(error = %e, "store: cannot look for runs of lost instances"),
        }
    }
    // A clean stop: this owner's runs need not wait out the heartbeat.
    let gone = deadline.bound(async {
        get(&pool)
            .await?
            .execute("DELETE FROM herald_instances WHERE owner = $1", &[&owner])
            .await
            .map_err(db_error)
    });
    let _ = gone.await;
}

/// Unfinished runs of instances whose heartbeat ran out fail with [`INSTANCE_LOST`]
/// (whichever instance sees it first); how many.
async fn fail_lost_runs(pool: &Pool, me: &str) -> Result<usize, StoreError> {
    let n = get(pool)
        .await?
        .execute(
            "UPDATE herald_runs SET status = 'failed', error = $1, updated_at = $2
             WHERE status NOT IN ('completed', 'failed', 'cancelled') AND owner <> $3
               AND (owner IS NULL OR owner NOT IN
                    (SELECT owner FROM herald_instances WHERE alive_until_ms > $4))",
            &[&INSTANCE_LOST, &now_secs(), &me, &now_ms()],
        )
        .await
        .map_err(db_error)?;
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

/// Says `owner` is alive for the next [`ALIVE_FOR_MS`].
pub(crate) async fn beat(pool: &Pool, owner: &str) -> Result<(), StoreError> {
    let until = now_ms() + ALIVE_FOR_MS;
    get(pool)
        .await?
        .execute(
            "INSERT INTO herald_instances (owner, alive_until_ms) VALUES ($1, $2)
             ON CONFLICT (owner) DO UPDATE SET alive_until_ms = excluded.alive_until_ms",
            &[&owner, &until],
        )
        .await
        .map_err(db_error)
        .map(drop)
}

async fn insert_session(
    c: &impl GenericClient,
    s: &NewSession,
    or_ignore: bool,
) -> Result<(), StoreError> {
    let conflict = if or_ignore {
        "ON CONFLICT (id) DO NOTHING"
    } else {
        ""
    };
    let sql = format!(
        "INSERT INTO sessions (id, source, model, system_prompt, started_at, cwd, parent_session_id, session_key)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) {conflict}"
    );
    let stmt = c.prepare_cached(&sql).await.map_err(db_error)?;
    c.execute(
        &stmt,
        &[
            &text(&s.id),
            &text(&s.source),
            &text(&s.model),
            &text(&s.system_prompt),
            &now_secs(),
            &text(&s.cwd),
            &opt_text(&s.parent_session_id),
            &opt_text(&s.session_key),
        ],
    )
    .await
    .map_err(db_error)?;
    Ok(())
}

/// Inserts one message at the end of its session and updates the counters.
/// An FTS5-style query (`a OR b`, `a NOT b`, `"a b"`, `pre*`) as PostgreSQL's web search
/// reads it (`OR`, `-b`, phrases; a prefix is searched as the whole word).
fn web_query(text: &str) -> String {
    text.split_whitespace()
        .map(|w| match w {
            "NOT" => "-".to_owned(),
            "AND" => String::new(),
            w => w.trim_end_matches('*').to_owned(),
        })
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
        .replace("- ", "-")
}

/// Imports `s` inside the transaction `c` (as the SQLite store's `import_in`).
async fn import_in(c: &impl GenericClient, s: &ImportedSession) -> Result<Imported, StoreError> {
    let there = c
        .query_opt("SELECT 1 FROM sessions WHERE id = $1", &[&s.session.id])
        .await
        .map_err(db_error)?;
    if there.is_some() {
        return Ok(Imported::AlreadyThere);
    }
    // Titles are unique: a taken one becomes `title #2` (as a branch's does).
    let title = match &s.title {
        Some(t) => Some(free_title(c, t).await?),
        None => None,
    };
    insert_session(c, &s.session, false).await?;
    c.execute(
        "UPDATE sessions SET started_at = $2, ended_at = $3, end_reason = $4, title = $5,
                input_tokens = $6, output_tokens = $7 WHERE id = $1",
        &[
            &s.session.id,
            &s.started_at,
            &s.ended_at,
            &s.end_reason,
            &title,
            &s.input_tokens,
            &s.output_tokens,
        ],
    )
    .await
    .map_err(db_error)?;
    for m in &s.messages {
        let id = insert_message(c, &s.session.id, &m.message).await?;
        c.execute(
            "UPDATE messages SET timestamp = $2 WHERE id = $1",
            &[&id, &m.timestamp],
        )
        .await
        .map_err(db_error)?;
    }
    Ok(Imported::Added)
}

async fn insert_message(
    c: &impl GenericClient,
    session_id: &str,
    m: &NewMessage,
) -> Result<i64, StoreError> {
    let calls = m
        .tool_calls
        .as_deref()
        .and_then(tool_call_count)
        .unwrap_or(0);
    let stmt = c
        .prepare_cached(
            "WITH m AS (
                INSERT INTO messages (session_id, seq, role, content, tool_call_id, tool_calls, tool_name, timestamp, reasoning, finish_reason)
                VALUES ($1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE session_id = $1), $2, $3, $4, $5, $6, $7, $8, $9)
                RETURNING id
            ), counted AS (
                UPDATE sessions SET message_count = message_count + 1, tool_call_count = tool_call_count + $10
                WHERE id = $1
            )
            SELECT id FROM m",
        )
        .await
        .map_err(db_error)?;
    let row = c
        .query_one(
            &stmt,
            &[
                &text(session_id),
                &text(&m.role),
                &opt_text(&m.content),
                &opt_text(&m.tool_call_id),
                &opt_text(&m.tool_calls),
                &opt_text(&m.tool_name),
                &now_secs(),
                &opt_text(&m.reasoning),
                &opt_text(&m.finish_reason),
                &calls,
            ],
        )
        .await
        .map_err(db_error)?;
    row.try_get(0).map_err(db_error)
}

/// How many tool calls a `tool_calls` JSON array holds.
fn tool_call_count(t: &str) -> Option<i64> {
    let v: serde_json::Value = serde_json::from_str(t).ok()?;
    v.as_array().map(|a| a.len() as i64)
}

async fn upsert_run(c: &impl GenericClient, run: &RunRow, owner: &str) -> Result<(), StoreError> {
    let stmt = c
        .prepare_cached(
            "INSERT INTO herald_runs (id, session_id, status, model, created_at, updated_at, last_event, output, error, pending_steer, input_tokens, output_tokens, owner)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
             ON CONFLICT (id) DO UPDATE SET session_id = excluded.session_id, status = excluded.status,
                model = excluded.model, created_at = excluded.created_at, updated_at = excluded.updated_at,
                last_event = excluded.last_event, output = excluded.output, error = excluded.error,
                pending_steer = excluded.pending_steer, input_tokens = excluded.input_tokens,
                output_tokens = excluded.output_tokens, owner = excluded.owner
             WHERE herald_runs.status NOT IN ('completed', 'failed', 'cancelled')",
        )
        .await
        .map_err(db_error)?;
    c.execute(
        &stmt,
        &[
            &text(&run.id),
            &text(&run.session_id),
            &text(&run.status),
            &text(&run.model),
            &run.created_at,
            &run.updated_at,
            &opt_text(&run.last_event),
            &opt_text(&run.output),
            &opt_text(&run.error),
            &opt_text(&run.pending_steer),
            &run.input_tokens,
            &run.output_tokens,
            &owner,
        ],
    )
    .await
    .map_err(db_error)?;
    Ok(())
}

/// The live user rows of a session, in order.
async fn live_user_rows(
    c: &impl GenericClient,
    session_id: &str,
) -> Result<Vec<(i64, i64)>, StoreError> {
    let rows = c
        .query(
            "SELECT id, seq FROM messages WHERE session_id = $1 AND active = 1 AND role = 'user' ORDER BY seq",
            &[&session_id],
        )
        .await
        .map_err(db_error)?;
    rows.iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .collect::<Result<_, tokio_postgres::Error>>()
        .map_err(db_error)
}

async fn rewind_in(
    c: &impl GenericClient,
    session_id: &str,
    target: RewindTarget,
) -> Result<Result<Vec<i64>, RewindRefused>, StoreError> {
    let users = live_user_rows(c, session_id).await?;
    let ids: Vec<i64> = users.iter().map(|(id, _)| *id).collect();
    let row = match rewind_row(&ids, !ids.is_empty(), target) {
        Ok(row) => row,
        Err(refused) => return Ok(Err(refused)),
    };
    let seq = users
        .iter()
        .find(|(id, _)| *id == row)
        .map_or(0, |(_, s)| *s);
    let remaining: i64 = c
        .query_one(
            "SELECT COUNT(*) FROM messages WHERE session_id = $1 AND active = 1 AND seq < $2",
            &[&session_id, &seq],
        )
        .await
        .and_then(|r| r.try_get(0))
        .map_err(db_error)?;
    if remaining == 0 && !target.confirm_empty {
        return Ok(Err(RewindRefused::WouldEmpty));
    }
    c.execute(
        "UPDATE messages SET active = 0, compacted = 0 WHERE session_id = $1 AND active = 1 AND seq >= $2",
        &[&session_id, &seq],
    )
    .await
    .map_err(db_error)?;
    recount(c, session_id, ", rewind_count = rewind_count + 1").await?;
    Ok(Ok(users
        .into_iter()
        .filter(|(_, s)| *s < seq)
        .map(|(id, _)| id)
        .collect()))
}

/// Sets a session's `message_count` to its live rows (and `extra` assignments).
async fn recount(c: &impl GenericClient, session_id: &str, extra: &str) -> Result<(), StoreError> {
    c.execute(
        &format!(
            "UPDATE sessions SET message_count = (SELECT COUNT(*) FROM messages WHERE session_id = $1 AND active = 1){extra} WHERE id = $1"
        ),
        &[&session_id],
    )
    .await
    .map_err(db_error)?;
    Ok(())
}

async fn free_title(c: &impl GenericClient, base: &str) -> Result<String, StoreError> {
    let mut candidate = base.to_owned();
    let mut n = 1;
    loop {
        let taken: i64 = c
            .query_one(
                "SELECT COUNT(*) FROM sessions WHERE title = $1",
                &[&candidate],
            )
            .await
            .and_then(|r| r.try_get(0))
            .map_err(db_error)?;
        if taken == 0 {
            return Ok(candidate);
        }
        n += 1;
        candidate = format!("{base} #{n}");
    }
}

async fn branch_in(
    c: &impl GenericClient,
    parent: &str,
    new_id: &str,
    name: Option<&str>,
) -> Result<Option<String>, StoreError> {
    let Some(row) = c
        .query_opt("SELECT title FROM sessions WHERE id = $1", &[&parent])
        .await
        .map_err(db_error)?
    else {
        return Ok(None);
    };
    let title: Option<String> = row.try_get(0).map_err(db_error)?;
    let base = name
        .map(str::to_owned)
        .or(title)
        .unwrap_or_else(|| "branch".to_owned());
    let title = free_title(c, &text(&base)).await?;
    let config = serde_json::json!({"_branched_from": parent}).to_string();
    c.execute(
        "INSERT INTO sessions (id, source, model, model_config, system_prompt, parent_session_id, started_at, cwd, title)
         SELECT $1, source, model, $3, system_prompt, id, $4, cwd, $5 FROM sessions WHERE id = $2",
        &[&text(new_id), &parent, &config, &now_secs(), &title],
    )
    .await
    .map_err(db_error)?;
    let copied = c
        .execute(
            "INSERT INTO messages (session_id, seq, role, content, tool_call_id, tool_calls, tool_name, timestamp, token_count, finish_reason, reasoning, api_content)
             SELECT $1, row_number() OVER (ORDER BY seq), role, content, tool_call_id, tool_calls, tool_name, timestamp, token_count, finish_reason, reasoning, api_content
             FROM messages WHERE session_id = $2 AND active = 1 ORDER BY seq",
            &[&text(new_id), &parent],
        )
        .await
        .map_err(db_error)?;
    c.execute(
        "UPDATE sessions SET message_count = $2 WHERE id = $1",
        &[&text(new_id), &(copied as i64)],
    )
    .await
    .map_err(db_error)?;
    Ok(Some(title))
}

async fn compact_in(
    c: &impl GenericClient,
    id: &str,
    summary: &NewMessage,
    keep: usize,
) -> Result<Vec<i64>, StoreError> {
    let keep = i64::try_from(keep).unwrap_or(i64::MAX);
    let rows = c
        .query(
            "SELECT role, content, tool_call_id, tool_calls, tool_name, reasoning, finish_reason FROM
               (SELECT * FROM messages WHERE session_id = $1 AND active = 1 ORDER BY seq DESC LIMIT $2) AS last
             ORDER BY seq",
            &[&id, &keep],
        )
        .await
        .map_err(db_error)?;
    let kept = rows
        .iter()
        .map(|r| {
            Ok(NewMessage {
                role: r.try_get(0)?,
                content: r.try_get(1)?,
                tool_call_id: r.try_get(2)?,
                tool_calls: r.try_get(3)?,
                tool_name: r.try_get(4)?,
                reasoning: r.try_get(5)?,
                finish_reason: r.try_get(6)?,
            })
        })
        .collect::<Result<Vec<_>, tokio_postgres::Error>>()
        .map_err(db_error)?;
    c.execute(
        "UPDATE messages SET active = 0, compacted = 1 WHERE session_id = $1 AND active = 1",
        &[&id],
    )
    .await
    .map_err(db_error)?;
    c.execute(
        "UPDATE sessions SET message_count = 0 WHERE id = $1",
        &[&id],
    )
    .await
    .map_err(db_error)?;
    let mut ids = Vec::with_capacity(kept.len() + 1);
    for m in std::iter::once(summary).chain(kept.iter()) {
        ids.push(insert_message(c, id, m).await?);
    }
    Ok(ids)
}

/// Runs `f` in one transaction on a pooled connection.
macro_rules! in_transaction {
    ($pool:expr, |$tx:ident| $body:expr) => {{
        let mut conn = get(&$pool).await?;
        let $tx = conn.transaction().await.map_err(db_error)?;
        let out = $body;
        if out.is_ok() {
            $tx.commit().await.map_err(db_error)?;
        }
        out
    }};
}

fn session_row(r: &tokio_postgres::Row) -> Result<SessionRow, tokio_postgres::Error> {
    Ok(SessionRow {
        id: r.try_get(0)?,
        source: r.try_get(1)?,
        model: r.try_get(2)?,
        system_prompt: r.try_get(3)?,
        cwd: r.try_get(4)?,
        title: r.try_get(5)?,
        parent_session_id: r.try_get(6)?,
        message_count: r.try_get(7)?,
        model_config: r.try_get(8)?,
    })
}

fn run_row(r: &tokio_postgres::Row) -> Result<RunRow, tokio_postgres::Error> {
    Ok(RunRow {
        id: r.try_get(0)?,
        session_id: r.try_get(1)?,
        status: r.try_get(2)?,
        model: r.try_get(3)?,
        created_at: r.try_get(4)?,
        updated_at: r.try_get(5)?,
        last_event: r.try_get(6)?,
        output: r.try_get(7)?,
        error: r.try_get(8)?,
        pending_steer: r.try_get(9)?,
        input_tokens: r.try_get(10)?,
        output_tokens: r.try_get(11)?,
    })
}

#[async_trait]
impl SessionBackend for PgSessions {
    async fn create_session(&self, session: NewSession) -> Result<(), StoreError> {
        self.write(
            move |pool| async move { insert_session(&get(&pool).await?, &session, false).await },
        )
        .await
    }

    fn ensure_session_detached(&self, session: NewSession) -> Result<(), StoreError> {
        self.detach(
            move |pool| async move { insert_session(&get(&pool).await?, &session, true).await },
        )
    }

    async fn append(&self, session_id: String, m: NewMessage) -> Result<i64, StoreError> {
        self.write(
            move |pool| async move { insert_message(&get(&pool).await?, &session_id, &m).await },
        )
        .await
    }

    fn append_detached(&self, session_id: String, m: NewMessage) -> Result<(), StoreError> {
        self.detach(move |pool| async move {
            insert_message(&get(&pool).await?, &session_id, &m)
                .await
                .map(drop)
        })
    }

    async fn record_run(&self, run: RunRecord) -> Result<Vec<i64>, StoreError> {
        self.write(move |pool| async move {
            in_transaction!(pool, |tx| {
                let mut ids = Vec::new();
                let mut out = insert_session(&tx, &run.session, true).await;
                for m in &run.messages {
                    if out.is_err() {
                        break;
                    }
                    match insert_message(&tx, &run.session.id, m).await {
                        Ok(id) => ids.push(id),
                        Err(e) => out = Err(e),
                    }
                }
                out.map(|()| ids)
            })
        })
        .await
    }

    async fn rewind(
        &self,
        session_id: String,
        target: RewindTarget,
    ) -> Result<Result<Vec<i64>, RewindRefused>, StoreError> {
        self.write(move |pool| async move {
            in_transaction!(pool, |tx| rewind_in(&tx, &session_id, target).await)
        })
        .await
    }

    async fn branch(
        &self,
        parent: String,
        new_id: String,
        name: Option<String>,
    ) -> Result<Option<String>, StoreError> {
        self.write(move |pool| async move {
            in_transaction!(pool, |tx| branch_in(&tx, &parent, &new_id, name.as_deref())
                .await)
        })
        .await
    }

    async fn finish_turn(
        &self,
        session_id: String,
        usage: (i64, i64, i64),
        run: Option<RunRow>,
        owner: String,
    ) -> Result<(), StoreError> {
        self.write(move |pool| async move {
            in_transaction!(pool, |tx| {
                let counted = tx
                    .execute(
                        "UPDATE sessions SET api_call_count = api_call_count + $2, input_tokens = input_tokens + $3, output_tokens = output_tokens + $4 WHERE id = $1",
                        &[&session_id, &usage.0, &usage.1, &usage.2],
                    )
                    .await
                    .map_err(db_error);
                match (counted, &run) {
                    (Err(e), _) => Err(e),
                    (Ok(_), Some(run)) => upsert_run(&tx, run, &owner).await,
                    (Ok(_), None) => Ok(()),
                }
            })
        })
        .await
    }

    async fn save_response(&self, r: StoredResponse, keep: usize) -> Result<(), StoreError> {
        self.write(move |pool| async move {
            let now = now_secs();
            let keep = i64::try_from(keep).unwrap_or(i64::MAX);
            get(&pool)
                .await?
                .execute(
                    "WITH saved AS (
                        INSERT INTO herald_responses (id, conversation, session_id, instructions, history, response, created_at, used_at)
                        VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
                        ON CONFLICT (id) DO UPDATE SET conversation = excluded.conversation,
                            session_id = excluded.session_id, instructions = excluded.instructions,
                            history = excluded.history, response = excluded.response,
                            created_at = excluded.created_at, used_at = excluded.used_at
                        RETURNING id
                    )
                    DELETE FROM herald_responses WHERE id NOT IN (SELECT id FROM saved) AND id NOT IN
                        (SELECT id FROM herald_responses ORDER BY used_at DESC, n DESC LIMIT GREATEST($8::bigint - 1, 0))",
                    &[
                        &text(&r.id),
                        &opt_text(&r.conversation),
                        &text(&r.session_id),
                        &opt_text(&r.instructions),
                        &text(&r.history),
                        &text(&r.response),
                        &now,
                        &keep,
                    ],
                )
                .await
                .map_err(db_error)
                .map(drop)
        })
        .await
    }

    async fn touch_response(&self, id: String) -> Result<(), StoreError> {
        self.write(move |pool| async move {
            get(&pool)
                .await?
                .execute(
                    "UPDATE herald_responses SET used_at = $2 WHERE id = $1",
                    &[&id, &now_secs()],
                )
                .await
                .map_err(db_error)
                .map(drop)
        })
        .await
    }

    async fn delete_response(&self, id: String) -> Result<bool, StoreError> {
        self.write(move |pool| async move {
            get(&pool)
                .await?
                .execute("DELETE FROM herald_responses WHERE id = $1", &[&id])
                .await
                .map_err(db_error)
                .map(|n| n > 0)
        })
        .await
    }

    async fn save_run(&self, run: RunRow, owner: String) -> Result<(), StoreError> {
        self.write(move |pool| async move { upsert_run(&get(&pool).await?, &run, &owner).await })
            .await
    }

    fn save_run_detached(&self, run: RunRow, owner: String) -> Result<(), StoreError> {
        self.detach(move |pool| async move { upsert_run(&get(&pool).await?, &run, &owner).await })
    }

    /// The runs of an earlier process of this instance fail with `why`; those of
    /// instances whose heartbeat ran out with [`INSTANCE_LOST`].
    async fn fail_unfinished_runs(&self, why: String) -> Result<usize, StoreError> {
        let (me, prefix) = (
            self.owner.clone(),
            format!("{}%", like_escape(&self.instance_prefix)),
        );
        self.write(move |pool| async move {
            let c = get(&pool).await?;
            let now = now_secs();
            let mine = c
                .execute(
                    "UPDATE herald_runs SET status = 'failed', error = $1, updated_at = $2
                     WHERE status NOT IN ('completed', 'failed', 'cancelled') AND owner LIKE $3 AND owner <> $4",
                    &[&why, &now, &prefix, &me],
                )
                .await
                .map_err(db_error)?;
            let lost = fail_lost_runs(&pool, &me).await?;
            Ok(usize::try_from(mine).unwrap_or(usize::MAX) + lost)
        })
        .await
    }

    async fn end_session(&self, id: String, reason: String) -> Result<bool, StoreError> {
        self.write(move |pool| async move {
            let c = get(&pool).await?;
            let changed = c
                .execute(
                    "UPDATE sessions SET ended_at = $2, end_reason = $3 WHERE id = $1",
                    &[&id, &now_secs(), &reason],
                )
                .await
                .map_err(db_error)?;
            Ok(changed > 0)
        })
        .await
    }

    async fn set_title(
        &self,
        id: String,
        title: String,
    ) -> Result<Result<(), TitleRefused>, StoreError> {
        self.write(move |pool| async move {
            let c = get(&pool).await?;
            let taken: i64 = c
                .query_one(
                    "SELECT COUNT(*) FROM sessions WHERE title = $1 AND id <> $2",
                    &[&title, &id],
                )
                .await
                .and_then(|r| r.try_get(0))
                .map_err(db_error)?;
            if taken > 0 {
                return Ok(Err(TitleRefused::Taken(title)));
            }
            let changed = c
                .execute(
                    "UPDATE sessions SET title = $2 WHERE id = $1",
                    &[&id, &title],
                )
                .await
                .map_err(db_error)?;
            Ok(if changed == 0 {
                Err(TitleRefused::NoSession(id))
            } else {
                Ok(())
            })
        })
        .await
    }

    async fn set_model(
        &self,
        id: String,
        model: String,
        model_config: String,
    ) -> Result<bool, StoreError> {
        self.write(move |pool| async move {
            let changed = get(&pool)
                .await?
                .execute(
                    "UPDATE sessions SET model = $2, model_config = $3 WHERE id = $1",
                    &[&id, &model, &model_config],
                )
                .await
                .map_err(db_error)?;
            Ok(changed > 0)
        })
        .await
    }

    async fn delete_session(&self, id: String) -> Result<bool, StoreError> {
        self.write(move |pool| async move {
            in_transaction!(pool, |tx| {
                let mut out = Ok(0);
                for sql in [
                    "DELETE FROM messages WHERE session_id = $1",
                    "DELETE FROM herald_runs WHERE session_id = $1",
                    "UPDATE sessions SET parent_session_id = NULL WHERE parent_session_id = $1",
                    "DELETE FROM sessions WHERE id = $1",
                ] {
                    out = tx.execute(sql, &[&id]).await.map_err(db_error);
                    if out.is_err() {
                        break;
                    }
                }
                out.map(|n| n > 0)
            })
        })
        .await
    }

    async fn undo(&self, id: String) -> Result<usize, StoreError> {
        self.write(move |pool| async move {
            in_transaction!(pool, |tx| {
                let last = tx
                    .query_one(
                        "SELECT MAX(seq) FROM messages WHERE session_id = $1 AND active = 1 AND role = 'user'",
                        &[&id],
                    )
                    .await
                    .and_then(|r| r.try_get::<_, Option<i64>>(0))
                    .map_err(db_error);
                match last {
                    Err(e) => Err(e),
                    Ok(None) => Ok(0),
                    Ok(Some(seq)) => {
                        let removed = tx
                            .execute(
                                "UPDATE messages SET active = 0 WHERE session_id = $1 AND active = 1 AND seq >= $2",
                                &[&id, &seq],
                            )
                            .await
                            .map_err(db_error);
                        match removed {
                            Ok(n) => recount(&tx, &id, "").await.map(|()| n as usize),
                            Err(e) => Err(e),
                        }
                    }
                }
            })
        })
        .await
    }

    async fn compact(
        &self,
        id: String,
        summary: NewMessage,
        keep: usize,
    ) -> Result<Vec<i64>, StoreError> {
        self.write(move |pool| async move {
            in_transaction!(pool, |tx| compact_in(&tx, &id, &summary, keep).await)
        })
        .await
    }

    async fn session(&self, id: String) -> Result<Option<SessionRow>, StoreError> {
        self.deadline
            .bound(async {
        let row = self
            .conn()
            .await?
            .query_opt(
                "SELECT id, source, model, system_prompt, cwd, title, parent_session_id, message_count, model_config FROM sessions WHERE id = $1",
                &[&id],
            )
            .await
            .map_err(db_error)?;
        row.as_ref().map(session_row).transpose().map_err(db_error)
            })
            .await
    }

    async fn latest(&self, source: String) -> Result<Option<String>, StoreError> {
        self.newest(
            "SELECT id FROM sessions WHERE source = $1 AND archived = 0 ORDER BY started_at DESC, n DESC LIMIT 1",
            source,
        )
        .await
    }

    async fn import_session(&self, session: ImportedSession) -> Result<Imported, StoreError> {
        self.write(
            move |pool| async move { in_transaction!(pool, |tx| import_in(&tx, &session).await) },
        )
        .await
    }

    async fn search(&self, q: SearchQuery) -> Result<Result<Vec<SearchHit>, String>, StoreError> {
        self.deadline
            .bound(async {
                let rows = self
                    .conn()
                    .await?
                    .query(
                        "SELECT m.session_id, m.id, m.role,
                                ts_headline('simple', coalesce(m.content, ''), query,
                                            'StartSel=>>>, StopSel=<<<, MaxWords=40, MinWords=10')
                         FROM messages m, websearch_to_tsquery('simple', $1) query
                         WHERE to_tsvector('simple', coalesce(m.content, '')) @@ query
                           AND m.active = 1
                           AND (cardinality($2::text[]) = 0 OR m.role = ANY($2))
                           AND ($3::text IS NULL OR m.session_id <> $3)
                         ORDER BY ts_rank(to_tsvector('simple', coalesce(m.content, '')), query) DESC, m.id DESC
                         LIMIT 500",
                        &[&web_query(&q.text), &q.roles, &q.exclude],
                    )
                    .await
                    .map_err(db_error)?;
                let mut best: Vec<SearchHit> = Vec::new();
                for r in &rows {
                    let hit = SearchHit {
                        session_id: r.try_get(0).map_err(db_error)?,
                        message_id: r.try_get(1).map_err(db_error)?,
                        role: r.try_get(2).map_err(db_error)?,
                        snippet: r.try_get(3).map_err(db_error)?,
                    };
                    if !best.iter().any(|b| b.session_id == hit.session_id) {
                        best.push(hit);
                        if best.len() >= q.limit.max(1) {
                            break;
                        }
                    }
                }
                Ok(Ok(best))
            })
            .await
    }

    async fn keyed(&self, session_key: String) -> Result<Option<String>, StoreError> {
        self.newest(
            "SELECT id FROM sessions WHERE session_key = $1 AND archived = 0 ORDER BY started_at DESC, n DESC LIMIT 1",
            session_key,
        )
        .await
    }

    async fn history(&self, session_id: String) -> Result<Vec<StoredMessage>, StoreError> {
        self.deadline
            .bound(async {
        let rows = self
            .conn()
            .await?
            .query(
                "SELECT id, role, content, tool_call_id, tool_calls, tool_name, reasoning FROM messages
                 WHERE session_id = $1 AND active = 1 ORDER BY seq",
                &[&session_id],
            )
            .await
            .map_err(db_error)?;
        rows.iter()
            .map(|r| {
                Ok(StoredMessage {
                    id: r.try_get(0)?,
                    role: r.try_get(1)?,
                    content: r.try_get(2)?,
                    tool_call_id: r.try_get(3)?,
                    tool_calls: r.try_get(4)?,
                    tool_name: r.try_get(5)?,
                    reasoning: r.try_get(6)?,
                })
            })
            .collect::<Result<_, tokio_postgres::Error>>()
            .map_err(db_error)
            })
            .await
    }

    async fn response(&self, id: String) -> Result<Option<StoredResponse>, StoreError> {
        self.deadline
            .bound(async {
        let row = self
            .conn()
            .await?
            .query_opt(
                "SELECT id, conversation, session_id, instructions, history, response FROM herald_responses WHERE id = $1",
                &[&id],
            )
            .await
            .map_err(db_error)?;
        row.map(|r| {
            Ok(StoredResponse {
                id: r.try_get(0)?,
                conversation: r.try_get(1)?,
                session_id: r.try_get(2)?,
                instructions: r.try_get(3)?,
                history: r.try_get(4)?,
                response: r.try_get(5)?,
            })
        })
        .transpose()
        .map_err(db_error)
            })
            .await
    }

    async fn latest_response_of(&self, conversation: String) -> Result<Option<String>, StoreError> {
        self.deadline
            .bound(async {
        let row = self
            .conn()
            .await?
            .query_opt(
                "SELECT id FROM herald_responses WHERE conversation = $1 ORDER BY created_at DESC, n DESC LIMIT 1",
                &[&conversation],
            )
            .await
            .map_err(db_error)?;
        row.map(|r| r.try_get(0)).transpose().map_err(db_error)
            })
            .await
    }

    async fn run(&self, id: String) -> Result<Option<RunRow>, StoreError> {
        self.deadline
            .bound(async {
        let row = self
            .conn()
            .await?
            .query_opt(
                "SELECT id, session_id, status, model, created_at, updated_at, last_event, output, error, pending_steer, input_tokens, output_tokens FROM herald_runs WHERE id = $1",
                &[&id],
            )
            .await
            .map_err(db_error)?;
        row.as_ref().map(run_row).transpose().map_err(db_error)
            })
            .await
    }

    async fn list(&self, limit: usize) -> Result<Vec<SessionSummary>, StoreError> {
        self.deadline
            .bound(async {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .conn()
            .await?
            .query(
                "SELECT s.id, s.title, s.started_at, s.message_count, s.source,
                        (SELECT content FROM messages m WHERE m.session_id = s.id AND m.active = 1 AND m.role = 'user' ORDER BY m.seq LIMIT 1),
                        s.cwd,
                        COALESCE((SELECT MAX(timestamp) FROM messages m WHERE m.session_id = s.id), s.started_at)
                 FROM sessions s WHERE s.archived = 0 AND s.source IS DISTINCT FROM 'subagent'
                 ORDER BY s.started_at DESC, s.n DESC LIMIT $1",
                &[&limit],
            )
            .await
            .map_err(db_error)?;
        rows.iter()
            .map(|r| {
                let first: Option<String> = r.try_get(5)?;
                Ok(SessionSummary {
                    id: r.try_get(0)?,
                    title: r.try_get(1)?,
                    started_at: r.try_get(2)?,
                    message_count: r.try_get(3)?,
                    source: r.try_get(4)?,
                    cwd: r.try_get(6)?,
                    updated_at: r.try_get(7)?,
                    preview: herald_store::sessions::preview_of(first.as_deref()),
                })
            })
            .collect::<Result<_, tokio_postgres::Error>>()
            .map_err(db_error)
            })
            .await
    }

    async fn usage(&self, id: String) -> Result<Option<SessionUsage>, StoreError> {
        self.deadline
            .bound(async {
        let row = self
            .conn()
            .await?
            .query_opt(
                "SELECT model, input_tokens, output_tokens, api_call_count FROM sessions WHERE id = $1",
                &[&id],
            )
            .await
            .map_err(db_error)?;
        row.map(|r| {
            Ok(SessionUsage {
                model: r.try_get(0)?,
                input_tokens: r.try_get(1)?,
                output_tokens: r.try_get(2)?,
                api_calls: r.try_get(3)?,
            })
        })
        .transpose()
        .map_err(db_error)
            })
            .await
    }

    fn location(&self) -> String {
        self.shown.clone()
    }

    fn shared(&self) -> bool {
        true
    }

    async fn relay_run_control(
        &self,
        run_id: String,
        control: RunControl,
    ) -> Result<Relayed, StoreError> {
        let row = self
            .deadline
            .bound(async {
                self.conn()
                    .await?
                    .query_opt(
                        "SELECT owner, status IN ('completed', 'failed', 'cancelled'),
                                owner IN (SELECT owner FROM herald_instances WHERE alive_until_ms > $2)
                         FROM herald_runs WHERE id = $1",
                        &[&run_id, &now_ms()],
                    )
                    .await
                    .map_err(db_error)
            })
            .await?;
        let Some(row) = row else {
            return Ok(Relayed::Nobody);
        };
        let owner: Option<String> = row.try_get(0).map_err(db_error)?;
        let finished: bool = row.try_get(1).map_err(db_error)?;
        let alive: Option<bool> = row.try_get(2).map_err(db_error)?;
        let owner = match owner {
            _ if finished => return Ok(Relayed::Nobody),
            Some(owner) if alive == Some(true) && owner != self.owner => owner,
            _ => return Ok(Relayed::OwnerGone),
        };
        // An approval waits for the owner's answer (how many it resolved, or why not).
        let waits = matches!(
            control,
            RunControl::Approve { .. } | RunControl::Follow { .. }
        );
        let ask = waits.then(|| self.replies.ask());
        let payload = serde_json::json!({
            "owner": owner,
            "run": run_id,
            "control": control,
            "reply_to": ask.as_ref().map(|(id, _)| (self.owner.clone(), id.clone())),
        })
        .to_string();
        if payload.len() > MAX_NOTIFY {
            return Err(StoreError::Database(format!(
                "the request for run {run_id} is over {MAX_NOTIFY} bytes, too long to pass to the instance that runs it"
            )));
        }
        if ask.is_some() {
            self.replies.listen(&self.target, &self.owner).await;
        }
        self.deadline
            .bound(async {
                self.conn()
                    .await?
                    .execute("SELECT pg_notify($1, $2)", &[&CONTROL_CHANNEL, &payload])
                    .await
                    .map_err(db_error)
            })
            .await?;
        match ask {
            None => Ok(Relayed::Sent),
            Some((id, answer)) => match tokio::time::timeout(REPLY_WAIT, answer).await {
                Ok(Ok(reply)) => Ok(Relayed::Answered(reply)),
                _ => {
                    self.replies.forget(&id);
                    Ok(Relayed::Sent)
                }
            },
        }
    }

    async fn follow_run(&self, run_id: String) -> Result<Followed, StoreError> {
        let (stream, events) = self.streams.open(&self.target, &self.owner).await;
        let follower = Follower {
            instance: self.owner.clone(),
            stream: stream.clone(),
        };
        let relayed = self
            .relay_run_control(run_id, RunControl::Follow { follower })
            .await;
        let followed = match relayed {
            Ok(Relayed::Answered(ControlReply::Following)) => return Ok(Followed::Events(events)),
            Ok(Relayed::Answered(ControlReply::Refused { code, message })) => {
                Ok(Followed::Refused { code, message })
            }
            // An owner that does not answer in time is as good as gone.
            Ok(
                Relayed::Answered(ControlReply::Done { .. }) | Relayed::Sent | Relayed::OwnerGone,
            ) => Ok(Followed::OwnerGone),
            Ok(Relayed::Nobody) => Ok(Followed::Nobody),
            Err(e) => Err(e),
        };
        self.streams.close(&stream);
        followed
    }

    fn forward_run_events(&self, follower: Follower, events: RelayedEvents) {
        crate::follow::forward(self.target.clone(), follower, events);
    }

    /// The key is this instance's when nobody has it, when it is older than the
    /// window or was claimed for another request, or when its maker is gone without
    /// an answer.
    async fn claim_key(
        &self,
        key: String,
        fingerprint: String,
        window_ms: i64,
    ) -> Result<KeyClaim, StoreError> {
        self.deadline
            .bound(async {
        let now = now_ms();
        let c = self.conn().await?;
        let mine = c
            .execute(
                "INSERT INTO herald_idempotency (key, fingerprint, created_at_ms, owner) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (key) DO UPDATE SET fingerprint = excluded.fingerprint,
                     created_at_ms = excluded.created_at_ms, owner = excluded.owner,
                     status = NULL, headers = NULL, body = NULL
                 WHERE herald_idempotency.created_at_ms < $3 - $5
                    OR herald_idempotency.fingerprint <> excluded.fingerprint
                    OR (herald_idempotency.status IS NULL AND herald_idempotency.owner NOT IN
                        (SELECT owner FROM herald_instances WHERE alive_until_ms > $3))",
                &[&key, &fingerprint, &now, &self.owner, &window_ms],
            )
            .await
            .map_err(db_error)?;
        if mine == 1 {
            return Ok(KeyClaim::Mine);
        }
        let row = c
            .query_opt(
                "SELECT status, headers, body FROM herald_idempotency WHERE key = $1",
                &[&key],
            )
            .await
            .map_err(db_error)?;
        let Some(row) = row else {
            return Ok(KeyClaim::Pending);
        };
        let status: Option<i32> = row.try_get(0).map_err(db_error)?;
        let Some(status) = status.and_then(|s| u16::try_from(s).ok()) else {
            return Ok(KeyClaim::Pending);
        };
        let headers: Option<String> = row.try_get(1).map_err(db_error)?;
        let body: Option<Vec<u8>> = row.try_get(2).map_err(db_error)?;
        let headers = headers
            .and_then(|h| serde_json::from_str::<Vec<(String, String)>>(&h).ok())
            .unwrap_or_default();
        Ok(KeyClaim::Answered(KeptAnswer {
            status,
            headers,
            body: body.unwrap_or_default(),
        }))
            })
            .await
    }

    async fn release_key(&self, key: String, fingerprint: String) -> Result<(), StoreError> {
        self.deadline
            .bound(async {
                self.conn()
                    .await?
                    .execute(
                        "DELETE FROM herald_idempotency
                         WHERE key = $1 AND fingerprint = $2 AND owner = $3 AND status IS NULL",
                        &[&key, &fingerprint, &self.owner],
                    )
                    .await
                    .map_err(db_error)?;
                Ok(())
            })
            .await
    }

    async fn keep_answer(
        &self,
        key: String,
        fingerprint: String,
        answer: KeptAnswer,
    ) -> Result<(), StoreError> {
        self.deadline
            .bound(async {
                let headers = serde_json::to_string(&answer.headers)
                    .map_err(|e| StoreError::Database(e.to_string()))?;
                self.conn()
                    .await?
                    .execute(
                        "UPDATE herald_idempotency SET status = $3, headers = $4, body = $5
                 WHERE key = $1 AND fingerprint = $2 AND owner = $6",
                        &[
                            &key,
                            &fingerprint,
                            &i32::from(answer.status),
                            &headers,
                            &answer.body,
                            &self.owner,
                        ],
                    )
                    .await
                    .map_err(db_error)?;
                // Keys past any window are forgotten now and then.
                if every_hundredth() {
                    let old = now_ms() - 3_600_000;
                    let _ = self
                        .conn()
                        .await?
                        .execute(
                            "DELETE FROM herald_idempotency WHERE created_at_ms < $1",
                            &[&old],
                        )
                        .await;
                }
                Ok(())
            })
            .await
    }

    fn on_run_control(&self, handler: ControlHandler) {
        let me = self.owner.clone();
        let pool = self.pool.clone();
        let hear = std::sync::Arc::new(move |payload: &str| {
            let Ok(relayed) = serde_json::from_str::<RelayedControl>(payload) else {
                return;
            };
            if relayed.owner != me {
                return;
            }
            let reply = handler(relayed.run, relayed.control);
            if let (Some((to, id)), Some(reply)) = (relayed.reply_to, reply) {
                let answer = serde_json::json!({"to": to, "id": id, "reply": reply}).to_string();
                let pool = pool.clone();
                tokio::spawn(async move {
                    if let Ok(c) = get(&pool).await {
                        let _ = c
                            .execute(
                                "SELECT pg_notify($1, $2)",
                                &[&crate::replies::CHANNEL, &answer],
                            )
                            .await;
                    }
                });
            }
        });
        crate::listen::spawn_on(self.target.clone(), CONTROL_CHANNEL, hear, None);
    }

    /// One turn at a time per session: a hold on it, let go after the writes queued
    /// before (the turn's messages are stored before another instance's turn reads
    /// them).
    async fn hold_session(&self, session_id: String) -> Result<Hold, StoreError> {
        let holder = crate::holds::holder_of(&self.owner);
        let waiting = "waiting for another instance's turn on this session";
        let held = crate::holds::Held {
            pool: self.pool.clone(),
            table: &SESSION_HOLDS,
            key: session_id,
            holder,
            deadline: self.deadline,
        };
        held.acquire(waiting).await?;
        let queue = self.queue.clone();
        let alive = held.keep(move |release| {
            // Let go after the writes queued before, waiting for room when the
            // queue is full (the hold runs out by itself if the store is gone).
            let job: Job = Box::new(move |_pool| release);
            if let Err(mpsc::error::TrySendError::Full(job)) = queue.try_send(job) {
                tokio::spawn(async move { queue.send(job).await });
            }
        });
        Ok(Hold::releasing(Box::new(alive)))
    }
}

static SESSION_HOLDS: crate::holds::HoldTable = crate::holds::HoldTable {
    table: "herald_session_holds",
    key: "session_id",
};

/// The channel run controls are relayed on, and the longest one (NOTIFY's payload is
/// at most 8000 bytes).
const CONTROL_CHANNEL: &str = "herald_run_control";
const MAX_NOTIFY: usize = 7900;

/// A control as relayed: for whom, which run, what, and who waits for the answer.
#[derive(serde::Deserialize)]
struct RelayedControl {
    owner: String,
    run: String,
    control: RunControl,
    #[serde(default)]
    reply_to: Option<(String, String)>,
}

/// How long an instance waits for the owner's answer to a relayed approval.
const REPLY_WAIT: Duration = Duration::from_secs(5);

/// True once in every hundred calls.
fn every_hundredth() -> bool {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    CALLS
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        .is_multiple_of(100)
}

/// `s` for a `LIKE` pattern, its wildcards taken literally.
fn like_escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_")
}
