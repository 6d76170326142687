//! The skills herald ships, which its own docs rely on: `webhook-subscriptions` (the
//! agent sets up routes with `herald webhook ...`) and `github-code-review`. Installed
//! into `<home>/skills/` the first time herald meets a home without a skills folder;
//! never over a user's files.

use herald_config::Home;

/// (folder, SKILL.md text) of each shipped skill.
const BUNDLED: &[(&str, &str)] = &[
    (
        "webhook-subscriptions",
        include_str!("../skills/webhook-subscriptions/SKILL.md"),
    ),
    (
        "github-code-review",
        include_str!("../skills/github-code-review/SKILL.md"),
    ),
];

/// Installs the shipped skills when the home has no `skills/` folder yet; returns the
/// names installed.
pub fn install_if_new(home: &Home) -> std::io::Result<Vec<&'static str>> {
    let root = home.skills_dir();
    if root.exists() {
        return Ok(Vec::new());
    }
    let mut installed = Vec::new();
    for (name, text) in BUNDLED {
        let dir = root.join(name);
        herald_config::home::create_private_dir(&dir)?;
        let file = dir.join("SKILL.md");
        if !file.exists() {
            std::fs::write(&file, text)?;
            installed.push(*name);
        }
    }
    Ok(installed)
}

/// [`install_if_new`], reporting a failure as a warning (skills are never worth a
/// failed start).
pub fn install_quietly(home: &Home) {
    match install_if_new(home) {
        Ok(names) if !names.is_empty() => {
            tracing::info!(skills = ?names, "installed herald's skills into {}", home.skills_dir().display());
        }
        Ok(_) => {}
        Err(e) => tracing::warn!("could not install herald's skills: {e}"),
    }
}
