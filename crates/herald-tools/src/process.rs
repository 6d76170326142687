//! Background commands: `terminal` with `background: true` starts a job; `process`
//! lists, polls, reads, waits for and kills jobs.

use crate::error_result;
use herald_agent::tool::{Tool, ToolContext, ToolFuture};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// Output kept per job (the oldest bytes are dropped past this).
pub const MAX_JOB_OUTPUT: usize = 1024 * 1024;

#[derive(Default)]
struct Job {
    command: String,
    pid: Option<u32>,
    output: String,
    exit_code: Option<i32>,
    finished: bool,
}

/// A background job that ended, told to whoever listens (a front door's status line).
#[derive(Debug, Clone, PartialEq)]
pub struct JobFinished {
    pub id: String,
    pub command: String,
    /// The session whose tool call started it.
    pub session_id: String,
    /// `None` when a signal ended it.
    pub exit_code: Option<i32>,
}

impl JobFinished {
    /// One line for a person: which job, and how it ended.
    pub fn describe(&self) -> String {
        let how = match self.exit_code {
            Some(c) => format!("exited with code {c}"),
            None => "was stopped".to_owned(),
        };
        format!("Background process {} ({}) {how}.", self.id, self.command)
    }
}

/// Notices kept for a slow listener before the oldest are dropped.
const NOTICES: usize = 64;

/// The jobs of one agent, shared by `terminal` and `process`.
#[derive(Clone)]
pub struct Jobs {
    inner: Arc<Mutex<BTreeMap<String, Job>>>,
    finished: tokio::sync::broadcast::Sender<JobFinished>,
}

impl Default for Jobs {
    fn default() -> Jobs {
        Jobs {
            inner: Arc::default(),
            finished: tokio::sync::broadcast::channel(NOTICES).0,
        }
    }
}

impl Jobs {
    /// Every job that ends from now on.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<JobFinished> {
        self.finished.subscribe()
    }

    /// Starts `command` in the background for `session_id`'s call; returns its id.
    pub fn start(
        &self,
        command: &str,
        cwd: &std::path::Path,
        session_id: &str,
    ) -> Result<String, String> {
        let mut child = super::terminal::spawn_bash(command, cwd)
            .map_err(|e| format!("cannot start bash: {e}"))?;
        let id = format!(
            "proc_{}",
            uuid::Uuid::new_v4()
                .simple()
                .to_string()
                .chars()
                .take(8)
                .collect::<String>()
        );
        let job = Job {
            command: command.to_owned(),
            pid: child.id(),
            ..Default::default()
        };
        if let Ok(mut jobs) = self.inner.lock() {
            jobs.insert(id.clone(), job);
        }
        let jobs = self.inner.clone();
        let key = id.clone();
        let finished = self.finished.clone();
        let mut notice = JobFinished {
            id: id.clone(),
            command: command.to_owned(),
            session_id: session_id.to_owned(),
            exit_code: None,
        };
        let mut out = child.stdout.take();
        let mut err = child.stderr.take();
        tokio::spawn(async move {
            let append = |jobs: &Arc<Mutex<BTreeMap<String, Job>>>, bytes: &[u8]| {
                if let Ok(mut g) = jobs.lock()
                    && let Some(j) = g.get_mut(&key)
                {
                    j.output.push_str(&String::from_utf8_lossy(bytes));
                    if j.output.len() > MAX_JOB_OUTPUT {
                        let cut = j.output.len() - MAX_JOB_OUTPUT;
                        let at = (cut..j.output.len())
                            .find(|i| j.output.is_char_boundary(*i))
                            .unwrap_or(j.output.len());
                        j.output.drain(..at);
                    }
                }
            };
            async fn pump<R: tokio::io::AsyncRead + Unpin>(
                mut reader: Option<R>,
                append: impl Fn(&[u8]),
            ) {
                let mut buf = [0u8; 8192];
                while let Some(r) = reader.as_mut() {
                    match r.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => append(&buf[..n]),
                    }
                }
            }
            let (_, _, status) = tokio::join!(
                pump(out.take(), |b| append(&jobs, b)),
                pump(err.take(), |b| append(&jobs, b)),
                child.wait()
            );
            let code = status.ok().and_then(|s| s.code());
            if let Ok(mut g) = jobs.lock()
                && let Some(j) = g.get_mut(&key)
            {
                j.finished = true;
                j.exit_code = code;
            }
            notice.exit_code = code;
            let _ = finished.send(notice);
        });
        Ok(id)
    }

    fn view(&self, id: &str, offset: usize, limit: usize) -> Option<Value> {
        let jobs = self.inner.lock().ok()?;
        let j = jobs.get(id)?;
        let text: String = j.output.chars().skip(offset).take(limit).collect();
        Some(json!({
            "session_id": id, "command": j.command, "status": if j.finished { "exited" } else { "running" },
            "exit_code": j.exit_code, "output": text, "offset": offset, "total_chars": j.output.chars().count()
        }))
    }

    /// Stops every background job still running; how many were.
    pub fn stop_all(&self) -> usize {
        let running: Vec<Option<u32>> = self
            .inner
            .lock()
            .map(|g| g.values().filter(|j| !j.finished).map(|j| j.pid).collect())
            .unwrap_or_default();
        for pid in &running {
            herald_process::kill_group(*pid);
        }
        running.len()
    }

    fn kill(&self, id: &str) -> bool {
        let pid = self
            .inner
            .lock()
            .ok()
            .and_then(|g| g.get(id).filter(|j| !j.finished).and_then(|j| j.pid));
        herald_process::kill_group(pid);
        pid.is_some()
    }
}

pub struct Process {
    pub jobs: Jobs,
}

impl Tool for Process {
    fn name(&self) -> &str {
        "process"
    }
    fn description(&self) -> &str {
        "Manage background commands started with terminal(background=true): list, poll, log, wait, kill."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
            "action": {"type": "string", "enum": ["list", "poll", "log", "wait", "kill"]},
            "session_id": {"type": "string"}, "timeout": {"type": "integer", "minimum": 1},
            "offset": {"type": "integer", "minimum": 0}, "limit": {"type": "integer", "minimum": 1}
        }, "required": ["action"]})
    }
    fn run<'a>(&'a self, args: Value, _ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let action = args["action"].as_str().unwrap_or("");
            let id = args["session_id"].as_str().unwrap_or("");
            let offset = args["offset"].as_u64().unwrap_or(0) as usize;
            let limit = args["limit"].as_u64().unwrap_or(20_000) as usize;
            match action {
                "list" => {
                    let ids: Vec<String> = self
                        .jobs
                        .inner
                        .lock()
                        .map(|g| g.keys().cloned().collect())
                        .unwrap_or_default();
                    let all: Vec<Value> =
                        ids.iter().filter_map(|i| self.jobs.view(i, 0, 0)).collect();
                    json!({ "processes": all }).to_string()
                }
                "poll" | "log" => match self.jobs.view(id, offset, limit) {
                    Some(v) => v.to_string(),
                    None => error_result(format!("no background process `{id}`")),
                },
                "wait" => {
                    let timeout =
                        Duration::from_secs(args["timeout"].as_u64().unwrap_or(60).clamp(1, 600));
                    let started = tokio::time::Instant::now();
                    loop {
                        match self.jobs.view(id, offset, limit) {
                            None => return error_result(format!("no background process `{id}`")),
                            Some(v) if v["status"] == "exited" || started.elapsed() >= timeout => {
                                return v.to_string();
                            }
                            Some(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                        }
                    }
                }
                "kill" => {
                    if self.jobs.kill(id) {
                        json!({"session_id": id, "status": "killed"}).to_string()
                    } else {
                        error_result(format!("no running background process `{id}`"))
                    }
                }
                other => error_result(format!(
                    "unknown action `{other}`: use list, poll, log, wait or kill"
                )),
            }
        })
    }
}
