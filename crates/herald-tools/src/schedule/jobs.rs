//! The scheduled jobs, kept as Hermes keeps them: `cron/jobs.json` in the home
//! (`{"jobs": [...], "updated_at": ...}`, Hermes's field names), so a Hermes home's file
//! is read as it is. Fields herald does not use are kept as they were. Every change
//! re-reads the file under a lock file and replaces it atomically (owner-only).

use super::when::{CatchUp, Schedule};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// How many times a job runs: `times` (`None`: forever) and how many it has.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Repeat {
    #[serde(default)]
    pub times: Option<u64>,
    #[serde(default)]
    pub completed: u64,
}

/// One job, with Hermes's fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub prompt: String,
    #[serde(default)]
    pub skills: Vec<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub script: Option<String>,
    #[serde(default)]
    pub no_agent: bool,
    pub schedule: Schedule,
    /// What the schedule looks like (Hermes keeps it beside the schedule).
    #[serde(default)]
    pub schedule_display: Option<String>,
    #[serde(default)]
    pub repeat: Repeat,
    #[serde(default = "enabled")]
    pub enabled: bool,
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub paused_at: Option<String>,
    #[serde(default)]
    pub paused_reason: Option<String>,
    #[serde(default)]
    pub created_at: Option<String>,
    #[serde(default)]
    pub next_run_at: Option<String>,
    #[serde(default)]
    pub last_run_at: Option<String>,
    #[serde(default)]
    pub last_status: Option<String>,
    #[serde(default)]
    pub last_error: Option<String>,
    /// `local`, `origin`, a platform, `platform:chat[:thread]`, `all`, or a target.
    #[serde(default)]
    pub deliver: Option<String>,
    #[serde(default)]
    pub enabled_toolsets: Option<Vec<String>>,
    #[serde(default)]
    pub workdir: Option<String>,
    /// The job's own timezone (herald's; else `HERMES_TIMEZONE`, else the system's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// The `schedules:` entry of `config.yaml` the job comes from (herald's): such a job
    /// follows the configuration and goes when its entry does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_config: Option<String>,
    /// What to do about missed ticks (herald's; Hermes's grace rule by default).
    #[serde(default, skip_serializing_if = "is_grace")]
    pub catch_up: CatchUp,
    /// Fields herald does not read, kept for Hermes.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl Job {
    /// A new job `id` asking `prompt`, enabled, delivered `local`, on a placeholder
    /// schedule its maker replaces; every other field empty.
    pub fn new(id: String, prompt: String) -> Job {
        Job {
            id,
            name: String::new(),
            prompt,
            skills: Vec::new(),
            model: None,
            script: None,
            no_agent: false,
            schedule: Schedule::Interval {
                minutes: 1,
                display: String::new(),
            },
            schedule_display: None,
            repeat: Repeat::default(),
            enabled: true,
            state: Some("scheduled".into()),
            paused_at: None,
            paused_reason: None,
            created_at: None,
            next_run_at: None,
            last_run_at: None,
            last_status: None,
            last_error: None,
            deliver: Some("local".into()),
            enabled_toolsets: None,
            workdir: None,
            timezone: None,
            from_config: None,
            catch_up: CatchUp::Grace,
            other: Map::new(),
        }
    }
}

fn enabled() -> bool {
    true
}

fn is_grace(c: &CatchUp) -> bool {
    *c == CatchUp::Grace
}

/// A job file's entries: jobs herald reads, and entries it cannot (kept as they are).
#[derive(Debug, Default)]
pub struct Jobs {
    pub jobs: Vec<Job>,
    /// (position, entry, why it is not read).
    pub unreadable: Vec<(usize, Value, String)>,
}

/// Why the job file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum JobsError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a job file: {reason}")]
    Invalid { path: PathBuf, reason: String },
}

/// The file of a home.
pub fn file_of(home: &Path) -> PathBuf {
    home.join("cron").join("jobs.json")
}

/// The jobs of `path` (none when there is no file).
pub fn load(path: &Path) -> Result<Jobs, JobsError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Jobs::default()),
        Err(source) => {
            return Err(JobsError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let invalid = |reason: String| JobsError::Invalid {
        path: path.to_path_buf(),
        reason,
    };
    if text.trim().is_empty() {
        return Ok(Jobs::default());
    }
    let root: Value = serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?;
    let entries = match root.get("jobs") {
        Some(Value::Array(a)) => a.clone(),
        _ => return Err(invalid("it has no `jobs` list".into())),
    };
    let mut jobs = Jobs::default();
    for (i, entry) in entries.into_iter().enumerate() {
        match serde_json::from_value::<Job>(entry.clone()) {
            Ok(job) => jobs.jobs.push(job),
            Err(e) => jobs.unreadable.push((i, entry, e.to_string())),
        }
    }
    Ok(jobs)
}

/// Changes the file under its lock: `change` gets the jobs as they are now and says
/// what it found; the file is written when it returns `true` as its second value.
pub fn update<T>(
    path: &Path,
    change: impl FnOnce(&mut Vec<Job>) -> (T, bool),
) -> Result<T, JobsError> {
    let io = |source| JobsError::Io {
        path: path.to_path_buf(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    create_private_dir(dir).map_err(io)?;
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(".jobs.lock"))
        .map_err(io)?;
    lock.lock().map_err(io)?;
    let mut jobs = load(path)?;
    let (out, changed) = change(&mut jobs.jobs);
    if changed {
        write(path, &jobs).map_err(io)?;
    }
    drop(lock);
    Ok(out)
}

fn write(path: &Path, jobs: &Jobs) -> std::io::Result<()> {
    use std::io::Write;
    let mut entries: Vec<Value> = jobs
        .jobs
        .iter()
        .filter_map(|j| serde_json::to_value(j).ok())
        .collect();
    for (i, entry, _) in &jobs.unreadable {
        entries.insert((*i).min(entries.len()), entry.clone());
    }
    let now = super::when::iso(jiff::Timestamp::now(), &jiff::tz::TimeZone::UTC);
    let text =
        serde_json::to_string_pretty(&serde_json::json!({"jobs": entries, "updated_at": now}))
            .map_err(std::io::Error::other)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(text.as_bytes())?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Creates `dir` (and its parents) owner-only, as Hermes secures its cron folder.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// A new job id: 12 hexadecimal characters, as Hermes makes them.
pub fn new_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..12].to_owned()
}
