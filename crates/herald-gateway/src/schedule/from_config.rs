//! The jobs of `config.yaml`'s `schedules:` kept in the job file beside the others, so
//! one scheduler runs them all: each entry is a job whose id comes from its name (the
//! same on every instance, so a tick is still committed once), brought up to date at
//! start, and removed when its entry is. An interval starts on a multiple of its period
//! since the Unix epoch, so every instance agrees on its ticks; a one-shot must be a time
//! (a relative `30m` would move at each start).

use super::jobs::{self, Job};
use super::when::{self, CatchUp, Schedule};
use herald_config::schedule_settings::ScheduleSettings;
use jiff::Timestamp;
use std::path::Path;

/// The id of the job of entry `name`: 12 hexadecimal characters, as Hermes's are.
pub fn id_of(name: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(format!("schedules:{name}").as_bytes()))[..12].to_owned()
}

/// Why entries would not run (for `herald config check` and the start's findings).
pub fn problems(entries: &[ScheduleSettings], now: Timestamp) -> Vec<String> {
    entries
        .iter()
        .filter_map(|e| {
            job_of(e, now)
                .err()
                .map(|why| format!("schedules.{}: {why}", e.name))
        })
        .collect()
}

/// Brings the job file in line with `entries`; the problems, one per entry refused.
pub fn sync(
    path: &Path,
    entries: &[ScheduleSettings],
    now: Timestamp,
) -> Result<Vec<String>, jobs::JobsError> {
    let mut problems = Vec::new();
    let wanted: Vec<Job> = entries
        .iter()
        .filter_map(|e| match job_of(e, now) {
            Ok(job) => Some(job),
            Err(why) => {
                problems.push(format!("schedules.{}: {why}", e.name));
                None
            }
        })
        .collect();
    jobs::update(path, |all| {
        let before = all.clone();
        all.retain(|j| j.from_config.is_none() || wanted.iter().any(|w| w.id == j.id));
        for want in wanted {
            match all.iter_mut().find(|j| j.id == want.id) {
                Some(have) => refresh(have, want),
                None => all.push(want),
            }
        }
        let changed = *all != before;
        ((), changed)
    })?;
    Ok(problems)
}

/// The job an entry describes, its first tick from now.
fn job_of(e: &ScheduleSettings, now: Timestamp) -> Result<Job, String> {
    if let Some(why) = herald_tools::threats::scheduled_prompt_threat(&e.prompt) {
        return Err(why);
    }
    let mut job = Job {
        name: e.name.clone(),
        skills: e.skills.clone(),
        enabled: e.enabled,
        state: Some(if e.enabled { "scheduled" } else { "paused" }.into()),
        deliver: Some(e.deliver.clone().unwrap_or_else(|| "local".into())),
        enabled_toolsets: e.toolsets.clone(),
        timezone: e.timezone.clone(),
        from_config: Some(e.name.clone()),
        catch_up: match e.catch_up.as_deref() {
            Some("always") => CatchUp::Always,
            Some("skip") => CatchUp::Skip,
            _ => CatchUp::Grace,
        },
        ..Job::new(id_of(&e.name), e.prompt.clone())
    };
    let tz = super::zone_of(&job);
    let text = e.schedule.trim();
    let relative = when::parse_duration(text).is_ok();
    if relative {
        return Err(format!(
            "`{text}` is relative to when it is read; give a time (2026-02-03T14:00), an interval (every 2h) or a cron expression"
        ));
    }
    job.schedule = when::parse(text, now, &tz)?;
    job.schedule_display = Some(job.schedule.display().to_owned());
    job.repeat.times = matches!(job.schedule, Schedule::Once { .. }).then_some(1);
    job.next_run_at = first_tick(&job.schedule, now, &tz).map(|t| when::iso(t, &tz));
    Ok(job)
}

/// An entry's first tick: an interval's next multiple of its period since the epoch.
fn first_tick(schedule: &Schedule, now: Timestamp, tz: &jiff::tz::TimeZone) -> Option<Timestamp> {
    match schedule {
        Schedule::Interval { minutes, .. } => {
            let period = i64::try_from(*minutes).ok()?.checked_mul(60)?;
            let next = (now.as_second() / period + 1).checked_mul(period)?;
            Timestamp::from_second(next).ok()
        }
        Schedule::Once { run_at, .. } => when::instant(run_at, tz).ok(),
        schedule => schedule.next_after(now, tz),
    }
}

/// The entry's settings on the kept job; its place in time stays unless its schedule
/// changed.
fn refresh(have: &mut Job, want: Job) {
    if have.schedule != want.schedule || have.timezone != want.timezone {
        have.schedule = want.schedule;
        have.schedule_display = want.schedule_display;
        have.next_run_at = want.next_run_at;
        have.repeat = want.repeat;
    }
    if have.enabled != want.enabled {
        have.enabled = want.enabled;
        have.state = want.state;
    }
    have.name = want.name;
    have.prompt = want.prompt;
    have.skills = want.skills;
    have.deliver = want.deliver;
    have.enabled_toolsets = want.enabled_toolsets;
    have.timezone = want.timezone;
    have.catch_up = want.catch_up;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, schedule: &str) -> ScheduleSettings {
        ScheduleSettings {
            name: name.into(),
            schedule: schedule.into(),
            prompt: format!("run {name}"),
            timezone: Some("UTC".into()),
            enabled: true,
            ..ScheduleSettings::default()
        }
    }

    #[test]
    fn config_entries_become_jobs_that_follow_the_configuration() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cron/jobs.json");
        let now: Timestamp = "2026-12-07T10:07:00Z".parse().unwrap();
        let problems = sync(
            &path,
            &[
                entry("half", "every 30m"),
                entry("daily", "0 9 * * *"),
                entry("soon", "30m"),
            ],
            now,
        )
        .unwrap();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].starts_with("schedules.soon: `30m` is relative"));
        let kept = jobs::load(&path).unwrap().jobs;
        let half = kept.iter().find(|j| j.name == "half").unwrap();
        assert_eq!(half.id, id_of("half"));
        assert_eq!(
            half.next_run_at.as_deref(),
            Some("2026-12-07T10:30:00+00:00"),
            "on the epoch's multiples"
        );
        // Again, later: the ticks stay; a changed prompt is taken; a removed entry goes.
        let mut changed = entry("half", "every 30m");
        changed.prompt = "run half, better".into();
        let later: Timestamp = "2026-12-07T10:20:00Z".parse().unwrap();
        sync(&path, &[changed], later).unwrap();
        let kept = jobs::load(&path).unwrap().jobs;
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].prompt, "run half, better");
        assert_eq!(
            kept[0].next_run_at.as_deref(),
            Some("2026-12-07T10:30:00+00:00")
        );
        // Jobs made elsewhere are left alone.
        crate::schedule::manage::create(
            &path,
            crate::schedule::manage::NewJob {
                schedule: "every 1h".into(),
                prompt: "mine".into(),
                ..Default::default()
            },
            later,
        )
        .unwrap();
        sync(&path, &[], later).unwrap();
        let kept = jobs::load(&path).unwrap().jobs;
        assert_eq!(
            kept.iter().map(|j| j.prompt.as_str()).collect::<Vec<_>>(),
            ["mine"]
        );
    }
}
