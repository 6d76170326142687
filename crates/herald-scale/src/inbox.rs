//! The inbox on PostgreSQL: the store's interface over a pool of connections. Each
//! change is one statement (data-modifying CTEs), so it is atomic without a
//! transaction's extra round trips; outcomes of claimed work apply only while this
//! instance holds the entry's lease, so a late answer from an instance whose lease
//! was taken over changes nothing. Every call is bounded by the store's deadline
//! (`store.statement_timeout_seconds`).

use crate::connect::Target;
use crate::db_error;
use crate::enqueue::Enqueuer;
use crate::rows::{self, DELIVERY_COLUMNS, item_columns, opt_text, text};
use async_trait::async_trait;
use deadpool_postgres::{Object, Pool};
use herald_store::deliveries::MESSAGE_PREVIEW_CHARS;
use herald_store::events::{EventQuery, EventSummary};
use herald_store::sessions::Hold;
use herald_store::{
    Attempt, CancelOutcome, ClaimRequest, DEDUP_WINDOW_MS, Delivery, DeliveryQuery, EnqueueOutcome,
    InboxBackend, InboxGauges, InboxItem, InboxQuery, NewDelivery, NewInboxItem, ReplayOutcome,
    Stage, StoreError, now_ms,
};
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::types::ToSql;

/// How often expired dedup keys are deleted.
const EXPIRE_EVERY: Duration = Duration::from_secs(60);

/// The PostgreSQL inbox of one instance.
pub struct PgInbox {
    pool: Pool,
    target: Arc<Target>,
    instance: String,
    enqueuer: Enqueuer,
    /// Dropped with the inbox: its background task ends.
    _alive: tokio::sync::oneshot::Sender<()>,
}

const WAITING_STATE: &str = "CASE WHEN answer IS NULL THEN 'queued' ELSE 'delivering' END";

impl PgInbox {
    pub(crate) fn start(pool: Pool, target: Target, instance: String) -> PgInbox {
        let enqueuer = Enqueuer::start(pool.clone(), target.deadline);
        let (alive, dropped) = tokio::sync::oneshot::channel();
        tokio::spawn(expire_keys(pool.clone(), dropped, target.deadline));
        PgInbox {
            pool,
            target: Arc::new(target),
            instance,
            enqueuer,
            _alive: alive,
        }
    }

    /// The instance this inbox claims for.
    pub fn instance(&self) -> &str {
        &self.instance
    }

    async fn conn(&self) -> Result<Object, StoreError> {
        self.pool
            .get()
            .await
            .map_err(|e| StoreError::Unreachable(format!("{}: {e}", self.target.shown)))
    }

    async fn execute(&self, sql: &str, args: &[&(dyn ToSql + Sync)]) -> Result<u64, StoreError> {
        self.target
            .deadline
            .bound(async {
                let c = self.conn().await?;
                let stmt = c.prepare_cached(sql).await.map_err(db_error)?;
                c.execute(&stmt, args).await.map_err(db_error)
            })
            .await
    }

    async fn query(
        &self,
        sql: &str,
        args: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>, StoreError> {
        self.target
            .deadline
            .bound(async {
                let c = self.conn().await?;
                let stmt = c.prepare_cached(sql).await.map_err(db_error)?;
                c.query(&stmt, args).await.map_err(db_error)
            })
            .await
    }

    /// An outcome of claimed work: `set` applied to the entry while this instance
    /// holds it, with its attempt (and delivery) recorded in the same statement.
    async fn outcome(&self, o: Outcome<'_>) -> Result<(), StoreError> {
        let delivery = o.delivery.map(|d| {
            (
                d,
                d.message
                    .chars()
                    .take(MESSAGE_PREVIEW_CHARS)
                    .collect::<String>(),
            )
        });
        let sql = format!(
            "WITH held AS (
                UPDATE inbox SET {set}, updated_at_ms = $3
                WHERE id = $1 AND state = 'running' AND lease_owner = $2
                RETURNING id, $8::text AS extra
            ), attempt AS (
                INSERT INTO inbox_attempts (inbox_id, stage, started_at_ms, finished_at_ms, outcome, error)
                SELECT id, $4, $5, $3, $6, $7 FROM held
            ){sent}
            SELECT count(*) FROM held",
            set = o.set,
            sent = if delivery.is_some() {
                ", sent AS (
                INSERT INTO deliveries (kind, route, delivery_id, target, status, attempts, latency_ms, error, message, created_at_ms)
                SELECT $9, $10, $11, $12, $13, $14, $15, $16, $17, $18 FROM held
            )"
            } else {
                ""
            }
        );
        let now = now_ms();
        let error = o.error.map(text);
        let mut args: Vec<&(dyn ToSql + Sync)> = vec![
            &o.id,
            &self.instance,
            &now,
            &o.stage,
            &o.started_ms,
            &o.result,
            &error,
            &o.extra,
        ];
        let kept = delivery
            .as_ref()
            .map(|(d, message)| DeliveryArgs::of(d, message));
        if let Some(kept) = &kept {
            args.extend(kept.args());
        }
        let rows = self.query(&sql, &args).await?;
        let held: i64 = rows
            .first()
            .map(|r| r.try_get(0))
            .transpose()
            .map_err(db_error)?
            .unwrap_or(0);
        if held == 0 {
            tracing::warn!(
                inbox_id = o.id,
                "an outcome for an entry this instance no longer holds was dropped (its lease ran out and another instance took it over)"
            );
        }
        Ok(())
    }
}

/// One outcome of claimed work.
struct Outcome<'a> {
    id: i64,
    /// The assignments (`$3` is now, `$8` is `extra`).
    set: &'static str,
    stage: &'static str,
    started_ms: i64,
    result: &'static str,
    error: Option<&'a str>,
    extra: Option<String>,
    delivery: Option<&'a NewDelivery>,
}

/// A delivery's columns, as parameters `$9`..`$18`.
struct DeliveryArgs {
    kind: String,
    route: String,
    delivery_id: String,
    target: String,
    status: String,
    attempts: i64,
    latency_ms: i64,
    error: Option<String>,
    message: String,
    created_at_ms: i64,
}

impl DeliveryArgs {
    fn of(d: &NewDelivery, message: &str) -> DeliveryArgs {
        DeliveryArgs {
            kind: text(&d.kind).into_owned(),
            route: text(&d.route).into_owned(),
            delivery_id: text(&d.delivery_id).into_owned(),
            target: text(&d.target).into_owned(),
            status: text(&d.status).into_owned(),
            attempts: i64::from(d.attempts),
            latency_ms: i64::try_from(d.latency_ms).unwrap_or(i64::MAX),
            error: opt_text(&d.error).map(|e| e.into_owned()),
            message: text(message).into_owned(),
            created_at_ms: d.created_at_ms,
        }
    }

    fn args(&self) -> [&(dyn ToSql + Sync); 10] {
        [
            &self.kind,
            &self.route,
            &self.delivery_id,
            &self.target,
            &self.status,
            &self.attempts,
            &self.latency_ms,
            &self.error,
            &self.message,
            &self.created_at_ms,
        ]
    }
}

/// Deletes dedup keys that left the window (any instance may; it is idempotent).
async fn expire_keys(
    pool: Pool,
    mut dropped: tokio::sync::oneshot::Receiver<()>,
    deadline: crate::deadline::Deadline,
) {
    // The first sweep waits a period: sweeping at open raced a caller's first
    // enqueue of an old timestamp (the check ignores expired keys anyway).
    let first = tokio::time::Instant::now() + EXPIRE_EVERY;
    let mut tick = tokio::time::interval_at(first, EXPIRE_EVERY);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = &mut dropped => return,
        }
        let before = now_ms() - DEDUP_WINDOW_MS;
        let removed = deadline.bound(async {
            pool.get()
                .await
                .map_err(|e| StoreError::Unreachable(e.to_string()))?
                .execute("DELETE FROM dedup WHERE seen_at_ms < $1", &[&before])
                .await
                .map_err(db_error)
        });
        match removed.await {
            Ok(n) if n > 0 => tracing::debug!(removed = n, "expired dedup keys removed"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "could not remove expired dedup keys"),
        }
    }
}

fn claim_sql() -> String {
    format!(
        "WITH ready AS (
            SELECT id, route FROM inbox
            WHERE state IN ('queued', 'delivering') AND next_attempt_at_ms <= $1
              AND (($9::text IS NULL AND left(route, 5) <> 'chat:') OR left(route, length($9::text)) = $9::text)
            ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED
        ), expired AS (
            SELECT id, route FROM inbox
            WHERE state = 'running' AND lease_until_ms < $1
              AND (($9::text IS NULL AND left(route, 5) <> 'chat:') OR left(route, length($9::text)) = $9::text)
            ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED
        ), ranked AS (
            SELECT id, route, row_number() OVER (PARTITION BY route ORDER BY id) AS n
            FROM (SELECT * FROM ready UNION ALL SELECT * FROM expired) AS c
        ), chosen AS (
            SELECT r.id FROM ranked r
            LEFT JOIN unnest($3::text[], $4::int8[]) AS busy(route, n) ON busy.route = r.route
            WHERE r.n + COALESCE(busy.n, 0) <= $5
            ORDER BY r.id LIMIT $6
        ), lost AS (
            INSERT INTO inbox_attempts (inbox_id, stage, started_at_ms, finished_at_ms, outcome, error)
            SELECT i.id, CASE WHEN i.answer IS NULL THEN 'run' ELSE 'delivery' END, i.updated_at_ms, $1,
                   'interrupted', 'the lease of instance ' || COALESCE(i.lease_owner, '?') || ' ran out (the instance was lost); taken over'
            FROM inbox i JOIN chosen c ON c.id = i.id WHERE i.state = 'running'
        )
        UPDATE inbox AS i SET state = 'running', lease_until_ms = $1 + $7, lease_owner = $8,
            updated_at_ms = $1,
            attempts = i.attempts + (i.answer IS NULL)::int,
            delivery_attempts = i.delivery_attempts + (i.answer IS NOT NULL)::int
        FROM chosen c WHERE i.id = c.id
        RETURNING {}",
        item_columns("i.")
    )
}

#[async_trait]
impl InboxBackend for PgInbox {
    async fn enqueue(&self, item: NewInboxItem) -> Result<EnqueueOutcome, StoreError> {
        self.enqueuer.enqueue(item).await
    }

    async fn seen(&self, route: &str, delivery_id: &str, now_ms: i64) -> Result<bool, StoreError> {
        let since = now_ms - DEDUP_WINDOW_MS;
        let rows = self
            .query(
                "SELECT 1 FROM dedup WHERE route = $1 AND delivery_id = $2 AND seen_at_ms > $3",
                &[&text(route), &text(delivery_id), &since],
            )
            .await?;
        Ok(!rows.is_empty())
    }

    async fn record_delivery(
        &self,
        delivery: NewDelivery,
        mark_seen: bool,
    ) -> Result<i64, StoreError> {
        let message: String = delivery
            .message
            .chars()
            .take(MESSAGE_PREVIEW_CHARS)
            .collect();
        let d = DeliveryArgs::of(&delivery, &message);
        let mut args: Vec<&(dyn ToSql + Sync)> = d.args().to_vec();
        args.push(&mark_seen);
        let rows = self
            .query(
                "WITH key AS (
                    INSERT INTO dedup (route, delivery_id, seen_at_ms)
                    SELECT $2, $3, $10 WHERE $11
                    ON CONFLICT (route, delivery_id)
                        DO UPDATE SET seen_at_ms = GREATEST(dedup.seen_at_ms, excluded.seen_at_ms)
                )
                INSERT INTO deliveries (kind, route, delivery_id, target, status, attempts, latency_ms, error, message, created_at_ms)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id",
                &args,
            )
            .await?;
        rows.first()
            .map(|r| r.try_get(0))
            .transpose()
            .map_err(db_error)?
            .ok_or_else(|| StoreError::Database("the delivery was not recorded".into()))
    }

    async fn claim(&self, req: ClaimRequest) -> Result<Vec<InboxItem>, StoreError> {
        if req.max == 0 {
            return Ok(Vec::new());
        }
        let look = i64::try_from((req.max * 8).max(64)).unwrap_or(i64::MAX);
        let (busy_routes, busy_counts): (Vec<String>, Vec<i64>) = req
            .running_per_route
            .iter()
            .map(|(r, n)| (r.clone(), i64::try_from(*n).unwrap_or(i64::MAX)))
            .unzip();
        let per_route = i64::try_from(req.per_route_limit.max(1)).unwrap_or(i64::MAX);
        let max = i64::try_from(req.max).unwrap_or(i64::MAX);
        let rows = self
            .query(
                &claim_sql(),
                &[
                    &req.now_ms,
                    &look,
                    &busy_routes,
                    &busy_counts,
                    &per_route,
                    &max,
                    &req.lease_ms,
                    &self.instance,
                    &req.scope.chat_prefix(),
                ],
            )
            .await?;
        let mut items = rows
            .iter()
            .map(rows::item)
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_error)?;
        items.sort_by_key(|i| i.id);
        Ok(items)
    }

    async fn store_answer(
        &self,
        id: i64,
        answer: String,
        started_ms: i64,
    ) -> Result<(), StoreError> {
        self.outcome(Outcome {
            id,
            set: "answer = $8, failures = 0, failing_since_ms = NULL, last_error = NULL",
            stage: Stage::Run.as_str(),
            started_ms,
            result: "ok",
            error: None,
            extra: Some(text(&answer).into_owned()),
            delivery: None,
        })
        .await
    }

    async fn retry_later(
        &self,
        id: i64,
        stage: Stage,
        started_ms: i64,
        next_ms: i64,
        error: String,
    ) -> Result<(), StoreError> {
        // `$8` is the next attempt's time, as text (one parameter type for every outcome).
        self.outcome(Outcome {
            id,
            set: "state = CASE WHEN answer IS NULL THEN 'queued' ELSE 'delivering' END,
                  lease_until_ms = NULL, next_attempt_at_ms = $8::text::bigint,
                  failures = failures + 1, failing_since_ms = COALESCE(failing_since_ms, $5),
                  last_error = $7",
            stage: stage.as_str(),
            started_ms,
            result: "retry",
            error: Some(&error),
            extra: Some(next_ms.to_string()),
            delivery: None,
        })
        .await
    }

    async fn mark_dead(
        &self,
        id: i64,
        stage: Stage,
        started_ms: i64,
        error: String,
        delivery: Option<NewDelivery>,
    ) -> Result<(), StoreError> {
        self.outcome(Outcome {
            id,
            set: "state = 'dead', lease_until_ms = NULL, last_error = $7, failures = failures + 1",
            stage: stage.as_str(),
            started_ms,
            result: "dead",
            error: Some(&error),
            extra: None,
            delivery: delivery.as_ref(),
        })
        .await
    }

    async fn mark_delivered(
        &self,
        id: i64,
        started_ms: i64,
        delivery: NewDelivery,
    ) -> Result<(), StoreError> {
        self.outcome(Outcome {
            id,
            set: "state = 'delivered', lease_until_ms = NULL, last_error = NULL, failures = 0,
                  failing_since_ms = NULL",
            stage: Stage::Delivery.as_str(),
            started_ms,
            result: "ok",
            error: None,
            extra: None,
            delivery: Some(&delivery),
        })
        .await
    }

    async fn release(
        &self,
        id: i64,
        stage: Stage,
        started_ms: i64,
        why: String,
    ) -> Result<(), StoreError> {
        self.outcome(Outcome {
            id,
            set: "state = CASE WHEN answer IS NULL THEN 'queued' ELSE 'delivering' END,
                  lease_until_ms = NULL",
            stage: stage.as_str(),
            started_ms,
            result: "interrupted",
            error: Some(&why),
            extra: None,
            delivery: None,
        })
        .await?;
        self.notify().await
    }

    /// Only this instance's own leases: other instances' entries are theirs until
    /// their leases run out.
    async fn recover(&self) -> Result<usize, StoreError> {
        let now = now_ms();
        let rows = self
            .query(
                &format!(
                    "WITH mine AS (
                        SELECT id FROM inbox WHERE state = 'running' AND lease_owner = $1 FOR UPDATE
                    ), attempt AS (
                        INSERT INTO inbox_attempts (inbox_id, stage, started_at_ms, finished_at_ms, outcome, error)
                        SELECT i.id, CASE WHEN i.answer IS NULL THEN 'run' ELSE 'delivery' END, i.updated_at_ms, $2,
                               'interrupted', 'herald stopped during this attempt'
                        FROM inbox i JOIN mine m ON m.id = i.id
                    ), back AS (
                        UPDATE inbox SET state = {WAITING_STATE}, lease_until_ms = NULL, updated_at_ms = $2
                        WHERE id IN (SELECT id FROM mine) RETURNING id
                    )
                    SELECT count(*) FROM back"
                ),
                &[&self.instance, &now],
            )
            .await?;
        let n: i64 = rows
            .first()
            .map(|r| r.try_get(0))
            .transpose()
            .map_err(db_error)?
            .unwrap_or(0);
        Ok(usize::try_from(n).unwrap_or(0))
    }

    async fn renew_leases(&self, ids: Vec<i64>, until_ms: i64) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        self.execute(
            "UPDATE inbox SET lease_until_ms = $2
             WHERE id = ANY($1) AND state = 'running' AND lease_owner = $3",
            &[&ids, &until_ms, &self.instance],
        )
        .await
        .map(|_| ())
    }

    async fn cancel(&self, id: i64) -> Result<CancelOutcome, StoreError> {
        let rows = self
            .query(
                "WITH cur AS (
                    SELECT id, state FROM inbox WHERE id = $1 FOR UPDATE
                ), gone AS (
                    UPDATE inbox i SET state = 'cancelled', lease_until_ms = NULL,
                        next_attempt_at_ms = 0, updated_at_ms = $2
                    FROM cur WHERE i.id = cur.id AND cur.state = 'queued'
                    RETURNING i.id
                ), attempt AS (
                    INSERT INTO inbox_attempts (inbox_id, stage, started_at_ms, finished_at_ms, outcome, error)
                    SELECT id, 'run', $2, $2, 'cancelled', NULL FROM gone
                )
                SELECT cur.state, (SELECT count(*) FROM gone) FROM cur",
                &[&id, &now_ms()],
            )
            .await?;
        let Some(row) = rows.first() else {
            return Ok(CancelOutcome::NotFound);
        };
        let was: String = row.try_get(0).map_err(db_error)?;
        let done: i64 = row.try_get(1).map_err(db_error)?;
        Ok(match done {
            0 => CancelOutcome::NotQueued(was),
            _ => CancelOutcome::Cancelled,
        })
    }

    async fn replay(&self, id: i64) -> Result<ReplayOutcome, StoreError> {
        let now = now_ms();
        let rows = self
            .query(
                "WITH cur AS (
                    SELECT id, state, state = 'dead' AND answer IS NOT NULL AS resend
                    FROM inbox WHERE id = $1 FOR UPDATE
                ), again AS (
                    UPDATE inbox i SET
                        state = CASE WHEN cur.resend THEN 'delivering' ELSE 'queued' END,
                        answer = CASE WHEN cur.resend THEN i.answer ELSE NULL END,
                        next_attempt_at_ms = 0, failures = 0, failing_since_ms = NULL,
                        lease_until_ms = NULL, updated_at_ms = $2
                    FROM cur WHERE i.id = cur.id AND cur.state IN ('dead', 'delivered', 'cancelled')
                    RETURNING i.state
                ), attempt AS (
                    INSERT INTO inbox_attempts (inbox_id, stage, started_at_ms, finished_at_ms, outcome, error)
                    SELECT $1, CASE WHEN state = 'delivering' THEN 'delivery' ELSE 'run' END, $2, $2, 'replayed', NULL
                    FROM again
                )
                SELECT cur.state, (SELECT state FROM again), pg_notify('herald_inbox', '') FROM cur",
                &[&id, &now],
            )
            .await?;
        let Some(row) = rows.first() else {
            return Ok(ReplayOutcome::NotFound);
        };
        let was: String = row.try_get(0).map_err(db_error)?;
        let now_in: Option<String> = row.try_get(1).map_err(db_error)?;
        Ok(match now_in {
            Some(state) => ReplayOutcome::Queued(state),
            None => ReplayOutcome::NotFinished(was),
        })
    }

    async fn purge(
        &self,
        state: String,
        before_ms: i64,
        limit: usize,
    ) -> Result<usize, StoreError> {
        // Every accepted event's key is a `dedup` row: purging entries keeps them.
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .query(
                "WITH chosen AS (
                    SELECT id FROM inbox WHERE state = $1 AND updated_at_ms < $2
                    ORDER BY updated_at_ms LIMIT $3 FOR UPDATE SKIP LOCKED
                ), gone AS (
                    DELETE FROM inbox WHERE id IN (SELECT id FROM chosen) RETURNING id
                ), attempts AS (
                    DELETE FROM inbox_attempts WHERE inbox_id IN (SELECT id FROM gone)
                )
                SELECT count(*) FROM gone",
                &[&state, &before_ms, &limit],
            )
            .await?;
        count_of(&rows)
    }

    async fn purge_deliveries(
        &self,
        delivered: bool,
        before_ms: i64,
        limit: usize,
    ) -> Result<usize, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .query(
                "WITH gone AS (
                    DELETE FROM deliveries WHERE id IN (
                        SELECT id FROM deliveries
                        WHERE created_at_ms < $1 AND (status = 'delivered') = $2
                        ORDER BY created_at_ms LIMIT $3 FOR UPDATE SKIP LOCKED
                    ) RETURNING id
                )
                SELECT count(*) FROM gone",
                &[&before_ms, &delivered, &limit],
            )
            .await?;
        count_of(&rows)
    }

    async fn list(&self, query: InboxQuery) -> Result<Vec<InboxItem>, StoreError> {
        let mut sql = format!("SELECT {} FROM inbox WHERE true", item_columns(""));
        let mut args: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
        if let Some(state) = query.state {
            args.push(Box::new(state));
            sql.push_str(&format!(" AND state = ${}", args.len()));
        }
        if let Some(route) = query.route {
            args.push(Box::new(route));
            sql.push_str(&format!(" AND route = ${}", args.len()));
        }
        if let Some(since) = query.since_ms {
            args.push(Box::new(since));
            sql.push_str(&format!(" AND received_at_ms >= ${}", args.len()));
        }
        sql.push_str(" ORDER BY id DESC");
        if let Some(limit) = query.limit {
            sql.push_str(&format!(" LIMIT {limit}"));
        }
        let refs: Vec<&(dyn ToSql + Sync)> = args.iter().map(|a| &**a as _).collect();
        let rows = self.query(&sql, &refs).await?;
        rows.iter()
            .map(rows::item)
            .collect::<Result<_, _>>()
            .map_err(db_error)
    }

    async fn events(&self, q: EventQuery) -> Result<Vec<EventSummary>, StoreError> {
        let mut sql = "SELECT id, route, event_type, delivery_id, state, attempts, received_at_ms,
                              updated_at_ms, left(prompt, 200), last_error
                       FROM inbox WHERE true"
            .to_owned();
        let mut args: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
        if let Some(search) = q.search.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
            args.push(Box::new(herald_store::events::like_pattern(search)));
            let n = args.len();
            // Scanned, so bounded: the newest entries only.
            sql.push_str(&format!(
                " AND (delivery_id ILIKE ${n} OR event_type ILIKE ${n} OR prompt ILIKE ${n})
                  AND id > (SELECT coalesce(max(id), 0) - {SEARCHED} FROM inbox)"
            ));
        }
        type Arg = Box<dyn ToSql + Sync + Send>;
        let text = |v: Option<String>| v.map(|v| Box::new(v) as Arg);
        let number = |v: Option<i64>| v.map(|v| Box::new(v) as Arg);
        let filters = [
            ("route =", text(q.route)),
            ("state =", text(q.state)),
            ("delivery_id =", text(q.delivery_id)),
            ("received_at_ms >=", number(q.since_ms)),
            ("received_at_ms <", number(q.until_ms)),
            ("id <", number(q.before_id)),
        ];
        for (clause, value) in filters {
            if let Some(v) = value {
                args.push(v);
                sql.push_str(&format!(" AND {clause} ${}", args.len()));
            }
        }
        let limit = q.limit.clamp(1, herald_store::events::MAX_PAGE);
        sql.push_str(&format!(" ORDER BY id DESC LIMIT {limit}"));
        let refs: Vec<&(dyn ToSql + Sync)> = args.iter().map(|a| &**a as _).collect();
        let rows = self.query(&sql, &refs).await?;
        rows.iter()
            .map(rows::summary)
            .collect::<Result<_, _>>()
            .map_err(db_error)
    }

    async fn get(&self, id: i64) -> Result<Option<InboxItem>, StoreError> {
        let sql = format!("SELECT {} FROM inbox WHERE id = $1", item_columns(""));
        let rows = self.query(&sql, &[&id]).await?;
        rows.first().map(rows::item).transpose().map_err(db_error)
    }

    async fn deliveries(&self, q: DeliveryQuery) -> Result<Vec<Delivery>, StoreError> {
        let mut sql = format!("SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE true");
        let mut args: Vec<String> = Vec::new();
        for (column, value) in [
            ("route", q.route),
            ("delivery_id", q.delivery_id),
            ("status", q.status),
        ] {
            if let Some(v) = value {
                args.push(v);
                sql.push_str(&format!(" AND {column} = ${}", args.len()));
            }
        }
        sql.push_str(" ORDER BY id DESC");
        if let Some(limit) = q.limit {
            sql.push_str(&format!(" LIMIT {limit}"));
        }
        let refs: Vec<&(dyn ToSql + Sync)> = args.iter().map(|a| a as _).collect();
        let rows = self.query(&sql, &refs).await?;
        rows.iter()
            .map(rows::delivery)
            .collect::<Result<_, _>>()
            .map_err(db_error)
    }

    async fn attempts(&self, id: i64) -> Result<Vec<Attempt>, StoreError> {
        let rows = self
            .query(
                "SELECT stage, started_at_ms, finished_at_ms, outcome, error FROM inbox_attempts
                 WHERE inbox_id = $1 ORDER BY id",
                &[&id],
            )
            .await?;
        rows.iter()
            .map(rows::attempt)
            .collect::<Result<_, _>>()
            .map_err(db_error)
    }

    async fn counts(&self) -> Result<Vec<(String, i64)>, StoreError> {
        let rows = self
            .query(
                "SELECT state, count(*) FROM inbox GROUP BY state ORDER BY state",
                &[],
            )
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect::<Result<_, tokio_postgres::Error>>()
            .map_err(db_error)
    }

    async fn gauges(&self, now_ms: i64) -> Result<InboxGauges, StoreError> {
        let rows = self
            .query(
                "SELECT (SELECT received_at_ms FROM inbox WHERE state = 'queued' ORDER BY id LIMIT 1),
                        (SELECT count(*) FROM inbox
                          WHERE state IN ('running', 'delivering') AND lease_until_ms > $1)",
                &[&now_ms],
            )
            .await?;
        let row = rows
            .first()
            .ok_or_else(|| StoreError::Database("no row of inbox gauges".into()))?;
        Ok(InboxGauges {
            oldest_queued_at_ms: row.try_get(0).map_err(db_error)?,
            leases_held: row.try_get(1).map_err(db_error)?,
        })
    }

    fn wake_on_remote_work(&self, wake: Arc<tokio::sync::Notify>) {
        crate::listen::spawn(self.target.clone(), wake);
    }

    fn location(&self) -> String {
        self.target.shown.clone()
    }

    fn shared(&self) -> bool {
        true
    }

    async fn document(&self, name: &str) -> Result<Option<(i64, String)>, StoreError> {
        let rows = self
            .query(
                "SELECT version, body FROM herald_documents WHERE name = $1",
                &[&name],
            )
            .await?;
        rows.first()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .transpose()
            .map_err(db_error)
    }

    async fn put_document(
        &self,
        name: &str,
        expected: Option<i64>,
        body: String,
    ) -> Result<bool, StoreError> {
        let body = text(&body).into_owned();
        let now = now_ms();
        let changed = match expected {
            None => {
                self.execute(
                    "INSERT INTO herald_documents (name, version, body, updated_at_ms) VALUES ($1, 1, $2, $3)
                     ON CONFLICT (name) DO NOTHING",
                    &[&name, &body, &now],
                )
                .await?
            }
            Some(version) => {
                self.execute(
                    "UPDATE herald_documents SET version = version + 1, body = $3, updated_at_ms = $4
                     WHERE name = $1 AND version = $2",
                    &[&name, &version, &body, &now],
                )
                .await?
            }
        };
        Ok(changed == 1)
    }

    async fn hold_send(&self, route: &str, delivery_id: &str) -> Result<Hold, StoreError> {
        let key = format!("{}\u{1f}{}", text(route), text(delivery_id));
        let holder = crate::holds::holder_of(&self.instance);
        let waiting = "waiting for another instance's send of this delivery id";
        let held = crate::holds::Held {
            pool: self.pool.clone(),
            table: &SEND_HOLDS,
            key,
            holder,
            deadline: self.target.deadline,
        };
        held.acquire(waiting).await?;
        let alive = held.keep(|release| {
            tokio::spawn(release);
        });
        Ok(Hold::releasing(Box::new(alive)))
    }

    async fn try_hold(&self, key: &str) -> Result<Option<Hold>, StoreError> {
        let held = crate::holds::Held {
            pool: self.pool.clone(),
            table: &SEND_HOLDS,
            key: format!("hold\u{1f}{}", text(key)),
            holder: crate::holds::holder_of(&self.instance),
            deadline: self.target.deadline,
        };
        if !held.try_acquire().await? {
            return Ok(None);
        }
        let (alive, lost) = held.keep_watched(|release| {
            tokio::spawn(release);
        });
        Ok(Some(Hold::watched(Box::new(alive), lost)))
    }
}

static SEND_HOLDS: crate::holds::HoldTable = crate::holds::HoldTable {
    table: "direct_sends",
    key: "send_key",
};

impl PgInbox {
    /// Wakes every instance's idle workers (an entry waits again).
    async fn notify(&self) -> Result<(), StoreError> {
        self.execute("SELECT pg_notify('herald_inbox', '')", &[])
            .await
            .map(|_| ())
    }
}

/// The `count(*)` of a one-row answer.
fn count_of(rows: &[tokio_postgres::Row]) -> Result<usize, StoreError> {
    let n: i64 = rows
        .first()
        .map(|r| r.try_get(0))
        .transpose()
        .map_err(db_error)?
        .unwrap_or(0);
    Ok(usize::try_from(n).unwrap_or(0))
}

/// Newest entries a dashboard search scans on PostgreSQL (no full-text index there).
const SEARCHED: i64 = 200_000;
