//! Hermes's scheduled jobs as data: the job file (`cron/jobs.json`, [`jobs`]), when a
//! job fires ([`when`]), and making and changing jobs ([`manage`]), shared by the
//! gateway's scheduler, `herald schedule`, the agent's `cronjob` tool and the API's
//! `/api/jobs`.

pub mod jobs;
pub mod manage;
pub mod when;

use jiff::tz::TimeZone;
use jobs::Job;

/// The timezone of a job: its own, else `HERMES_TIMEZONE`, else the system's.
pub fn zone_of(job: &Job) -> TimeZone {
    let named = job
        .timezone
        .clone()
        .or_else(|| std::env::var("HERMES_TIMEZONE").ok())
        .filter(|z| !z.trim().is_empty());
    named
        .and_then(|z| TimeZone::get(z.trim()).ok())
        .unwrap_or_else(TimeZone::system)
}
