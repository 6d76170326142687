//! The dashboard token: a login for the dashboard when no API key serves (the webhook
//! listener alone), kept in `<home>/dashboard.token` (0600) and printed by
//! `herald dashboard token`.

use std::path::{Path, PathBuf};

/// Where the token is kept.
pub fn path(home: &Path) -> PathBuf {
    home.join("dashboard.token")
}

/// The token, when one was made.
pub fn read(home: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path(home)).ok()?;
    let token = text.trim().to_owned();
    (token.len() >= 32).then_some(token)
}

/// The token, made now when there is none (or `new`): 256 random bits, written whole
/// into a new 0600 file that replaces the old one.
pub fn ensure(home: &Path, new: bool) -> std::io::Result<String> {
    if !new && let Some(t) = read(home) {
        return Ok(t);
    }
    let token = random_hex();
    herald_config::default_config::write_private_replace(
        &path(home),
        format!("{token}\n").as_bytes(),
    )?;
    Ok(token)
}

/// 256 random bits (two v4 UUIDs' 122 each, and more) as 64 hex characters.
pub(crate) fn random_hex() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_made_once_kept_private_and_renewed_on_demand() {
        let home = std::env::temp_dir().join(format!("herald-token-{}", random_hex()));
        std::fs::create_dir_all(&home).unwrap();
        assert_eq!(read(&home), None);
        let first = ensure(&home, false).unwrap();
        assert_eq!(first.len(), 64);
        assert_eq!(ensure(&home, false).unwrap(), first);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(path(&home)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let second = ensure(&home, true).unwrap();
        assert_ne!(second, first);
        assert_eq!(read(&home).as_deref(), Some(second.as_str()));
        let _ = std::fs::remove_dir_all(&home);
    }
}
