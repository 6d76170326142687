//! `herald setup --from-hermes [PATH]`: copy what a Hermes home holds that herald reads
//! (the same file names and keys) into the herald home, import its sessions, and say
//! what was carried, converted and left behind ([`report`]). The Hermes home is only
//! read; a file that already exists in the herald home is kept, never overwritten.

mod report;
mod state;

pub use report::FILE_NAME as REPORT_FILE;
use report::Report;

use anyhow::Context;
use herald_config::{Config, Home, process_env};
use herald_deliver::{TargetSet, TargetSettings};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Files copied, owner-only when they hold secrets.
const FILES: &[(&str, bool)] = &[
    ("config.yaml", true),
    (".env", true),
    ("webhook_subscriptions.json", true),
    ("SOUL.md", false),
];
/// Folders copied with everything in them.
const FOLDERS: &[&str] = &[
    "scripts",
    "skills",
    "plugins",
    "memories",
    "pairing",
    "platforms/pairing",
];
/// Entries of a Hermes home read by the import besides the copied ones.
const CONVERTED: &[&str] = &["state.db", "cron"];
/// Hermes's agent tools herald does not have yet.
const MISSING_TOOLS: &str = "the ten browser_* tools (they need a browser; a later release brings them), execute_code: routes and platforms naming their toolsets go without them (`herald config check` names each)";

/// `HERMES_HOME`, else `~/.hermes`.
pub fn default_hermes_home() -> PathBuf {
    match std::env::var_os("HERMES_HOME").filter(|v| !v.is_empty()) {
        Some(v) => PathBuf::from(v),
        None => herald_config::home::user_home().join(".hermes"),
    }
}

/// Copies from `from` (default: [`default_hermes_home`]).
pub fn run(home: &Home, from: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let from = from.unwrap_or_else(default_hermes_home);
    if !from.join("config.yaml").is_file() {
        outln!(
            "No Hermes home at {} (no config.yaml there).",
            from.display()
        );
        outln!("  Name one with: herald setup --from-hermes /path/to/.hermes");
        return Ok(ExitCode::FAILURE);
    }
    home.create()
        .with_context(|| format!("cannot create {}", home.root().display()))?;
    let mut report = Report::default();
    // A home that had a skills folder got herald's skills then (or its user removed them).
    let skills_are_new = !home.skills_dir().exists();
    for (name, private) in FILES {
        let source = from.join(name);
        if is_link(&source) {
            report.skipped.push((*name).to_owned());
        } else if source.is_file() {
            copy_file(
                &source,
                &home.root().join(name),
                *private,
                name,
                &mut report,
            )?;
        }
    }
    for folder in FOLDERS {
        let source = from.join(folder);
        if is_link(&source) {
            report.skipped.push((*folder).to_owned());
        } else if source.is_dir() && !is_empty_dir(&source) {
            copy_tree(&source, &home.root().join(folder), folder, &mut report)?;
        }
    }
    if skills_are_new {
        install_bundled_skills(home, &mut report)?;
    }
    herald_config::load_dotenv(home)?;
    let mut failed = false;
    match Config::load(home, &process_env) {
        Ok(config) => {
            import_jobs(&from, home, &config, &mut report)?;
            if let Err(e) = state::import(&from, home, &config, &mut report) {
                failed = true;
                report.left_behind.push((
                    "state.db".into(),
                    format!("not imported: {e:#}; fix that and run `herald setup --from-hermes` again (what was imported stays)"),
                ));
            }
            let found = findings(&config, &report);
            report.findings.extend(found);
        }
        Err(e) => report.findings.push(format!(
            "the moved configuration does not load, so state.db was not imported: {e}; fix it and run `herald setup --from-hermes` again"
        )),
    }
    list_left_behind(&from, &mut report)?;
    let text = report.render(&from, home.root());
    let kept = home.root().join(REPORT_FILE);
    herald_config::default_config::write_private_replace(&kept, text.as_bytes())
        .with_context(|| format!("cannot write {}", kept.display()))?;
    out!("{text}");
    outln!("(This report is kept in {}.)", kept.display());
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Hermes's scheduled jobs (`cron/jobs.json`), run by herald's scheduler from the same
/// file; their past output (`cron/output/`) stays behind.
fn import_jobs(
    from: &Path,
    home: &Home,
    config: &Config,
    report: &mut Report,
) -> anyhow::Result<()> {
    let source = from.join("cron/jobs.json");
    if is_link(&source) || is_link(&from.join("cron")) || !source.is_file() {
        return Ok(());
    }
    let target = herald_gateway::schedule::jobs::file_of(home.root());
    if let Some(dir) = target.parent() {
        herald_config::home::create_private_dir(dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut carried = Report::default();
    copy_file(&source, &target, true, "cron/jobs.json", &mut carried)?;
    report.kept.extend(carried.kept);
    let jobs = herald_gateway::schedule::jobs::load(&target)?;
    let names: Vec<String> = jobs
        .jobs
        .iter()
        .map(|j| format!("{} ({})", j.name, j.schedule.display()))
        .collect();
    if !carried.carried.is_empty() {
        report.converted.push(format!(
            "cron/jobs.json: {} scheduled jobs run by herald's scheduler, each tick once through the inbox: {}",
            jobs.jobs.len(),
            names.join(", ")
        ));
    }
    for (_, _, why) in &jobs.unreadable {
        report
            .findings
            .push(format!("a job of cron/jobs.json is not run: {why}"));
    }
    if !config.webhook.enabled && !jobs.jobs.is_empty() {
        report.findings.push(
            "the scheduled jobs run through herald's inbox and workers, which the webhook platform brings: set `platforms.webhook.enabled: true` (no route needed), or they do not run".into(),
        );
    }
    if from.join("cron/output").is_dir() {
        report.left_behind.push((
            "cron/output".into(),
            "the output of the jobs' past runs in Hermes; herald keeps each run's answer in its inbox (`herald inbox list`)".into(),
        ));
    }
    Ok(())
}

/// Whether `path` is a symbolic link (never followed: a link could lead anywhere, a
/// key into the system prompt or the whole disk into the home).
fn is_link(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

fn is_lock(shown: &str) -> bool {
    shown.starts_with("memories/") && shown.ends_with(".lock")
}

/// Whether `path` is a folder with nothing in it.
fn is_empty_dir(path: &Path) -> bool {
    std::fs::read_dir(path).is_ok_and(|mut d| d.next().is_none())
}

/// Every top-level entry of the Hermes home that was neither copied nor converted
/// (empty folders aside).
fn list_left_behind(from: &Path, report: &mut Report) -> anyhow::Result<()> {
    let mut names: Vec<String> = std::fs::read_dir(from)
        .with_context(|| format!("cannot read {}", from.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| !is_empty_dir(&e.path()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            !FILES.iter().any(|(f, _)| f == n)
                && !FOLDERS
                    .iter()
                    .any(|f| f.split('/').next() == Some(n.as_str()))
                && !CONVERTED.contains(&n.as_str())
        })
        .collect();
    names.sort();
    for name in names {
        let why = report::left_behind_reason(&name);
        report.left_behind.push((name, why.to_owned()));
    }
    report
        .left_behind
        .push(("Hermes's agent tools".into(), MISSING_TOOLS.to_owned()));
    Ok(())
}

/// The moved configuration's findings: `herald config check`'s own, the MCP servers
/// webhook runs go without, the ports Hermes's gateway serves, and bundled skills that
/// change what a migrated route does.
fn findings(config: &Config, report: &Report) -> Vec<String> {
    let targets = TargetSet::build(&TargetSettings {
        platforms: &config.platforms,
        env: &process_env,
    });
    let mut out = herald_gateway::findings::gather(config, &targets);
    out.extend(herald_gateway::findings::webhook_mcp_note(config));
    out.extend(hermes_ports(config));
    for skill in &report.bundled {
        let name = skill.trim_start_matches("skills/");
        for route in config
            .routes
            .iter()
            .filter(|r| r.skills.iter().any(|s| s == name))
        {
            out.push(format!(
                "route `{}` names the skill `{name}`, which the Hermes home did not have (Hermes ran the route without it); herald installed its own `{name}`, so the route's runs now follow it: remove {}/{name} to keep Hermes's behaviour",
                route.name,
                config.home.skills_dir().display()
            ));
        }
    }
    out
}

/// Hermes's gateway serves the webhook and API ports of this same `config.yaml`.
fn hermes_ports(config: &Config) -> Option<String> {
    let mut ports = Vec::new();
    if config.webhook.enabled && config.webhook.port != 0 {
        ports.push(format!("webhooks on {}", config.webhook.port));
    }
    if config.api_server.enabled && config.api_server.port != 0 {
        ports.push(format!("its API server on {}", config.api_server.port));
    }
    if ports.is_empty() {
        return None;
    }
    Some(format!(
        "Hermes's gateway serves {} from the same settings, the ports herald now takes: stop Hermes's gateway (`hermes gateway stop`, or its service) before `herald gateway run`, or change `platforms.webhook.extra.port` / `platforms.api_server.extra.port` in one of the two homes",
        ports.join(" and ")
    ))
}

/// herald's bundled skills (`webhook-subscriptions`, `github-code-review`), which a home
/// gets on its first start only when it has no `skills/` folder: after the copy it has
/// one, so they are installed here, beside the migrated skills and never over a migrated
/// skill of the same name. They are written into a staging folder inside the home first,
/// then moved in one by one.
fn install_bundled_skills(home: &Home, report: &mut Report) -> anyhow::Result<()> {
    let staging = Home::new(home.root().join(".herald-bundled-skills"));
    let cleanup = |dir: &Path| match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    };
    cleanup(staging.root())
        .with_context(|| format!("cannot remove {}", staging.root().display()))?;
    let names = herald_session::bundled_skills::install_if_new(&staging).with_context(|| {
        format!(
            "cannot write herald's skills into {}",
            staging.root().display()
        )
    })?;
    herald_config::home::create_private_dir(&home.skills_dir())
        .with_context(|| format!("cannot create {}", home.skills_dir().display()))?;
    for name in names {
        let target = home.skills_dir().join(name);
        if target.exists() {
            report.bundled_shadowed.push(format!("skills/{name}"));
            continue;
        }
        let source = staging.skills_dir().join(name);
        std::fs::rename(&source, &target)
            .with_context(|| format!("cannot move {} to {}", source.display(), target.display()))?;
        report.bundled.push(format!("skills/{name}"));
    }
    cleanup(staging.root())
        .with_context(|| format!("cannot remove {}", staging.root().display()))?;
    Ok(())
}

fn copy_file(
    source: &Path,
    target: &Path,
    private: bool,
    shown: &str,
    report: &mut Report,
) -> anyhow::Result<()> {
    if target.exists() {
        report.kept.push(shown.to_owned());
        return Ok(());
    }
    std::fs::copy(source, target)
        .with_context(|| format!("cannot copy {} to {}", source.display(), target.display()))?;
    if private {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(target, std::fs::Permissions::from_mode(0o600))?;
    }
    report.carried.push(shown.to_owned());
    Ok(())
}

/// Copies a folder's files (scripts keep their mode); symbolic links are not followed.
fn copy_tree(source: &Path, target: &Path, shown: &str, report: &mut Report) -> anyhow::Result<()> {
    herald_config::home::create_private_dir(target)
        .with_context(|| format!("cannot create {}", target.display()))?;
    let entries =
        std::fs::read_dir(source).with_context(|| format!("cannot read {}", source.display()))?;
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let shown = format!("{shown}/{}", name.to_string_lossy());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_tree(&entry.path(), &target.join(&name), &shown, report)?;
        } else if kind.is_file() && is_lock(&shown) {
            // A memory store's lock file belongs to the writers of that home.
        } else if kind.is_file() {
            copy_file(&entry.path(), &target.join(&name), false, &shown, report)?;
        } else {
            report.skipped.push(shown);
        }
    }
    Ok(())
}
