//! Creating and changing jobs, as Hermes's `cron/jobs.py` does (`create_job`,
//! `pause_job`, `resume_job`, `trigger_job`, `remove_job`): one way for the CLI and
//! every later caller. A job is named by its id, else by a name only one job has.

use super::jobs::{self, Job, JobsError, Repeat};
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
    if let Some(why) = herald_tools::threats::scheduled_prompt_threat(&new.prompt) {
        return Err(ManageError::Invalid(why));
    }
    if let Some(tz) = &new.timezone
        && jiff::tz::TimeZone::get(tz).is_err()
    {
        return Err(ManageError::Invalid(format!("unknown timezone '{tz}'")));
    }
    let mut job = Job {
        id: jobs::new_id(),
        name: String::new(),
        prompt: new.prompt.trim().to_owned(),
        skills: new.skills,
        model: new.model,
        script: None,
        no_agent: false,
        schedule: Schedule::Interval {
            minutes: 1,
            display: String::new(),
        },
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
        deliver: Some(new.deliver.unwrap_or_else(|| "local".into())),
        enabled_toolsets: new.toolsets,
        workdir: new.workdir,
        timezone: new.timezone,
        catch_up: new.catch_up,
        other: Default::default(),
    };
    let tz = super::zone_of(&job);
    job.schedule = when::parse(&new.schedule, now, &tz).map_err(ManageError::Invalid)?;
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

/// Removes a job; the job removed.
pub fn remove(path: &Path, reference: &str) -> Result<Job, ManageError> {
    jobs::update(path, |all| match find(all, reference) {
        Ok(i) => (Ok(all.remove(i)), true),
        Err(e) => (Err(e), false),
    })?
}
