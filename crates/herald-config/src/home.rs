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
    /// A path as written in config (`in_file`, `skills.external_dirs`, a script) resolved
    /// against this home: see [`resolve_home_path`].
    pub fn resolve(&self, raw: &str) -> PathBuf {
        resolve_home_path(raw, &self.root)
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
/// A name (a session id) as one folder name: anything but `[A-Za-z0-9_-]` becomes `_`,
/// so it can never climb out of its parent.
pub fn folder_name(name: &str) -> String {
    name.chars()
        .map(
            |c| match c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                true => c,
                false => '_',
            },
        )
        .collect()
}

pub fn user_home() -> PathBuf {
    dirs::home_dir().unwrap_or_else(|| PathBuf::from("."))
}

/// `~/rest` as a path in the user's home; any other text as it is.
pub fn expand_tilde(raw: &str) -> PathBuf {
    match raw.strip_prefix("~/") {
        Some(rest) => user_home().join(rest),
        None => PathBuf::from(raw),
    }
}

/// Resolves `in_file` paths: `$VAR` expanded, `~/.hermes` and `~/.herald` map to the
/// home, other `~` to the user's home, relative paths to the home.
pub fn resolve_home_path(raw: &str, home: &Path) -> PathBuf {
    let expanded = expand_env(raw.trim());
    let expanded = expanded.trim();
    for prefix in ["~/.hermes", "~/.herald"] {
        if expanded == prefix {
            return home.to_path_buf();
        }
        if let Some(rest) = expanded
            .strip_prefix(prefix)
            .and_then(|r| r.strip_prefix('/'))
        {
            return home.join(rest);
        }
    }
    if expanded == "~" {
        return user_home();
    }
    if expanded.starts_with("~/") {
        return expand_tilde(expanded);
    }
    let path = PathBuf::from(expanded);
    if path.is_absolute() {
        path
    } else {
        home.join(path)
    }
}

/// `$VAR` and `${VAR}` expansion; unknown variables are left as written (Python's
/// `os.path.expandvars`).
pub fn expand_env(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        let (name, consumed) = if let Some(inner) = after.strip_prefix('{') {
            match inner.find('}') {
                Some(end) => (&inner[..end], end + 2),
                None => ("", 0),
            }
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], end)
        };
        match std::env::var(name).ok().filter(|_| !name.is_empty()) {
            Some(value) => out.push_str(&value),
            None => out.push_str(&rest[pos..pos + 1 + consumed]),
        }
        rest = &after[consumed..];
    }
    out.push_str(rest);
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn home_paths() {
        let home = Path::new("/h");
        assert_eq!(
            resolve_home_path("~/.hermes/x.txt", home),
            PathBuf::from("/h/x.txt")
        );
        assert_eq!(
            resolve_home_path(" lists/a ", home),
            PathBuf::from("/h/lists/a")
        );
        assert_eq!(resolve_home_path("/abs", home), PathBuf::from("/abs"));
        assert_eq!(expand_env("$HERALD_NO_SUCH_VAR/x"), "$HERALD_NO_SUCH_VAR/x");
    }
}
