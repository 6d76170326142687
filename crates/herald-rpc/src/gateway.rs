//! The dispatcher's state: the live sessions of this process (a short hex id each,
//! backed by a stored session), bound to the client whose events they go to.

use crate::errors::RpcError;
use crate::outbox::{Out, Outbox};
use herald_session::{Host, RunHandle, Session, now_secs};
use serde_json::{Map, Value};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Live sessions at most (4090 beyond).
pub const MAX_LIVE_SESSIONS: usize = 64;

/// A session live in this process.
pub struct Live {
    /// The live id (8 hex characters).
    pub id: String,
    session: Mutex<Session>,
    sink: Mutex<Outbox>,
    pub started_at: f64,
    run: Mutex<Option<RunHandle>>,
    /// Prompts sent while a turn ran, run in order after it.
    queued: Mutex<VecDeque<String>>,
    /// Image paths for the next prompt (`image.attach`).
    attached: Mutex<Vec<String>>,
    pub close_on_disconnect: bool,
}

impl Live {
    pub fn session(&self) -> Session {
        lock(&self.session).clone()
    }

    pub fn set_session(&self, session: Session) {
        *lock(&self.session) = session;
    }

    pub fn sink(&self) -> Outbox {
        lock(&self.sink).clone()
    }

    pub fn bind(&self, outbox: Outbox) {
        *lock(&self.sink) = outbox;
    }

    /// Sends an event of this session to the client it is bound to.
    pub async fn emit(&self, out: Out) {
        let sink = self.sink();
        let _ = sink.send(out).await;
    }

    /// The run in progress (or the last one).
    pub fn run(&self) -> Option<RunHandle> {
        lock(&self.run).clone()
    }

    pub fn set_run(&self, run: RunHandle) {
        *lock(&self.run) = Some(run);
    }

    /// A turn runs now.
    pub fn busy(&self) -> bool {
        self.session().running().is_some()
    }

    pub fn queue(&self, text: String) -> usize {
        let mut q = lock(&self.queued);
        q.push_back(text);
        q.len()
    }

    pub fn next_queued(&self) -> Option<String> {
        lock(&self.queued).pop_front()
    }

    /// Adds an image for the next prompt; how many wait now.
    pub fn attach(&self, path: String) -> usize {
        let mut a = lock(&self.attached);
        a.push(path);
        a.len()
    }

    /// `text` with the attached images named ahead of it (they are used up).
    pub fn with_attachments(&self, text: String) -> String {
        let paths = std::mem::take(&mut *lock(&self.attached));
        if paths.is_empty() {
            return text;
        }
        let lines: Vec<String> = paths
            .iter()
            .map(|p| format!("[Attached image: {p} (look at it with vision_analyze)]"))
            .collect();
        format!("{}\n\n{text}", lines.join("\n"))
    }
}

/// A poisoned lock still holds usable state here (plain values, no invariants).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The JSON-RPC gateway over one session host.
pub struct Gateway {
    pub host: Arc<Host>,
    live: Mutex<HashMap<String, Arc<Live>>>,
    next_conn: AtomicU64,
    /// The tools a session is offered.
    pub tool_names: Vec<String>,
}

impl Gateway {
    pub fn new(host: Arc<Host>, tool_names: Vec<String>) -> Arc<Gateway> {
        let gw = Arc::new(Gateway {
            host,
            live: Mutex::new(HashMap::new()),
            next_conn: AtomicU64::new(1),
            tool_names,
        });
        gw.watch_jobs();
        gw
    }

    /// A new client's outbox and the receiving end its writer drains.
    pub fn connect(&self) -> (Outbox, tokio::sync::mpsc::Receiver<Out>) {
        Outbox::new(self.next_conn.fetch_add(1, Ordering::Relaxed))
    }

    /// Makes `session` live, bound to `outbox`; 4090 at the cap.
    pub fn add_live(
        &self,
        session: Session,
        outbox: Outbox,
        close_on_disconnect: bool,
    ) -> Result<Arc<Live>, RpcError> {
        let mut live = lock(&self.live);
        if live.len() >= MAX_LIVE_SESSIONS {
            return Err(RpcError::new(
                RpcError::LIVE_CAP,
                format!("too many live sessions (max {MAX_LIVE_SESSIONS}); close one first"),
            ));
        }
        let id = loop {
            let id: String = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
            if !live.contains_key(&id) {
                break id;
            }
        };
        let entry = Arc::new(Live {
            id: id.clone(),
            session: Mutex::new(session),
            sink: Mutex::new(outbox),
            started_at: now_secs(),
            run: Mutex::new(None),
            queued: Mutex::new(VecDeque::new()),
            attached: Mutex::new(Vec::new()),
            close_on_disconnect,
        });
        live.insert(id, entry.clone());
        Ok(entry)
    }

    /// The live session `params.session_id` names; 4001 otherwise.
    pub fn live(&self, params: &Map<String, Value>) -> Result<Arc<Live>, RpcError> {
        let id = params
            .get("session_id")
            .and_then(Value::as_str)
            .ok_or_else(RpcError::no_session)?;
        lock(&self.live)
            .get(id)
            .cloned()
            .ok_or_else(RpcError::no_session)
    }

    pub fn live_sessions(&self) -> Vec<Arc<Live>> {
        let mut all: Vec<Arc<Live>> = lock(&self.live).values().cloned().collect();
        all.sort_by(|a, b| a.started_at.total_cmp(&b.started_at));
        all
    }

    /// Drops a live session (its turn interrupted); false when it was not live.
    pub fn close(&self, id: &str) -> bool {
        let removed = lock(&self.live).remove(id);
        if let Some(live) = &removed
            && let Some(run) = live.run()
        {
            run.interrupt();
        }
        removed.is_some()
    }

    /// Whether a stored session is live here.
    pub fn is_live_stored(&self, stored: &str) -> bool {
        lock(&self.live)
            .values()
            .any(|l| l.session().id() == stored)
    }

    /// Tells a live session when a background process its turn started ends
    /// (`status.update`, kind `process`).
    fn watch_jobs(self: &Arc<Self>) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut notices = self.host.runtime().jobs.subscribe();
        let gw = Arc::downgrade(self);
        rt.spawn(async move {
            use tokio::sync::broadcast::error::RecvError;
            loop {
                let notice = match notices.recv().await {
                    Ok(n) => n,
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => break,
                };
                let Some(gw) = gw.upgrade() else { break };
                let owner = lock(&gw.live)
                    .values()
                    .find(|l| l.session().id() == notice.session_id)
                    .cloned();
                if let Some(live) = owner {
                    let payload = serde_json::json!({"kind": "process", "text": notice.describe()});
                    let frame = crate::frame::event("status.update", Some(&live.id), Some(payload));
                    live.emit(Out::Frame(frame)).await;
                }
            }
        });
    }

    /// A client went away: its sessions opened with `close_on_disconnect` close.
    pub fn disconnected(&self, conn: u64) {
        let gone: Vec<String> = lock(&self.live)
            .values()
            .filter(|l| l.close_on_disconnect && l.sink().conn == conn)
            .map(|l| l.id.clone())
            .collect();
        for id in gone {
            self.close(&id);
        }
    }
}
