//! `herald schedule list | add | remove | pause | resume | run`: the scheduled jobs of
//! the home (`cron/jobs.json`, Hermes's file and fields), which a running gateway's
//! scheduler fires. A job is named by its id or its name.

use herald_config::Home;
use herald_gateway::schedule::jobs::{self, Job};
use herald_gateway::schedule::manage::{self, NewJob};
use herald_gateway::schedule::when::CatchUp;
use std::process::ExitCode;

#[derive(clap::Subcommand, Debug)]
pub enum ScheduleCommand {
    /// The jobs: id, name, schedule, next and last run, where the answer goes.
    List {
        /// Paused jobs too.
        #[arg(long)]
        all: bool,
    },
    /// Adds a job: SCHEDULE is `30m` or `2h` (once, from now), `every 2h`, a cron
    /// expression such as `0 9 * * *`, or a time such as `2026-02-03T14:00`.
    #[command(alias = "create")]
    Add(Box<AddArgs>),
    /// Removes a job.
    Remove { job: String },
    /// Pauses a job (it keeps its place; `resume` brings it back).
    Pause {
        job: String,
        /// Why, kept with the job.
        #[arg(long, allow_hyphen_values = true)]
        reason: Option<String>,
    },
    /// Resumes a paused job from its next tick.
    Resume { job: String },
    /// Runs a job at the scheduler's next look (within a second when the gateway runs).
    Run { job: String },
}

#[derive(clap::Args, Debug)]
pub struct AddArgs {
    /// When it runs.
    #[arg(allow_hyphen_values = true)]
    schedule: String,
    /// What the agent is asked each time.
    #[arg(allow_hyphen_values = true)]
    prompt: Option<String>,
    /// A name for the job (default: the prompt's start).
    #[arg(long, allow_hyphen_values = true)]
    name: Option<String>,
    /// Where the answer goes: `local` (kept in the inbox and the log), a target
    /// (`telegram`, `slack`, ...), or `platform:chat_id[:thread]`.
    #[arg(long)]
    deliver: Option<String>,
    /// How many times it runs (default: once for a one-shot, else forever).
    #[arg(long)]
    repeat: Option<u64>,
    /// A skill to load; repeat for several.
    #[arg(long = "skill")]
    skills: Vec<String>,
    /// Toolsets instead of the scheduled default (hermes-cron), comma-separated.
    #[arg(long, value_delimiter = ',')]
    toolsets: Option<Vec<String>>,
    /// The timezone of its cron expression or time (default: HERMES_TIMEZONE, else
    /// the system's).
    #[arg(long)]
    timezone: Option<String>,
    /// Missed ticks: `grace` (Hermes's rule: once when at most half the period late,
    /// between 2 minutes and 2 hours), `always` (once, however late) or `skip`.
    #[arg(long, default_value = "grace", value_parser = ["grace", "always", "skip"])]
    catch_up: String,
}

pub fn run(home: &Home, command: ScheduleCommand) -> anyhow::Result<ExitCode> {
    let path = jobs::file_of(home.root());
    let now = jiff::Timestamp::now();
    let changed = match command {
        ScheduleCommand::List { all } => return list(&path, all),
        ScheduleCommand::Add(args) => {
            manage::create(&path, new_job(*args), now).map(|j| ("Added", j))
        }
        ScheduleCommand::Remove { job } => manage::remove(&path, &job).map(|j| ("Removed", j)),
        ScheduleCommand::Pause { job, reason } => {
            manage::pause(&path, &job, reason, now).map(|j| ("Paused", j))
        }
        ScheduleCommand::Resume { job } => manage::resume(&path, &job, now).map(|j| ("Resumed", j)),
        ScheduleCommand::Run { job } => manage::trigger(&path, &job, now).map(|j| ("Will run", j)),
    };
    match changed {
        Ok((verb, job)) => {
            outln!("{verb} job {} ({}): {}", job.id, job.name, summary(&job));
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("herald schedule: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

fn new_job(a: AddArgs) -> NewJob {
    NewJob {
        schedule: a.schedule,
        prompt: a.prompt.unwrap_or_default(),
        name: a.name,
        deliver: a.deliver,
        repeat: a.repeat,
        skills: a.skills,
        model: None,
        workdir: None,
        toolsets: a.toolsets,
        timezone: a.timezone,
        catch_up: match a.catch_up.as_str() {
            "always" => CatchUp::Always,
            "skip" => CatchUp::Skip,
            _ => CatchUp::Grace,
        },
    }
}

fn summary(job: &Job) -> String {
    let next = match (&job.next_run_at, job.enabled) {
        (_, false) => "paused".to_owned(),
        (Some(next), true) => format!("next {next}"),
        (None, true) => "next: at the scheduler's next look".to_owned(),
    };
    format!(
        "{}, {next}, deliver {}",
        job.schedule.display(),
        job.deliver.as_deref().unwrap_or("local")
    )
}

fn list(path: &std::path::Path, all: bool) -> anyhow::Result<ExitCode> {
    let loaded = jobs::load(path)?;
    let shown: Vec<&Job> = loaded.jobs.iter().filter(|j| all || j.enabled).collect();
    if shown.is_empty() {
        outln!("No scheduled jobs. Add one with `herald schedule add 'every 1h' 'PROMPT'`.");
    }
    for job in shown {
        let last = match (&job.last_run_at, &job.last_status) {
            (Some(at), Some(status)) => format!(", last {at} ({status})"),
            (Some(at), None) => format!(", last {at}"),
            _ => String::new(),
        };
        outln!("{}  {}  {}{last}", job.id, job.name, summary(job));
        if let Some(e) = &job.last_error {
            outln!("    last error: {e}");
        }
    }
    for (_, _, why) in &loaded.unreadable {
        outln!("(an entry of {} is not read: {why})", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
