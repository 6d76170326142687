//! `herald setup --from-hermes [PATH]`: copy what a Hermes home holds that herald reads
//! (the same file names and keys) into the herald home. The Hermes home is only read;
//! a file that already exists in the herald home is kept, never overwritten.

use anyhow::Context;
use herald_config::Home;
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
const FOLDERS: &[&str] = &["scripts", "skills", "plugins"];

/// `HERMES_HOME`, else `~/.hermes`.
pub fn default_hermes_home() -> PathBuf {
    match std::env::var_os("HERMES_HOME").filter(|v| !v.is_empty()) {
        Some(v) => PathBuf::from(v),
        None => herald_config::home::user_home().join(".hermes"),
    }
}

/// What one copy did.
#[derive(Default)]
struct Report {
    copied: Vec<String>,
    kept: Vec<String>,
    skipped: Vec<String>,
    /// herald's bundled skills installed beside the migrated ones.
    bundled: Vec<String>,
    /// Bundled skills not installed because a migrated skill has the name.
    bundled_shadowed: Vec<String>,
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
        if source.is_file() {
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
        if source.is_dir() {
            copy_tree(&source, &home.root().join(folder), folder, &mut report)?;
        }
    }
    if skills_are_new {
        install_bundled_skills(home, &mut report)?;
    }
    print_report(&from, home, &report);
    Ok(ExitCode::SUCCESS)
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
    report.copied.push(shown.to_owned());
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
        } else if kind.is_file() {
            copy_file(&entry.path(), &target.join(&name), false, &shown, report)?;
        } else {
            report.skipped.push(shown);
        }
    }
    Ok(())
}

fn print_report(from: &Path, home: &Home, report: &Report) {
    outln!(
        "Copied from {} to {} (the Hermes home is unchanged):",
        from.display(),
        home.root().display()
    );
    for name in &report.copied {
        outln!("  copied  {name}");
    }
    for name in &report.kept {
        outln!("  kept    {name} (already in the herald home)");
    }
    for name in &report.skipped {
        outln!("  skipped {name} (not a regular file)");
    }
    if report.copied.is_empty() {
        outln!("  nothing new to copy");
    }
    for name in &report.bundled {
        outln!("  added   {name} (a skill herald ships)");
    }
    for name in &report.bundled_shadowed {
        outln!("  kept    {name} (the migrated one; herald's skill of that name is not installed)");
    }
    outln!("Check it with `herald config check`, then start with `herald gateway run`.");
}
