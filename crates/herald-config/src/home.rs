//! herald's home folder (`HERALD_HOME`, default `~/.herald`), laid out like a Hermes home.

use std::path::{Path, PathBuf};

/// The home folder and the files in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    root: PathBuf,
}

impl Home {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Home { root: root.into() }
    }

    /// `HERALD_HOME`, else `~/.herald`.
    pub fn from_env() -> Self {
        match std::env::var_os("HERALD_HOME").filter(|v| !v.is_empty()) {
            Some(v) => Home::new(v),
            None => Home::new(user_home().join(".herald")),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
    /// Creates the home folder if it does not exist yet, owner-only (0700): it holds
    /// secrets (`.env`, `config.yaml`) and the stored events. An existing folder is
    /// left as it is.
    pub fn create(&self) -> std::io::Result<()> {
        create_private_dir(&self.root)
    }
    pub fn config_file(&self) -> PathBuf {
        self.root.join("config.yaml")
    }
    pub fn env_file(&self) -> PathBuf {
        self.root.join(".env")
    }
    /// The "always" answers given on attended surfaces (kept apart from
    /// `command_allowlist`; see [`crate::always_approvals`]).
    pub fn always_approvals_file(&self) -> PathBuf {
        self.root.join(crate::always_approvals::FILE_NAME)
    }
    pub fn subscriptions_file(&self) -> PathBuf {
        self.root.join("webhook_subscriptions.json")
    }
    pub fn scripts_dir(&self) -> PathBuf {
        self.root.join("scripts")
    }
    /// Creates `scripts/` if missing, owner-only (0700): route scripts run with herald's
    /// rights, so nobody else may add one.
    pub fn create_scripts_dir(&self) -> std::io::Result<()> {
        create_private_dir(&self.scripts_dir())
    }
    pub fn profiles_dir(&self) -> PathBuf {
        self.root.join("profiles")
    }
    /// The session store (same tables as Hermes's `state.db`).
    pub fn state_db_file(&self) -> PathBuf {
        self.root.join("state.db")
    }
    /// Written by a running gateway (pid, listen addresses), removed when it stops; read by
    /// `herald gateway status`.
    pub fn gateway_state_file(&self) -> PathBuf {
        self.root.join("gateway.json")
    }
    /// The skills the agent can load (`skills/<name>/SKILL.md`).
    pub fn skills_dir(&self) -> PathBuf {
        self.root.join("skills")
    }
    /// The store: inbox, dedup keys, deliveries.
    pub fn database_file(&self) -> PathBuf {
        self.root.join("herald.db")
    }
}

/// The user's home folder (`.` when there is none).
pub fn user_home() -> PathBuf {
    dirs::home_dir().unwrap_or_else(|| PathBuf::from("."))
}

/// Creates `dir` and any missing parents, owner-only (0700) where created whatever the
/// umask; folders that exist keep their permissions.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let missing: Vec<&Path> = dir.ancestors().take_while(|d| !d.exists()).collect();
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)?;
    #[cfg(unix)]
    for created in missing {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(created, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}
