//! Writing `KEY=value` lines into a home's `.env` as Hermes's `save_env_value` does: a
//! key's first line (`KEY=` or `export KEY=`) is replaced, else the line is appended;
//! values with blanks, quotes or `#` are double-quoted; the file is replaced atomically
//! and is only its owner's (0600). Names that steer programs (`PATH`, `LD_PRELOAD` ...)
//! are refused.

use crate::ConfigError;
use std::path::Path;

/// Variables a skill's secret may never set (they change what runs, not what it knows).
const REFUSED: [&str; 24] = [
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "LD_DEBUG",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PYTHONUSERBASE",
    "NODE_OPTIONS",
    "NODE_PATH",
    "PATH",
    "SHELL",
    "BROWSER",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "GIT_SSH_COMMAND",
    "GIT_EXEC_PATH",
    "GIT_SHELL",
    "HERMES_HOME",
    "HERALD_HOME",
    "HERMES_PROFILE",
    "HERMES_CONFIG",
    "HERMES_ENV",
];

/// Whether `key` may be written: a variable name, and not one that steers programs.
pub fn writable(key: &str) -> bool {
    let mut chars = key.chars();
    let named = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    named && !REFUSED.contains(&key) && !key.starts_with("DYLD_")
}

/// `value` as a `.env` line writes it, read back unchanged by dotenvy (herald) and
/// python-dotenv (Hermes): bare when plain; in single quotes (literal) when it holds
/// `\` or `$`; else double-quoted.
fn quoted(value: &str) -> String {
    let plain = !value
        .chars()
        .any(|c| c.is_whitespace() || "#\"'\\$`".contains(c));
    if value.is_empty() || plain {
        return value.to_owned();
    }
    if !value.contains('\'') {
        return format!("'{value}'");
    }
    let escaped = value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('$', "\\$");
    format!("\"{escaped}\"")
}

/// Whether `line` sets `key` (`KEY=` or `export KEY=`).
fn defines(line: &str, key: &str) -> bool {
    let l = line.trim_start();
    let l = l.strip_prefix("export ").unwrap_or(l).trim_start();
    l.strip_prefix(key)
        .is_some_and(|r| r.trim_start().starts_with('='))
}

/// Sets `key` in the `.env` at `path` (made when missing). The value loses line breaks.
pub fn set_value(path: &Path, key: &str, value: &str) -> Result<(), ConfigError> {
    let write_err = |source| ConfigError::Write {
        path: path.to_path_buf(),
        source,
    };
    if !writable(key) {
        let why = format!("{key} may not be set from here");
        return Err(write_err(std::io::Error::other(why)));
    }
    let value: String = value.chars().filter(|c| *c != '\n' && *c != '\r').collect();
    let existing = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(source) => {
            return Err(ConfigError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let line = format!("{key}={}", quoted(&value));
    let mut lines: Vec<String> = existing.lines().map(str::to_owned).collect();
    match lines.iter_mut().find(|l| defines(l, key)) {
        Some(l) => *l = line,
        None => lines.push(line),
    }
    let mut text = lines.join("\n");
    text.push('\n');
    crate::default_config::write_private_replace(path, text.as_bytes()).map_err(write_err)?;
    crate::config::remember_env(key, &value);
    Ok(())
}

/// Drops `key`'s lines from the `.env` at `path`; whether there was one.
pub fn remove_value(path: &Path, key: &str) -> Result<bool, ConfigError> {
    let existing = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(source) => {
            return Err(ConfigError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let kept: Vec<&str> = existing.lines().filter(|l| !defines(l, key)).collect();
    if kept.len() == existing.lines().count() {
        return Ok(false);
    }
    let mut text = kept.join("\n");
    text.push('\n');
    crate::default_config::write_private_replace(path, text.as_bytes()).map_err(|source| {
        ConfigError::Write {
            path: path.to_path_buf(),
            source,
        }
    })?;
    crate::config::remember_env(key, "");
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_replaced_in_place_quoted_when_needed_and_the_file_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let env = dir.path().join(".env");
        std::fs::write(&env, "A=1\nexport TOKEN=old\nB=2\n").unwrap();
        set_value(&env, "TOKEN", "new value #1").unwrap();
        set_value(&env, "OTHER", "plain\n").unwrap();
        let text = std::fs::read_to_string(&env).unwrap();
        assert_eq!(text, "A=1\nTOKEN='new value #1'\nB=2\nOTHER=plain\n");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&env).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(set_value(&env, "LD_PRELOAD", "x").is_err());
        // What dotenvy reads back is what was written, whatever the characters.
        let tricky = ["abc\\def", "pa$$word", "it's \"q\" $X \\n", "`cmd`", "a b"];
        for (i, value) in tricky.iter().enumerate() {
            set_value(&env, &format!("T{i}"), value).unwrap();
        }
        let read: std::collections::HashMap<String, String> = dotenvy::from_path_iter(&env)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        for (i, value) in tricky.iter().enumerate() {
            assert_eq!(read[&format!("T{i}")], *value, "{value}");
        }
        assert!(set_value(&env, "not a name", "x").is_err());
        assert_eq!(crate::process_env("OTHER").as_deref(), Some("plain"));
        assert!(remove_value(&env, "OTHER").unwrap());
        assert!(!remove_value(&env, "OTHER").unwrap());
        assert!(!std::fs::read_to_string(&env).unwrap().contains("OTHER"));
    }
}
