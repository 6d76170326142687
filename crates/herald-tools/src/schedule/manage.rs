//! Creating and changing jobs, as Hermes's `cron/jobs.py` does (`create_job`,
//! `pause_job`, `resume_job`, `trigger_job`, `remove_job`): one way for the CLI and
//! every later caller. A job is named by its id, else by a name only one job has.

use super::jobs::{self, Job, JobsError};
use super::when::{self, CatchUp, Schedule};
use jiff::Timestamp;
use std::path::Path;

/// Why a job could not be made or changed.
#[derive(Debug, thiserror::Error)]
pub enum ManageError {
    #[error("no job has the id or name '{0}'")]
    NotFound(String),
    #[error("'{0}' names several jobs ({1}): use the id")]
    Ambiguous(String, String),
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Jobs(#[from] JobsError),
}

/// A job to make.
#[derive(Debug, Clone, Default)]
pub struct NewJob {
    pub schedule: String,
    pub prompt: String,
    pub name: Option<String>,
    pub deliver: Option<String>,
    pub repeat: Option<u64>,
    pub skills: Vec<String>,
    pub model: Option<String>,
    pub workdir: Option<String>,
    pub toolsets: Option<Vec<String>>,
    pub timezone: Option<String>,
    pub catch_up: CatchUp,
}

/// Makes a job (its schedule parsed and its prompt scanned as Hermes does).
pub fn create(path: &Path, new: NewJob, now: Timestamp) -> Result<Job, ManageError> {
    if new.prompt.trim().is_empty() && new.skills.is_empty() {
        return Err(ManageError::Invalid(
            "a job needs a prompt or a skill".into(),
        ));
    }
    if let Some(why) = crate::threats::scheduled_prompt_threat(&new.prompt) {
        return Err(ManageError::Invalid(why));
    }
    if let Some(tz) = &new.timezone
        && jiff::tz::TimeZone::get(tz).is_err()
    {
        return Err(ManageError::Invalid(format!("unknown timezone '{tz}'")));
    }
    let mut job = Job {
        skills: new.skills,
        model: new.model,
        deliver: Some(new.deliver.unwrap_or_else(|| "local".into())),
        enabled_toolsets: new.toolsets,
        workdir: new.workdir,
        timezone: new.timezone,
        catch_up: new.catch_up,
        ..Job::new(jobs::new_id(), new.prompt.trim().to_owned())
    };
    let tz = super::zone_of(&job);
    job.schedule = when::parse(&new.schedule, now, &tz).map_err(ManageError::Invalid)?;
    job.schedule_display = Some(job.schedule.display().to_owned());
    let once = matches!(job.schedule, Schedule::Once { .. });
    job.repeat.times = new.repeat.or(once.then_some(1));
    job.name = new
        .name
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| job.prompt.chars().take(50).collect());
    job.created_at = Some(when::iso(now, &tz));
    let first = match &job.schedule {
        Schedule::Once { run_at, .. } => when::instant(run_at, &tz).ok(),
        schedule => schedule.next_after(now, &tz),
    };
    job.next_run_at = first.map(|t| when::iso(t, &tz));
    let made = job.clone();
    jobs::update(path, move |all| {
        all.push(job);
        ((), true)
    })?;
    Ok(made)
}

/// The index of the job `reference` names.
pub fn find(jobs: &[Job], reference: &str) -> Result<usize, ManageError> {
    let reference = reference.trim();
    if let Some(i) = jobs.iter().position(|j| j.id == reference) {
        return Ok(i);
    }
    let named: Vec<usize> = (0..jobs.len())
        .filter(|&i| jobs[i].name.eq_ignore_ascii_case(reference))
        .collect();
    match named.as_slice() {
        [] => Err(ManageError::NotFound(reference.to_owned())),
        [i] => Ok(*i),
        many => Err(ManageError::Ambiguous(
            reference.to_owned(),
            many.iter()
                .map(|&i| jobs[i].id.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        )),
    }
}

/// The job `reference` names.
pub fn get(path: &Path, reference: &str) -> Result<Job, ManageError> {
    let all = jobs::load(path)?.jobs;
    find(&all, reference).map(|i| all[i].clone())
}

/// Changes the job `reference` names with `change`; the job as it is after.
fn change(path: &Path, reference: &str, change: impl FnOnce(&mut Job)) -> Result<Job, ManageError> {
    jobs::update(path, |all| match find(all, reference) {
        Ok(i) => {
            change(&mut all[i]);
            (Ok(all[i].clone()), true)
        }
        Err(e) => (Err(e), false),
    })?
}

/// Pauses a job: it keeps its place but does not fire.
pub fn pause(
    path: &Path,
    reference: &str,
    reason: Option<String>,
    now: Timestamp,
) -> Result<Job, ManageError> {
    change(path, reference, |job| {
        job.enabled = false;
        job.state = Some("paused".into());
        job.paused_at = Some(when::iso(now, &super::zone_of(job)));
        job.paused_reason = reason;
    })
}

/// Resumes a paused job from its next tick after now.
pub fn resume(path: &Path, reference: &str, now: Timestamp) -> Result<Job, ManageError> {
    change(path, reference, |job| {
        let tz = super::zone_of(job);
        job.enabled = true;
        job.state = Some("scheduled".into());
        job.paused_at = None;
        job.paused_reason = None;
        if let Some(next) = job.schedule.next_after(now, &tz) {
            job.next_run_at = Some(when::iso(next, &tz));
        }
    })
}

/// Runs a job at the scheduler's next look (and resumes it, as Hermes does).
pub fn trigger(path: &Path, reference: &str, now: Timestamp) -> Result<Job, ManageError> {
    change(path, reference, |job| {
        job.enabled = true;
        job.state = Some("scheduled".into());
        job.paused_at = None;
        job.paused_reason = None;
        job.next_run_at = Some(when::iso(now, &super::zone_of(job)));
    })
}

/// What an update changes (`None`: left as it is).
#[derive(Debug, Clone, Default)]
pub struct Changes {
    pub schedule: Option<String>,
    pub prompt: Option<String>,
    pub name: Option<String>,
    pub deliver: Option<String>,
    /// `Some(0)`: forever.
    pub repeat: Option<u64>,
    pub skills: Option<Vec<String>>,
    pub model: Option<String>,
    /// An empty list clears it.
    pub toolsets: Option<Vec<String>>,
    /// An empty text clears it.
    pub workdir: Option<String>,
}

impl Changes {
    fn is_empty(&self) -> bool {
        self.schedule.is_none()
            && self.prompt.is_none()
            && self.name.is_none()
            && self.deliver.is_none()
            && self.repeat.is_none()
            && self.skills.is_none()
            && self.model.is_none()
            && self.toolsets.is_none()
            && self.workdir.is_none()
    }
}

/// Changes a job as Hermes's `update` does: a new schedule resumes it unless paused.
pub fn update(
    path: &Path,
    reference: &str,
    c: Changes,
    now: Timestamp,
) -> Result<Job, ManageError> {
    if c.is_empty() {
        return Err(ManageError::Invalid("No updates provided.".into()));
    }
    if let Some(why) = c
        .prompt
        .as_deref()
        .and_then(crate::threats::scheduled_prompt_threat)
    {
        return Err(ManageError::Invalid(why));
    }
    jobs::update(path, |all| match find(all, reference) {
        Ok(i) => match apply(&mut all[i], c, now) {
            Ok(()) => (Ok(all[i].clone()), true),
            Err(e) => (Err(e), false),
        },
        Err(e) => (Err(e), false),
    })?
}

/// Makes the changes on `job`.
fn apply(job: &mut Job, c: Changes, now: Timestamp) -> Result<(), ManageError> {
    let tz = super::zone_of(job);
    if let Some(text) = &c.schedule {
        job.schedule = when::parse(text, now, &tz).map_err(ManageError::Invalid)?;
        job.schedule_display = Some(job.schedule.display().to_owned());
        let first = match &job.schedule {
            Schedule::Once { run_at, .. } => when::instant(run_at, &tz).ok(),
            s => s.next_after(now, &tz),
        };
        job.next_run_at = first.map(|t| when::iso(t, &tz));
        if job.state.as_deref() != Some("paused") {
            job.enabled = true;
            job.state = Some("scheduled".into());
        }
    }
    if let Some(p) = c.prompt {
        job.prompt = p.trim().to_owned();
    }
    if let Some(n) = c.name {
        job.name = n;
    }
    if let Some(d) = c.deliver {
        job.deliver = Some(d);
    }
    if let Some(r) = c.repeat {
        job.repeat.times = (r > 0).then_some(r);
    }
    if let Some(s) = c.skills {
        job.skills = s;
    }
    if let Some(m) = c.model {
        job.model = Some(m).filter(|m| !m.is_empty());
    }
    if let Some(t) = c.toolsets {
        job.enabled_toolsets = Some(t).filter(|t| !t.is_empty());
    }
    if let Some(w) = c.workdir {
        job.workdir = Some(w).filter(|w| !w.is_empty());
    }
    Ok(())
}

/// Removes a job; the job removed.
pub fn remove(path: &Path, reference: &str) -> Result<Job, ManageError> {
    jobs::update(path, |all| match find(all, reference) {
        Ok(i) => (Ok(all.remove(i)), true),
        Err(e) => (Err(e), false),
    })?
}
