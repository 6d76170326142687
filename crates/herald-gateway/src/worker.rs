//! The inbox workers: claim queued events under a lease, run the agent on each (its own
//! session, the webhook toolsets, the route's skill, no human to ask), store the answer,
//! and deliver it to the route's target, retrying transient failures durably.
//!
//! One dispatcher task claims entries when there is room (global and per-route limits)
//! and spawns one task per entry. The HTTP side only wakes it (`Notify`); it never waits
//! for it, so a long queue does not slow the ingress.

use crate::pipeline::Gateway;
use crate::session_keeper::{KeptRun, SessionKeeper};
use herald_agent::{
    Agent, AgentConfig, AgentEvent, AgentHandle, Approvals, Plugins, ToolRegistry, skills, toolsets,
};
use herald_deliver::OutgoingMessage;
use herald_llm::{Endpoint, LlmClient, RetryConfig};
use herald_protocol::ChatMessage;
use herald_store::{ClaimRequest, InboxItem, NewDelivery, Stage, now_ms};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// How long a claim holds an entry before another worker may take it; renewed while
/// the entry is worked on.
const LEASE: Duration = Duration::from_secs(300);
/// How often the queue is looked at when nothing woke the dispatcher (retry timers,
/// replays from the CLI).
const POLL: Duration = Duration::from_millis(250);
/// How long interrupted runs get to give their entries back after the grace period.
const INTERRUPT_WAIT: Duration = Duration::from_secs(2);

/// Retry back-off for failing runs and deliveries (spec §14.5).
#[derive(Debug, Clone, PartialEq)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
    /// How long a failing stage is retried before the entry is dead.
    pub retry_for: Duration,
}

impl Backoff {
    /// The wait before the next attempt after `failures` failures in a row (≥ 1):
    /// `initial` doubling, capped at `max`, with up to 10% jitter.
    pub fn wait(&self, failures: u32) -> Duration {
        let exp = failures.saturating_sub(1).min(20);
        let base = self
            .initial
            .saturating_mul(1u32 << exp)
            .min(self.max.max(self.initial));
        let jitter = base.mul_f64(rand::random::<f64>() * 0.1);
        base + jitter
    }
}

/// The worker pool's limits.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerSettings {
    pub max_runs: usize,
    pub max_runs_per_route: usize,
    pub backoff: Backoff,
    pub shutdown_grace: Duration,
}

impl WorkerSettings {
    pub fn from_config(w: &herald_config::WorkerSettings) -> Self {
        WorkerSettings {
            max_runs: w.max_runs.max(1),
            max_runs_per_route: w.max_runs_per_route.max(1),
            backoff: Backoff {
                initial: Duration::from_secs(w.retry_initial_secs.max(1)),
                max: Duration::from_secs(w.retry_max_secs.max(1)),
                retry_for: Duration::from_secs(w.retry_for_secs),
            },
            shutdown_grace: Duration::from_secs(w.shutdown_grace_secs),
        }
    }
}

/// Everything a webhook-started agent run needs besides its event.
pub struct RunTemplate {
    pub endpoint: Endpoint,
    pub retry: RetryConfig,
    /// Every tool a webhook run may be given; each run selects its toolsets from it.
    pub registry: ToolRegistry,
    /// `platform_toolsets.webhook`.
    pub platform_toolsets: Option<Vec<String>>,
    pub max_iterations: u32,
    pub cwd: PathBuf,
    pub skills_root: PathBuf,
    pub system_prompt: String,
    pub provider: String,
    /// Where sessions are kept (`state.db`); `None` keeps none.
    pub state_db: Option<PathBuf>,
}

/// What one agent run came to.
enum RunOutcome {
    Answer(String),
    Retry(String),
    Dead(String),
    Interrupted,
}

/// Builds the run template of a named profile (`<home>/profiles/<name>`: its config,
/// model, skills); `None` when the profile has no usable model.
pub type ProfileTemplates = Box<dyn Fn(&str) -> Option<RunTemplate> + Send + Sync>;

struct Shared {
    gateway: Arc<Gateway>,
    template: Arc<RunTemplate>,
    profiles: Option<ProfileTemplates>,
    /// Profile templates built so far (`None`: the profile falls back to the default).
    profile_cache: Mutex<HashMap<String, Option<Arc<RunTemplate>>>>,
    client: LlmClient,
    settings: WorkerSettings,
    /// Agents running now, by inbox id (interrupted after the grace period).
    handles: Mutex<HashMap<i64, AgentHandle>>,
    sessions: Option<SessionKeeper>,
}

/// The running worker pool.
pub struct Workers {
    stop: watch::Sender<bool>,
    done: tokio::task::JoinHandle<()>,
    /// Joined after the dispatcher ends, so the last sessions are written.
    keeper_thread: Option<std::thread::JoinHandle<()>>,
}

impl Workers {
    /// Returns entries a crash left `running` to the queue, then starts dispatching.
    pub async fn start(
        gateway: Arc<Gateway>,
        template: RunTemplate,
        profiles: Option<ProfileTemplates>,
        settings: WorkerSettings,
    ) -> Result<Workers, herald_store::StoreError> {
        let recovered = gateway.store.recover().await?;
        if recovered > 0 {
            tracing::warn!(
                entries = recovered,
                "entries left running by an earlier stop are queued again"
            );
        }
        let (sessions, keeper_thread) = match &template.state_db {
            Some(path) => match SessionKeeper::start(path) {
                Ok((keeper, thread)) => (Some(keeper), Some(thread)),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "cannot open the session store; webhook runs are not kept as sessions");
                    (None, None)
                }
            },
            None => (None, None),
        };
        let shared = Arc::new(Shared {
            gateway,
            template: Arc::new(template),
            profiles,
            profile_cache: Mutex::new(HashMap::new()),
            client: LlmClient::new(),
            settings,
            handles: Mutex::new(HashMap::new()),
            sessions,
        });
        let (stop, stopped) = watch::channel(false);
        let done = tokio::spawn(dispatch(shared, stopped));
        Ok(Workers {
            stop,
            done,
            keeper_thread,
        })
    }

    /// Stops claiming, lets running work finish for the grace period, interrupts what
    /// is left (its entries go back to the queue) and returns.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.done.await;
        if let Some(thread) = self.keeper_thread {
            let joined = tokio::task::spawn_blocking(move || thread.join());
            if tokio::time::timeout(Duration::from_secs(10), joined)
                .await
                .is_err()
            {
                tracing::warn!("the session keeper did not finish in time");
            }
        }
    }
}

async fn dispatch(shared: Arc<Shared>, mut stopped: watch::Receiver<bool>) {
    let notify = shared.gateway.work_notify.clone();
    let mut tasks: JoinSet<i64> = JoinSet::new();
    // inbox id -> route and stage, for the entries being worked on.
    let mut running: HashMap<i64, (String, Stage)> = HashMap::new();
    // task id -> inbox id, to know which entry a panicked task was working on.
    let mut task_entries: HashMap<tokio::task::Id, i64> = HashMap::new();
    let mut renew = tokio::time::interval(LEASE / 3);
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
                lease_ms: LEASE.as_millis() as i64,
                max: free,
                running_per_route: per_route,
                per_route_limit: shared.settings.max_runs_per_route,
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
                        let task = tasks.spawn(async move {
                            process(&shared, item).await;
                            id
                        });
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
                let until = now_ms() + LEASE.as_millis() as i64;
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
    let grace = shared.settings.shutdown_grace;
    if !tasks.is_empty() {
        tracing::info!(
            running = tasks.len(),
            grace_s = grace.as_secs(),
            "waiting for running webhook work to finish"
        );
    }
    if !drain(&mut tasks, &mut running, grace).await {
        let handles: Vec<AgentHandle> = shared
            .handles
            .lock()
            .map(|h| h.values().cloned().collect())
            .unwrap_or_default();
        tracing::warn!(
            running = tasks.len(),
            "grace period over: interrupting the remaining runs; their events stay queued"
        );
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

/// Works one claimed entry: runs the agent unless an answer is stored, then delivers.
async fn process(shared: &Arc<Shared>, item: InboxItem) {
    let store = &shared.gateway.store;
    let started = now_ms();
    let claimed_stage = Stage::of(&item);
    let answer = match item.answer.clone() {
        Some(answer) => answer,
        None => match run_agent(shared, &item).await {
            RunOutcome::Answer(answer) => {
                if let Err(e) = store.store_answer(item.id, answer.clone(), started).await {
                    // Not stored: the entry keeps its lease and is run again later.
                    tracing::error!(inbox_id = item.id, error = %e, "cannot store the answer");
                    return;
                }
                answer
            }
            RunOutcome::Retry(error) => {
                fail_later(shared, &item, Stage::Run, started, error, None).await;
                return;
            }
            RunOutcome::Dead(error) => {
                tracing::warn!(inbox_id = item.id, route = %item.route, delivery_id = %item.delivery_id, error = %error, "agent run failed permanently; entry is dead");
                log_store_error(
                    item.id,
                    store
                        .mark_dead(item.id, Stage::Run, started, error, None)
                        .await,
                );
                return;
            }
            RunOutcome::Interrupted => {
                log_store_error(
                    item.id,
                    store
                        .release(
                            item.id,
                            Stage::Run,
                            started,
                            "interrupted at shutdown".into(),
                        )
                        .await,
                );
                return;
            }
        },
    };
    // A delivery right after a fresh answer starts its own retry window.
    let delivery_started = now_ms();
    let fresh = claimed_stage == Stage::Run;
    deliver(shared, &item, answer, delivery_started, fresh).await;
}

async fn deliver(shared: &Shared, item: &InboxItem, answer: String, started: i64, fresh: bool) {
    let store = &shared.gateway.store;
    let record = |status: &str, attempts: i64, error: Option<String>, text: &str| NewDelivery {
        kind: "agent".into(),
        route: item.route.clone(),
        delivery_id: item.delivery_id.clone(),
        target: item.deliver.clone(),
        status: status.into(),
        attempts: attempts.max(1) as u32,
        latency_ms: (now_ms() - item.received_at_ms).max(0) as u64,
        error,
        message: text.to_owned(),
        created_at_ms: now_ms(),
    };
    let attempts = if fresh { 1 } else { item.delivery_attempts };
    let target = match shared.gateway.targets.get(&item.deliver) {
        Ok(t) => t,
        Err(why) => {
            tracing::warn!(inbox_id = item.id, route = %item.route, target = %item.deliver, error = %why, "answer cannot be delivered; entry is dead");
            let rec = record("failed", attempts, Some(why.clone()), &answer);
            log_store_error(
                item.id,
                store
                    .mark_dead(item.id, Stage::Delivery, started, why, Some(rec))
                    .await,
            );
            return;
        }
    };
    let extra: Map<String, Value> = match &item.deliver_extra {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    let message = OutgoingMessage::new(answer.clone(), extra);
    match target.send(&message).await {
        Ok(_) => {
            tracing::info!(inbox_id = item.id, route = %item.route, delivery_id = %item.delivery_id, target = %item.deliver, "answer delivered");
            let rec = record("delivered", attempts, None, &answer);
            log_store_error(item.id, store.mark_delivered(item.id, started, rec).await);
        }
        Err(e) if e.retryable => {
            let item = if fresh {
                // The claimed row's failure counters were the run's.
                InboxItem {
                    failures: 0,
                    failing_since_ms: None,
                    delivery_attempts: 1,
                    ..item.clone()
                }
            } else {
                item.clone()
            };
            fail_later(
                shared,
                &item,
                Stage::Delivery,
                started,
                e.message,
                e.retry_after,
            )
            .await;
        }
        Err(e) => {
            tracing::warn!(inbox_id = item.id, route = %item.route, target = %item.deliver, error = %e, "target refused the answer; entry is dead");
            let rec = record("failed", attempts, Some(e.message.clone()), &answer);
            log_store_error(
                item.id,
                store
                    .mark_dead(item.id, Stage::Delivery, started, e.message, Some(rec))
                    .await,
            );
        }
    }
}

/// A transient failure: wait and try again, or give up once the stage has failed for
/// longer than the retry window.
async fn fail_later(
    shared: &Shared,
    item: &InboxItem,
    stage: Stage,
    started: i64,
    error: String,
    retry_after: Option<Duration>,
) {
    let store = &shared.gateway.store;
    let backoff = &shared.settings.backoff;
    let since = item.failing_since_ms.unwrap_or(started);
    let failures = item.failures.max(0) as u32 + 1;
    let now = now_ms();
    if now - since >= backoff.retry_for.as_millis() as i64 {
        let error = format!(
            "gave up after {failures} failed {} attempts over {} s: {error}",
            stage.as_str(),
            (now - since) / 1000
        );
        tracing::warn!(inbox_id = item.id, route = %item.route, error = %error, "retries used up; entry is dead");
        let delivery = (stage == Stage::Delivery).then(|| NewDelivery {
            kind: "agent".into(),
            route: item.route.clone(),
            delivery_id: item.delivery_id.clone(),
            target: item.deliver.clone(),
            status: "failed".into(),
            attempts: item.delivery_attempts.max(1) as u32,
            latency_ms: (now - item.received_at_ms).max(0) as u64,
            error: Some(error.clone()),
            message: item.answer.clone().unwrap_or_default(),
            created_at_ms: now,
        });
        log_store_error(
            item.id,
            store
                .mark_dead(item.id, stage, started, error, delivery)
                .await,
        );
        return;
    }
    let wait = backoff.wait(failures).max(retry_after.unwrap_or_default());
    tracing::info!(inbox_id = item.id, route = %item.route, stage = stage.as_str(), attempt = failures, wait_ms = wait.as_millis() as u64, error = %error, "transient failure; will retry");
    log_store_error(
        item.id,
        store
            .retry_later(
                item.id,
                stage,
                started,
                now + wait.as_millis() as i64,
                error,
            )
            .await,
    );
}

fn log_store_error(id: i64, r: Result<(), herald_store::StoreError>) {
    if let Err(e) = r {
        // The lease runs out and the entry is worked again: at-least-once.
        tracing::error!(inbox_id = id, error = %e, "cannot record the outcome; the entry will be worked again");
    }
}

fn string_list(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The template for an event's profile: the default one, or the named profile's (built
/// once; a profile without a usable model runs with the default, warned once).
fn template_for(shared: &Shared, profile: Option<&str>) -> Arc<RunTemplate> {
    let (Some(name), Some(make)) = (profile.filter(|p| *p != "default"), &shared.profiles) else {
        return shared.template.clone();
    };
    let Ok(mut cache) = shared.profile_cache.lock() else {
        return shared.template.clone();
    };
    let built = cache.entry(name.to_owned()).or_insert_with(|| {
        let t = make(name).map(Arc::new);
        if t.is_none() {
            tracing::warn!(
                profile = name,
                "profile has no usable model; its webhook runs use the default profile's"
            );
        }
        t
    });
    built.clone().unwrap_or_else(|| shared.template.clone())
}

async fn run_agent(shared: &Arc<Shared>, item: &InboxItem) -> RunOutcome {
    let template = template_for(shared, item.profile.as_deref());
    let t = &*template;
    let session = format!("webhook:{}:{}", item.route, item.delivery_id);
    let route_toolsets = item.toolsets.as_ref().map(string_list);
    let (tool_names, dropped) =
        toolsets::webhook_tools(route_toolsets.as_deref(), t.platform_toolsets.as_deref());
    if !dropped.is_empty() {
        tracing::warn!(route = %item.route, dropped = ?dropped, "toolsets not allowed on webhook runs were dropped");
    }
    let tools = t.registry.select(&tool_names);
    let skill_names = string_list(&item.skills);
    let (message, skill, missing) = if skill_names.is_empty() {
        (item.prompt.clone(), None, Vec::new())
    } else {
        skills::invocation_message(&t.skills_root, &skill_names, &item.prompt, &session)
    };
    for m in missing {
        tracing::warn!(route = %item.route, skill = %m, "route skill not installed; skipped");
    }
    let agent = Agent::with_client(
        AgentConfig {
            endpoint: t.endpoint.clone(),
            retry: t.retry.clone(),
            tools,
            max_iterations: t.max_iterations,
            cwd: t.cwd.clone(),
            approvals: Arc::new(Approvals::unattended()),
            system_prompt: t.system_prompt.clone(),
            plugins: Plugins::default(),
            session_id: session.clone(),
            platform: "webhook".into(),
            provider: t.provider.clone(),
            clarifier: None,
        },
        shared.client.clone(),
    );
    if let Ok(mut h) = shared.handles.lock() {
        h.insert(item.id, agent.handle());
    }
    tracing::info!(inbox_id = item.id, route = %item.route, delivery_id = %item.delivery_id, session = %session, skill = ?skill, tools = ?tool_names, "agent run started");
    let mut appended: Vec<ChatMessage> = Vec::new();
    let result = agent
        .run_turn(&[], &message, &mut |event| {
            if let AgentEvent::MessageAppended(m) = event {
                appended.push(m);
            }
        })
        .await;
    if let Ok(mut h) = shared.handles.lock() {
        h.remove(&item.id);
    }
    if let Some(keeper) = &shared.sessions {
        keeper.keep(KeptRun {
            session,
            model: t.endpoint.model.clone(),
            system_prompt: t.system_prompt.clone(),
            cwd: t.cwd.display().to_string(),
            messages: appended,
        });
    }
    if result.interrupted {
        return RunOutcome::Interrupted;
    }
    let answer = result.final_response.trim();
    if !result.failed && !answer.is_empty() {
        return RunOutcome::Answer(result.final_response.clone());
    }
    let error = result
        .error
        .clone()
        .unwrap_or_else(|| "the run ended without an answer".into());
    if result.failed && result.error_retryable {
        RunOutcome::Retry(error)
    } else {
        RunOutcome::Dead(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_initial_and_is_capped() {
        let b = Backoff {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(15),
            retry_for: Duration::from_secs(600),
        };
        for (failures, base) in [(1, 1), (2, 2), (3, 4), (4, 8), (5, 15), (40, 15)] {
            let w = b.wait(failures);
            let base = Duration::from_secs(base);
            assert!(w >= base && w <= base.mul_f64(1.1), "{failures}: {w:?}");
        }
        // 10 minutes of retries at the cap is dozens of attempts: a 22 s outage
        // is absorbed.
        let mut total = Duration::ZERO;
        let mut n = 0;
        while total < Duration::from_secs(22) {
            n += 1;
            total += b.wait(n);
        }
        assert!(total < b.retry_for && n < 10);
    }
}
