//! The plugin host process (middleware.md B2): the embedded program run by
//! `plugins.python`, spoken to in line-delimited JSON-RPC. Requests are matched by id;
//! the host's `middleware.next` is served from the frames herald has open; a host that
//! dies is noticed at once, every call waiting on it fails (fail-open upstream), and a
//! new one is started with back-off.

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use herald_jsonrpc::envelope::{self, ErrorObject, Incoming, Malformed};
use herald_jsonrpc::{Line, LineCodec};
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::codec::FramedRead;

/// The protocol spoken.
pub const PROTOCOL: &str = "herald-plugin/1";
/// The biggest message either side sends.
pub const MAX_MESSAGE: usize = 64 * 1024 * 1024;
const PING_WITHIN: Duration = Duration::from_secs(5);
/// Restarts of a dead host: 1 s doubling up to 60 s (no jitter: one host per process).
const RESTARTS: herald_retry::Backoff = herald_retry::Backoff {
    initial: Duration::from_secs(1),
    cap: Duration::from_secs(60),
    jitter: 0.0,
};

/// How the host is run.
#[derive(Debug, Clone)]
pub struct HostSettings {
    pub python: String,
    /// Where the embedded program was written.
    pub script: PathBuf,
    pub hermes_home: PathBuf,
    pub callback_timeout: Duration,
    pub startup_timeout: Duration,
    /// `initialize`'s `plugins`: the enabled ones, in load order.
    pub plugins: Vec<Value>,
}

/// Why a call to the host did not give a value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    /// The callback raised (`downstream_ref`: it re-raised herald's own error).
    #[error("raised {kind}: {message}")]
    Raised {
        kind: String,
        message: String,
        downstream_ref: Option<String>,
    },
    /// The callback blocked on purpose (`LLMExecutionBlocked`).
    #[error("blocked: {0}")]
    Blocked(String),
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// No host runs (it died, or is being restarted).
    #[error("the plugin host is not running ({0})")]
    Down(String),
    #[error("{0}")]
    Other(String),
}

/// The rest of an execution chain, run when the host calls `middleware.next`:
/// the result, or the downstream failure's `data` for error -32010.
pub type NextFn = Box<dyn FnOnce(Option<Value>) -> BoxFuture<'static, Result<Value, Value>> + Send>;

/// What to do with a restarted host's `initialize` answer.
pub type OnRestart = Box<dyn Fn(&Value) + Send + Sync>;

/// An open execution frame: its `next`, and how long herald spent serving it (the
/// callback's clock stops meanwhile).
struct Frame {
    next: Option<NextFn>,
    expired: bool,
    serving_since: Option<Instant>,
    served_for: Duration,
    /// Turns true when a `middleware.next` of this frame has been answered.
    served: watch::Sender<bool>,
}

/// One running host process.
struct Process {
    pid: u32,
    lines: mpsc::UnboundedSender<String>,
    pending: Mutex<HashMap<String, oneshot::Sender<Result<Value, CallError>>>>,
    /// Requests herald gave up on, by id: the callback each one runs.
    late: Mutex<HashMap<String, String>>,
    child: Mutex<Option<tokio::process::Child>>,
    dead: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Process {
    /// Kills the host and whatever its plugins started (its process group).
    fn kill(&self) {
        // The host leads its process group (spawned with process_group(0)).
        herald_process::kill_group(Some(self.pid));
        if let Some(child) = lock(&self.child).as_mut() {
            let _ = child.start_kill();
        }
    }

    /// Fails every call still waiting (the host is gone).
    fn fail_all(&self, why: &str) {
        self.dead.store(true, Ordering::SeqCst);
        for (_, tx) in lock(&self.pending).drain() {
            let _ = tx.send(Err(CallError::Down(why.to_owned())));
        }
    }
}

/// herald's side of the plugin host: the current process, the open frames, restarts.
pub struct Link {
    settings: HostSettings,
    current: RwLock<Option<Arc<Process>>>,
    frames: Mutex<HashMap<String, Frame>>,
    next_id: AtomicU64,
    /// Callbacks skipped until a moment (they timed out).
    resting: Mutex<HashMap<String, Instant>>,
    /// Calls of each callback herald gave up on that still run in the host.
    abandoned: Mutex<HashMap<String, usize>>,
    /// What the last `initialize` answered.
    initialized: RwLock<Value>,
    /// Called with the new `initialize` answer after a restart.
    on_restart: Mutex<Option<OnRestart>>,
    closed: AtomicBool,
}

impl Link {
    /// Starts the host and initializes it; the `initialize` answer, or why not.
    pub async fn start(settings: HostSettings) -> Result<Arc<Link>, String> {
        let link = Arc::new(Link {
            settings,
            current: RwLock::new(None),
            frames: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            resting: Mutex::new(HashMap::new()),
            abandoned: Mutex::new(HashMap::new()),
            initialized: RwLock::new(Value::Null),
            on_restart: Mutex::new(None),
            closed: AtomicBool::new(false),
        });
        let answer = link.launch().await?;
        if let Ok(mut i) = link.initialized.write() {
            *i = answer;
        }
        Ok(link)
    }

    pub fn initialized(&self) -> Value {
        self.initialized
            .read()
            .map(|i| i.clone())
            .unwrap_or(Value::Null)
    }

    /// What to do with the registrations of a restarted host.
    pub fn on_restart(&self, f: OnRestart) {
        *lock(&self.on_restart) = Some(f);
    }

    pub fn callback_timeout(&self) -> Duration {
        self.settings.callback_timeout
    }

    /// Spawns a process, makes it current and initializes it.
    async fn launch(self: &Arc<Self>) -> Result<Value, String> {
        let process = self.spawn().map_err(|e| {
            format!(
                "cannot start the plugin host with `{}`: {e}",
                self.settings.python
            )
        })?;
        if let Ok(mut c) = self.current.write() {
            *c = Some(process.clone());
        }
        let params = json!({
            "protocol": PROTOCOL,
            "herald_version": env!("CARGO_PKG_VERSION"),
            "compat": {"hermes": "0.19", "telemetry_schema_version": "hermes.observer.v1",
                       "middleware_schema_version": "hermes.middleware.v1"},
            "hermes_home": self.settings.hermes_home.display().to_string(),
            "limits": {"max_message_bytes": MAX_MESSAGE, "max_concurrency": 32},
            "plugins": self.settings.plugins,
        });
        let startup = self.settings.startup_timeout;
        match self
            .request_on(&process, "initialize", params, startup, None, None)
            .await
        {
            Ok(answer) => Ok(answer),
            Err(e) => {
                process.kill();
                Err(format!("the plugin host did not start: {e}"))
            }
        }
    }

    fn spawn(self: &Arc<Self>) -> std::io::Result<Arc<Process>> {
        let mut child = herald_process::command(&self.settings.python)
            .arg(&self.settings.script)
            .env("HERMES_HOME", &self.settings.hermes_home)
            .env("PYTHONUNBUFFERED", "1")
            .stdin(std::process::Stdio::piped())
            .spawn()?;
        let (stdin, stdout, stderr) =
            match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
                (Some(i), Some(o), Some(e)) => (i, o, e),
                _ => return Err(std::io::Error::other("no pipes to the plugin host")),
            };
        let pid = child.id().unwrap_or_default();
        let (lines, to_write) = mpsc::unbounded_channel();
        let process = Arc::new(Process {
            pid,
            lines,
            pending: Mutex::new(HashMap::new()),
            late: Mutex::new(HashMap::new()),
            child: Mutex::new(Some(child)),
            dead: AtomicBool::new(false),
        });
        tokio::spawn(write_lines(stdin, to_write));
        tokio::spawn(log_stderr(stderr, pid));
        tokio::spawn(read_messages(Arc::downgrade(self), process.clone(), stdout));
        Ok(process)
    }

    /// The host died (or was killed): calls fail, and a new one starts with back-off.
    fn died(self: &Arc<Self>, process: &Arc<Process>, why: &str) {
        process.fail_all(why);
        lock(&self.abandoned).clear();
        let was_current = match self.current.write() {
            Ok(mut c) if c.as_ref().is_some_and(|p| Arc::ptr_eq(p, process)) => {
                *c = None;
                true
            }
            _ => false,
        };
        if !was_current || self.closed.load(Ordering::SeqCst) {
            return;
        }
        tracing::warn!(
            pid = process.pid,
            "the Python plugin host stopped ({why}); its plugins are skipped until it is restarted"
        );
        let link = self.clone();
        tokio::spawn(async move { link.restart().await });
    }

    async fn restart(self: Arc<Self>) {
        let mut failures = 0;
        loop {
            failures += 1;
            tokio::time::sleep(RESTARTS.wait_with(failures, 0.0)).await;
            if self.closed.load(Ordering::SeqCst) {
                return;
            }
            match self.launch().await {
                Ok(answer) => {
                    tracing::info!("the Python plugin host is running again");
                    herald_metrics::get().extensions.plugin_host_restarted();
                    if let Some(f) = lock(&self.on_restart).as_ref() {
                        f(&answer);
                    }
                    if let Ok(mut i) = self.initialized.write() {
                        *i = answer;
                    }
                    return;
                }
                Err(e) => tracing::debug!(error = %e, "the plugin host could not be restarted yet"),
            }
        }
    }

    /// Stops the host for good (`shutdown`, then a kill after a grace period).
    pub async fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let process = self.current.write().ok().and_then(|mut c| c.take());
        if let Some(p) = process {
            let asked = self.request_on(
                &p,
                "shutdown",
                json!({}),
                Duration::from_secs(5),
                None,
                None,
            );
            let _ = asked.await;
            let _ = p.lines.send(envelope::notification("exit", None::<&Value>));
            tokio::time::sleep(Duration::from_millis(200)).await;
            p.kill();
        }
    }

    /// Whether a host process runs now (not dead nor being restarted).
    pub fn is_up(&self) -> bool {
        self.process().is_ok()
    }

    fn process(&self) -> Result<Arc<Process>, CallError> {
        self.current
            .read()
            .ok()
            .and_then(|c| c.clone())
            .ok_or_else(|| CallError::Down("restarting".into()))
    }

    /// Whether a callback that timed out is still resting: for a minute, and for as
    /// long as three of its calls still run abandoned.
    fn resting(&self, callback_id: &str) -> bool {
        if lock(&self.abandoned)
            .get(callback_id)
            .is_some_and(|n| *n >= 3)
        {
            return true;
        }
        let mut r = lock(&self.resting);
        match r.get(callback_id) {
            Some(until) if Instant::now() < *until => true,
            Some(_) => {
                r.remove(callback_id);
                false
            }
            None => false,
        }
    }

    /// Calls `method` of the host for `callback_id` within the callback timeout (the
    /// clock stopped while herald serves `frame`'s `middleware.next`).
    pub async fn call(
        self: &Arc<Self>,
        method: &str,
        params: impl serde::Serialize,
        callback_id: &str,
        frame: Option<&str>,
    ) -> Result<Value, CallError> {
        let answer = self.call_once(method, params, callback_id, frame).await;
        // A callback that blocks on purpose has not failed.
        if matches!(&answer, Err(e) if !matches!(e, CallError::Blocked(_))) {
            herald_metrics::get().extensions.callback_failed(method);
        }
        answer
    }

    async fn call_once(
        self: &Arc<Self>,
        method: &str,
        params: impl serde::Serialize,
        callback_id: &str,
        frame: Option<&str>,
    ) -> Result<Value, CallError> {
        if self.resting(callback_id) {
            return Err(CallError::Other(
                "skipped: it ran past its timeout lately, or three of its calls still run".into(),
            ));
        }
        let process = self.process()?;
        let timeout = self.settings.callback_timeout;
        let answer = self
            .request_on(&process, method, params, timeout, frame, Some(callback_id))
            .await;
        if let Err(CallError::Timeout(_)) = &answer {
            *lock(&self.abandoned)
                .entry(callback_id.to_owned())
                .or_default() += 1;
            lock(&self.resting).insert(
                callback_id.to_owned(),
                Instant::now() + Duration::from_secs(60),
            );
            let link = self.clone();
            tokio::spawn(async move { link.check_alive(process).await });
        }
        answer
    }

    /// A host that does not answer a ping within 5 s is hung: it is killed.
    async fn check_alive(self: Arc<Self>, process: Arc<Process>) {
        let ping = self.request_on(&process, "$/ping", json!({}), PING_WITHIN, None, None);
        if let Err(CallError::Timeout(_)) = ping.await {
            tracing::warn!(
                pid = process.pid,
                "the plugin host does not answer; killing it"
            );
            process.kill();
        }
    }

    async fn request_on(
        &self,
        process: &Arc<Process>,
        method: &str,
        params: impl serde::Serialize,
        timeout: Duration,
        frame: Option<&str>,
        callback: Option<&str>,
    ) -> Result<Value, CallError> {
        if process.dead.load(Ordering::SeqCst) {
            return Err(CallError::Down("it stopped".into()));
        }
        let id = format!("h{}", self.next_id.fetch_add(1, Ordering::Relaxed));
        let line = envelope::request(&Value::String(id.clone()), method, params)
            .map_err(|e| CallError::Other(format!("cannot encode the request: {e}")))?;
        if line.len() > MAX_MESSAGE {
            return Err(CallError::Other(format!(
                "the request is larger than {MAX_MESSAGE} bytes; not sent"
            )));
        }
        let (tx, mut rx) = oneshot::channel();
        lock(&process.pending).insert(id.clone(), tx);
        if process.lines.send(line).is_err() {
            lock(&process.pending).remove(&id);
            return Err(CallError::Down("its input is closed".into()));
        }
        let started = Instant::now();
        loop {
            let own = started.elapsed().saturating_sub(self.served_for(frame));
            let left = timeout.saturating_sub(own);
            if left.is_zero() && !self.serving(frame) {
                lock(&process.pending).remove(&id);
                if let Some(cb) = callback {
                    lock(&process.late).insert(id.clone(), cb.to_owned());
                }
                if let Some(f) = frame {
                    self.expire(f);
                    let _ = process.lines.send(cancel(f, "timeout"));
                }
                return Err(CallError::Timeout(timeout));
            }
            let nap = left.max(Duration::from_millis(20));
            match tokio::time::timeout(nap, &mut rx).await {
                Ok(Ok(answer)) => return answer,
                Ok(Err(_)) => return Err(CallError::Down("it stopped".into())),
                Err(_) => continue,
            }
        }
    }

    // ------------------------------------------------------------ frames

    /// Opens a frame whose `next` the host may call once.
    pub fn open_frame(&self, next: NextFn) -> String {
        let id = format!("f{}", self.next_id.fetch_add(1, Ordering::Relaxed));
        let frame = Frame {
            next: Some(next),
            expired: false,
            serving_since: None,
            served_for: Duration::ZERO,
            served: watch::channel(false).0,
        };
        lock(&self.frames).insert(id.clone(), frame);
        id
    }

    /// Closes a frame: once its `next` (if being served) has finished, so the
    /// downstream outcome is known; a later `middleware.next` gets `frame_expired`.
    pub async fn close_frame(&self, id: &str) {
        let waiting = lock(&self.frames)
            .get(id)
            .filter(|f| f.serving_since.is_some())
            .map(|f| f.served.subscribe());
        if let Some(mut served) = waiting {
            let _ = served.wait_for(|done| *done).await;
        }
        lock(&self.frames).remove(id);
    }

    /// Forgets a frame whose call was dropped (the run was interrupted): a late
    /// `middleware.next` gets `frame_expired`, and the host is told.
    pub fn abandon_frame(&self, id: &str) {
        let removed = lock(&self.frames).remove(id);
        let process = self.current.read().ok().and_then(|c| c.clone());
        if let (Some(_), Some(p)) = (removed, process) {
            let _ = p.lines.send(cancel(id, "interrupted"));
        }
    }

    fn expire(&self, id: &str) {
        if let Some(f) = lock(&self.frames).get_mut(id) {
            f.expired = true;
        }
    }

    fn serving(&self, frame: Option<&str>) -> bool {
        frame.is_some_and(|id| {
            lock(&self.frames)
                .get(id)
                .is_some_and(|f| f.serving_since.is_some())
        })
    }

    fn served_for(&self, frame: Option<&str>) -> Duration {
        let Some(id) = frame else {
            return Duration::ZERO;
        };
        lock(&self.frames).get(id).map_or(Duration::ZERO, |f| {
            f.served_for + f.serving_since.map_or(Duration::ZERO, |s| s.elapsed())
        })
    }

    /// The host's `middleware.next`: runs the frame's rest of the chain once.
    async fn serve_next(&self, process: &Process, id: Value, params: &Map<String, Value>) {
        let frame_id = params
            .get("frame_id")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let payload = params.get("payload").cloned().filter(|p| !p.is_null());
        let taken = {
            let mut frames = lock(&self.frames);
            match frames.get_mut(frame_id) {
                None => Err((-32012, "frame_expired")),
                Some(f) if f.expired => Err((-32012, "frame_expired")),
                Some(f) => match f.next.take() {
                    None => Err((-32011, "next_call_reused")),
                    Some(next) => {
                        f.serving_since = Some(Instant::now());
                        Ok(next)
                    }
                },
            }
        };
        let answer = match taken {
            Err((code, message)) => envelope::error(&id, &ErrorObject::new(code, message)),
            Ok(next) => {
                let outcome = next(payload).await;
                if let Some(f) = lock(&self.frames).get_mut(frame_id) {
                    f.served_for += f
                        .serving_since
                        .take()
                        .map_or(Duration::ZERO, |s| s.elapsed());
                    let _ = f.served.send(true);
                }
                match outcome {
                    Ok(value) => envelope::response(&id, &json!({"value": value})),
                    Err(data) => {
                        let mut failed = ErrorObject::new(-32010, "downstream_failed");
                        failed.data = Some(data);
                        envelope::error(&id, &failed)
                    }
                }
            }
        };
        let _ = process.lines.send(answer);
    }
}

/// The `frame.cancel` notification of frame `id`.
fn cancel(id: &str, reason: &str) -> String {
    let params = json!({"frame_id": id, "reason": reason});
    envelope::notification("frame.cancel", Some(&params))
}

/// A host's error answer as a [`CallError`].
fn call_error(error: &ErrorObject) -> CallError {
    let code = error.code;
    let data = error.data.clone().unwrap_or(Value::Null);
    let text = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    match code {
        -32004 => CallError::Blocked(text(&data, "reason")),
        -32001 => CallError::Raised {
            kind: text(&data, "type"),
            message: text(&data, "message"),
            downstream_ref: data
                .get("downstream_ref")
                .and_then(Value::as_str)
                .map(str::to_owned),
        },
        _ => CallError::Other(error.message.clone()),
    }
}

async fn write_lines(
    mut stdin: tokio::process::ChildStdin,
    mut lines: mpsc::UnboundedReceiver<String>,
) {
    while let Some(mut line) = lines.recv().await {
        line.push('\n');
        if stdin.write_all(line.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// Longest stderr line kept for the log (the rest of the line is read and dropped).
const MAX_LOGGED_LINE: usize = 2000;

/// The host's stderr (plugins' prints and logs) into herald's log: a plugin's WARNING,
/// ERROR and CRITICAL records at their own level, named by their logger (the host
/// writes records as `LEVEL logger: message`; its own are left to herald), at most [`LOUD_PER_MINUTE`] a minute
/// (the rest at DEBUG, the first of them said once); everything else at DEBUG. Read
/// as bytes, a line at a time and at most [`MAX_LOGGED_LINE`] of it kept: bytes that
/// are not UTF-8 are shown replaced and never stop the pipe from being drained (a full
/// pipe would stall the host).
async fn log_stderr(stderr: tokio::process::ChildStderr, pid: u32) {
    let mut lines = FramedRead::new(stderr, LineCodec::new(MAX_LOGGED_LINE));
    let mut budget = LoudBudget::default();
    while let Some(Ok(line)) = lines.next().await {
        let (Line::Frame(kept) | Line::TooLong(kept)) = line;
        let shown = String::from_utf8_lossy(&kept);
        match PluginRecord::read(&shown).filter(|_| budget.take()) {
            Some(PluginRecord {
                error: true,
                logger,
                message,
            }) => {
                tracing::error!(target: "herald::plugin", pid, plugin = logger, "{message}")
            }
            Some(PluginRecord {
                logger, message, ..
            }) => {
                tracing::warn!(target: "herald::plugin", pid, plugin = logger, "{message}")
            }
            None => tracing::debug!(target: "herald::plugin", pid, "{shown}"),
        }
    }
}

/// Most WARNING and ERROR records of a plugin host logged at their level a minute.
const LOUD_PER_MINUTE: u32 = 30;

/// How many loud records this minute may still have.
#[derive(Default)]
struct LoudBudget {
    since: Option<std::time::Instant>,
    used: u32,
    told: bool,
}

impl LoudBudget {
    fn take(&mut self) -> bool {
        let now = std::time::Instant::now();
        let fresh = self
            .since
            .is_none_or(|s| now.duration_since(s) >= std::time::Duration::from_secs(60));
        if fresh {
            self.since = Some(now);
            self.used = 0;
            self.told = false;
        }
        self.used += 1;
        if self.used <= LOUD_PER_MINUTE {
            return true;
        }
        if !self.told {
            self.told = true;
            tracing::warn!(target: "herald::plugin", "plugins log more than {LOUD_PER_MINUTE} warnings a minute; the rest of this minute's go to DEBUG");
        }
        false
    }
}

/// A plugin's WARNING or worse log record, as the host writes it.
#[derive(Debug, PartialEq, Eq)]
struct PluginRecord<'a> {
    /// ERROR or CRITICAL (else WARNING).
    error: bool,
    logger: &'a str,
    message: &'a str,
}

impl<'a> PluginRecord<'a> {
    fn read(line: &'a str) -> Option<PluginRecord<'a>> {
        let (level, rest) = line.split_once(' ')?;
        let error = match level {
            "WARNING" => false,
            "ERROR" | "CRITICAL" => true,
            _ => return None,
        };
        let (logger, message) = rest.split_once(": ")?;
        // The host's own records (`herald.plugin_host`) stay at DEBUG: herald reports
        // what they say (a plugin that failed to load) itself.
        if logger.is_empty() || logger.contains(' ') || logger.starts_with("herald.") {
            return None;
        }
        Some(PluginRecord {
            error,
            logger,
            message,
        })
    }
}

/// Reads the host's messages until it goes away: answers to herald's requests, and
/// the host's own requests (`middleware.next`).
async fn read_messages(
    link: Weak<Link>,
    process: Arc<Process>,
    stdout: tokio::process::ChildStdout,
) {
    let mut lines = FramedRead::new(stdout, LineCodec::new(MAX_MESSAGE));
    let mut warned = false;
    let why = loop {
        let frame = match lines.next().await {
            None | Some(Err(_)) => break "its output ended",
            Some(Ok(Line::TooLong(_))) => break "it sent a message over the size limit",
            Some(Ok(Line::Frame(frame))) => frame,
        };
        match Incoming::read(&frame) {
            Ok(message) => dispatch(&link, &process, message),
            Err(Malformed::Method { id } | Malformed::Params { id }) if !id.is_null() => {
                let refused = ErrorObject::new(-32600, "invalid request");
                let _ = process.lines.send(envelope::error(&id, &refused));
            }
            Err(_) if !warned => {
                tracing::warn!(
                    pid = process.pid,
                    "the plugin host wrote a line that is not a JSON-RPC message; ignored"
                );
                warned = true;
            }
            Err(_) => {}
        }
    };
    if let Some(link) = link.upgrade() {
        link.died(&process, why);
    } else {
        process.fail_all(why);
    }
    let child = lock(&process.child).take();
    if let Some(mut child) = child {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
}

fn dispatch(link: &Weak<Link>, process: &Arc<Process>, message: Incoming) {
    let (id, outcome) = match message {
        Incoming::Request { id, method, params } => {
            let id = id.unwrap_or(Value::Null);
            if method == "middleware.next"
                && let Some(link) = link.upgrade()
            {
                let process = process.clone();
                tokio::spawn(async move { link.serve_next(&process, id, &params).await });
            } else {
                let unknown = ErrorObject::new(-32601, format!("unknown method: {method}"));
                let _ = process.lines.send(envelope::error(&id, &unknown));
            }
            return;
        }
        Incoming::Answer { id, outcome } => (id, outcome),
    };
    let Some(id) = id.as_str() else {
        return;
    };
    let Some(tx) = lock(&process.pending).remove(id) else {
        // A call herald gave up on has finished in the host after all.
        let late = lock(&process.late).remove(id);
        if let (Some(cb), Some(link)) = (late, link.upgrade())
            && let Some(n) = lock(&link.abandoned).get_mut(&cb)
        {
            *n = n.saturating_sub(1);
        }
        return;
    };
    let _ = tx.send(outcome.map_err(|e| call_error(&e)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_records_are_read_by_level_and_logger() {
        let r = PluginRecord::read("ERROR atbash.guard: guard initialization failed");
        assert_eq!(
            r,
            Some(PluginRecord {
                error: true,
                logger: "atbash.guard",
                message: "guard initialization failed"
            })
        );
        assert!(!PluginRecord::read("WARNING x: y").is_some_and(|r| r.error));
        assert_eq!(PluginRecord::read("INFO x: y"), None);
        assert_eq!(PluginRecord::read("noise line 5"), None);
        assert_eq!(
            PluginRecord::read("WARNING herald.plugin_host: failed"),
            None
        );
        assert_eq!(
            PluginRecord::read("Traceback (most recent call last):"),
            None
        );
    }

    #[test]
    fn loud_records_are_bounded_a_minute() {
        let mut budget = LoudBudget::default();
        let taken = (0..100).filter(|_| budget.take()).count();
        assert_eq!(taken, LOUD_PER_MINUTE as usize);
    }

    const SLOW: &str = "import time\n\ndef slow(request, **kwargs):\n    time.sleep(1.5)\n\ndef register(ctx):\n    ctx.register_middleware('llm_request', slow)\n";

    async fn slow_host(dir: &std::path::Path) -> Arc<Link> {
        let plugin = dir.join("slow");
        std::fs::create_dir_all(&plugin).unwrap();
        std::fs::write(plugin.join("__init__.py"), SLOW).unwrap();
        let script = dir.join("host.py");
        std::fs::write(&script, crate::HOST_PROGRAM).unwrap();
        Link::start(HostSettings {
            python: "python3".into(),
            script,
            hermes_home: dir.to_path_buf(),
            callback_timeout: Duration::from_millis(300),
            startup_timeout: Duration::from_secs(30),
            plugins: vec![
                json!({"key": "slow", "path": plugin.display().to_string(), "manifest": {}}),
            ],
        })
        .await
        .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn three_abandoned_calls_rest_a_callback_until_one_finishes() {
        let dir = tempfile::tempdir().unwrap();
        let link = slow_host(dir.path()).await;
        let params = json!({"callback_id": "c1", "kind": "llm_request", "fields": {"request": {}}});
        let calls = (0..3).map(|_| link.call("middleware.request", params.clone(), "c1", None));
        for answer in futures_util::future::join_all(calls).await {
            assert!(matches!(answer, Err(CallError::Timeout(_))), "{answer:?}");
        }
        lock(&link.resting).clear();
        assert!(link.resting("c1"), "three calls still run in the host");
        tokio::time::sleep(Duration::from_millis(2000)).await;
        assert!(!link.resting("c1"), "the abandoned calls finished");
        link.close().await;
    }
}
