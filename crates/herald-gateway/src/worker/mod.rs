//! The inbox workers: claim queued events under a lease, run the agent on each (its own
//! session, the webhook toolsets, the route's skill, no human to ask), store the answer,
//! and deliver it to the route's target, retrying transient failures durably.
//!
//! One dispatcher task claims entries when there is room (global and per-route limits)
//! and spawns one task per entry. The HTTP side only wakes it (`Notify`); it never waits
//! for it, so a long queue does not slow the ingress.

mod agent_run;
mod backoff;
mod delivery;

pub use agent_run::{ProfileTemplates, RunTemplate};
pub use backoff::Backoff;

use crate::pipeline::Gateway;
use delivery::{log_store_error, process};
use herald_config::WorkerSettings;
use herald_session::RunHandle;
use herald_store::{ClaimRequest, ClaimScope, InboxItem, Stage, now_ms};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::Instrument;

/// How often the queue is looked at when nothing woke the dispatcher (retry timers,
/// replays from the CLI).
const POLL: Duration = Duration::from_millis(250);
/// How long interrupted runs get to give their entries back after the grace period.
const INTERRUPT_WAIT: Duration = Duration::from_secs(2);

struct Shared {
    gateway: Arc<Gateway>,
    template: Arc<RunTemplate>,
    profiles: Option<ProfileTemplates>,
    /// Profile templates built so far (`None`: the profile falls back to the default).
    profile_cache: tokio::sync::Mutex<HashMap<String, Option<Arc<RunTemplate>>>>,
    /// The limits as configured (the config reader checked their ranges).
    settings: WorkerSettings,
    backoff: Backoff,
    /// Runs going now, by inbox id (interrupted after the grace period).
    handles: Mutex<HashMap<i64, RunHandle>>,
    /// Set when the shutdown interrupts the runs left: their entries wait for the next
    /// start. A run cancelled before that was stopped by an operator (the dashboard).
    interrupting: std::sync::atomic::AtomicBool,
    /// How long a claim holds an entry before another worker (of another instance, on
    /// a shared store) may take it over; renewed every third of it while the entry is
    /// worked on, so only a lost instance's leases run out (`store.lease_seconds`).
    lease: Duration,
}

/// The running worker pool.
pub struct Workers {
    stop: watch::Sender<bool>,
    done: tokio::task::JoinHandle<()>,
}

impl Workers {
    /// Returns entries a crash left `running` to the queue, then starts dispatching.
    pub async fn start(
        gateway: Arc<Gateway>,
        template: RunTemplate,
        profiles: Option<ProfileTemplates>,
        settings: &WorkerSettings,
        lease: Duration,
    ) -> Result<Workers, herald_store::StoreError> {
        let recovered = gateway.store.recover().await?;
        if recovered > 0 {
            tracing::warn!(
                entries = recovered,
                "entries left running by an earlier stop are queued again"
            );
        }
        match template.host.recover().await {
            Ok(0) => {}
            Ok(n) => tracing::warn!(runs = n, "runs an earlier stop cut off are marked failed"),
            Err(e) => tracing::warn!(error = %e, "cannot mark the runs an earlier stop cut off"),
        }
        let shared = Arc::new(Shared {
            gateway,
            template: Arc::new(template),
            profiles,
            profile_cache: tokio::sync::Mutex::new(HashMap::new()),
            settings: settings.clone(),
            backoff: Backoff::from_settings(settings),
            handles: Mutex::new(HashMap::new()),
            interrupting: std::sync::atomic::AtomicBool::new(false),
            lease,
        });
        let (stop, stopped) = watch::channel(false);
        let done = tokio::spawn(dispatch(shared, stopped));
        Ok(Workers { stop, done })
    }

    /// Stops claiming, lets running work finish for the grace period, interrupts what
    /// is left (its entries go back to the queue) and returns.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.done.await;
    }
}

async fn dispatch(shared: Arc<Shared>, mut stopped: watch::Receiver<bool>) {
    let notify = shared.gateway.work_notify.clone();
    let mut tasks: JoinSet<i64> = JoinSet::new();
    // inbox id -> route and stage, for the entries being worked on.
    let mut running: HashMap<i64, (String, Stage)> = HashMap::new();
    // task id -> inbox id, to know which entry a panicked task was working on.
    let mut task_entries: HashMap<tokio::task::Id, i64> = HashMap::new();
    let lease = shared.lease;
    let mut renew = tokio::time::interval(lease / 3);
    renew.tick().await;
    loop {
        let free = shared.settings.max_runs.saturating_sub(running.len());
        let mut claimed_all = false;
        if free > 0 {
            let mut per_route: HashMap<String, usize> = HashMap::new();
            for (route, _) in running.values() {
                *per_route.entry(route.clone()).or_insert(0) += 1;
            }
            let req = ClaimRequest {
                now_ms: now_ms(),
                lease_ms: lease.as_millis() as i64,
                max: free,
                running_per_route: per_route,
                per_route_limit: shared.settings.max_runs_per_route,
                scope: ClaimScope::Webhooks,
            };
            match shared.gateway.store.claim(req).await {
                Ok(items) => {
                    claimed_all = items.len() == free;
                    for item in items {
                        // An entry of ours whose lease ran out is already being worked.
                        if running.contains_key(&item.id) {
                            continue;
                        }
                        running.insert(item.id, (item.route.clone(), Stage::of(&item)));
                        let id = item.id;
                        let shared = shared.clone();
                        let span = work_span(&item);
                        let task = tasks.spawn(
                            async move {
                                process(&shared, item).await;
                                id
                            }
                            .instrument(span),
                        );
                        task_entries.insert(task.id(), id);
                    }
                }
                Err(e) => tracing::error!(error = %e, "cannot claim inbox entries"),
            }
        }
        tokio::select! {
            biased;
            _ = stopped.changed() => break,
            _ = renew.tick() => {
                let ids: Vec<i64> = running.keys().copied().collect();
                let until = now_ms() + lease.as_millis() as i64;
                if let Err(e) = shared.gateway.store.renew_leases(ids, until).await {
                    tracing::warn!(error = %e, "cannot renew inbox leases");
                }
            }
            Some(done) = tasks.join_next_with_id() => {
                let task = match &done {
                    Ok((task, _)) => *task,
                    Err(e) => e.id(),
                };
                if let Some(id) = task_entries.remove(&task) {
                    running.remove(&id);
                    if let Err(e) = done {
                        // The entry stays leased and is worked again when the lease ends.
                        tracing::error!(inbox_id = id, error = %e, "worker task failed");
                        if let Ok(mut h) = shared.handles.lock() {
                            h.remove(&id);
                        }
                    }
                }
            }
            _ = notify.notified(), if !claimed_all => {}
            _ = tokio::time::sleep(POLL), if !claimed_all => {}
        }
    }
    // Shutdown: no new claims; running work gets the grace period.
    let grace = Duration::from_secs(shared.settings.shutdown_grace_secs);
    if !tasks.is_empty() {
        tracing::info!(
            running = tasks.len(),
            grace_s = grace.as_secs(),
            "waiting for running webhook work to finish"
        );
    }
    if !drain(&mut tasks, &mut running, grace).await {
        let handles: Vec<RunHandle> = shared
            .handles
            .lock()
            .map(|h| h.values().cloned().collect())
            .unwrap_or_default();
        tracing::warn!(
            running = tasks.len(),
            "grace period over: interrupting the remaining runs; their events stay queued"
        );
        shared
            .interrupting
            .store(true, std::sync::atomic::Ordering::SeqCst);
        for h in handles {
            h.interrupt();
        }
        if !drain(&mut tasks, &mut running, INTERRUPT_WAIT).await {
            tasks.abort_all();
            while tasks.join_next().await.is_some() {}
        }
        // Entries whose work was cut off wait again for the next start.
        let now = now_ms();
        for (id, (_, stage)) in &running {
            let release = shared
                .gateway
                .store
                .release(*id, *stage, now, "stopped at shutdown".into())
                .await;
            log_store_error(*id, release);
        }
    }
}

/// Waits up to `limit` for the tasks to end; true when all did.
async fn drain(
    tasks: &mut JoinSet<i64>,
    running: &mut HashMap<i64, (String, Stage)>,
    limit: Duration,
) -> bool {
    let all = async {
        while let Some(done) = tasks.join_next().await {
            if let Ok(id) = done {
                running.remove(&id);
            }
        }
    };
    tokio::time::timeout(limit, all).await.is_ok()
}

/// The span of one claimed entry's work, continuing the trace its request started
/// (kept with the entry as the `traceparent` of its headers, across restarts).
fn work_span(item: &InboxItem) -> tracing::Span {
    let span = herald_trace::span!(
        "inbox.work",
        inbox_id = item.id,
        route = %item.route,
        delivery_id = %item.delivery_id,
        stage = Stage::of(item).as_str(),
    );
    let header = |name: &str| item.headers.get(name).and_then(|v| v.as_str());
    herald_trace::continue_from(&span, header("traceparent"), header("tracestate"));
    span
}
