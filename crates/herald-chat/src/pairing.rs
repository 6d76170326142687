//! Pairing, as Hermes's `gateway/pairing.py` keeps it, file for file: an unknown user
//! in a private chat gets a code (8 characters of an unambiguous alphabet, valid an
//! hour, one request per user per 10 minutes, 3 pending per platform); the owner
//! approves it (`herald pairing approve telegram CODE`); 5 wrong codes lock approvals
//! for an hour. Only a salted SHA-256 of a code is stored; the files are 0600 in
//! `<home>/platforms/pairing/` (or the legacy `<home>/pairing/` when it has content).
//! Changes are made under a lock file, so the gateway and the CLI never lose each
//! other's writes.

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

pub const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
pub const CODE_LENGTH: usize = 8;
const CODE_TTL_SECONDS: f64 = 3600.0;
const RATE_LIMIT_SECONDS: f64 = 600.0;
const LOCKOUT_SECONDS: f64 = 3600.0;
const MAX_PENDING_PER_PLATFORM: usize = 3;
const MAX_FAILED_ATTEMPTS: i64 = 5;

/// Why the store could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("pairing store {path}: {source}")]
pub struct PairingError {
    path: PathBuf,
    source: std::io::Error,
}

/// A pending request, as `pairing list` shows it (the code is never shown).
#[derive(Debug, Clone, PartialEq)]
pub struct PendingRequest {
    pub platform: String,
    /// The first 8 hex digits of the code's hash.
    pub code: String,
    pub user_id: String,
    pub user_name: String,
    pub age_minutes: i64,
}

/// An approved user.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovedUser {
    pub platform: String,
    pub user_id: String,
    pub user_name: String,
}

/// What a stranger's request came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requested {
    /// A code to give them.
    Code(String),
    /// They asked within the last 10 minutes: no answer at all.
    TooSoon,
    /// Three codes wait already, or approvals are locked: they are told to try later
    /// (and this counts as their request, as in Hermes).
    TooMany,
}

/// The pairing files of one home.
#[derive(Debug, Clone)]
pub struct PairingStore {
    dir: PathBuf,
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl PairingStore {
    /// The store of the home at `root`: `platforms/pairing/`, or the legacy
    /// `pairing/` when it holds anything (as Hermes's `get_hermes_dir`).
    pub fn of_home(root: &Path) -> PairingStore {
        let legacy = root.join("pairing");
        let has_content = std::fs::read_dir(&legacy).is_ok_and(|mut d| d.next().is_some());
        let dir = match has_content {
            true => legacy,
            false => root.join("platforms").join("pairing"),
        };
        PairingStore { dir }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn err(&self, path: &Path, source: std::io::Error) -> PairingError {
        PairingError {
            path: path.to_path_buf(),
            source,
        }
    }

    /// Runs `change` holding the store's lock (against the gateway and the CLI).
    fn locked<T>(
        &self,
        change: impl FnOnce(&Self) -> Result<T, PairingError>,
    ) -> Result<T, PairingError> {
        std::fs::create_dir_all(&self.dir).map_err(|e| self.err(&self.dir, e))?;
        let lock_path = self.path(".lock");
        let lock = File::create(&lock_path).map_err(|e| self.err(&lock_path, e))?;
        lock.lock().map_err(|e| self.err(&lock_path, e))?;
        let out = change(self);
        let _ = lock.unlock();
        out
    }

    /// A JSON object file; an unreadable or malformed one reads as empty, as Hermes.
    fn load(&self, name: &str) -> Map<String, Value> {
        let path = self.path(name);
        match std::fs::read_to_string(&path) {
            Ok(text) => match serde_json::from_str(&text) {
                Ok(Value::Object(m)) => m,
                _ => Map::new(),
            },
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                tracing::warn!(path = %path.display(), "pairing file exists but is not readable by this user");
                Map::new()
            }
            Err(_) => Map::new(),
        }
    }

    /// Writes a file whole (a temporary file renamed over it), mode 0600.
    fn save(&self, name: &str, data: &Map<String, Value>) -> Result<(), PairingError> {
        let path = self.path(name);
        let tmp = self.path(&format!(".{name}.tmp"));
        let text = serde_json::to_string_pretty(data).unwrap_or_else(|_| "{}".into());
        let write = || -> std::io::Result<()> {
            let mut f = private_file(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
        };
        write().map_err(|e| self.err(&path, e))
    }

    /// Whether `user_id` was approved on `platform`.
    pub fn is_approved(&self, platform: &str, user_id: &str) -> bool {
        self.load(&format!("{platform}-approved.json"))
            .contains_key(user_id.trim())
    }

    /// How many minutes approvals on `platform` stay locked, when they are.
    pub fn locked_minutes(&self, platform: &str) -> Option<i64> {
        let limits = self.load("_rate_limits.json");
        let until = limits
            .get(&format!("_lockout:{platform}"))
            .and_then(Value::as_f64)?;
        let left = until - now();
        (left > 0.0).then_some((left / 60.0) as i64)
    }

    /// Whether `user_id` asked for a code within the last 10 minutes (they get no
    /// answer at all then, as in Hermes).
    pub fn rate_limited(&self, platform: &str, user_id: &str) -> bool {
        let key = format!("{platform}:{}", user_id.trim());
        self.load("_rate_limits.json")
            .get(&key)
            .and_then(Value::as_f64)
            .is_some_and(|last| now() - last < RATE_LIMIT_SECONDS)
    }

    /// A stranger asks: a code, silence, or "too many requests".
    pub fn request(
        &self,
        platform: &str,
        user_id: &str,
        user_name: &str,
    ) -> Result<Requested, PairingError> {
        if self.rate_limited(platform, user_id) {
            return Ok(Requested::TooSoon);
        }
        if let Some(code) = self.generate_code(platform, user_id, user_name)? {
            return Ok(Requested::Code(code));
        }
        self.locked(|s| {
            let mut limits = s.load("_rate_limits.json");
            limits.insert(format!("{platform}:{}", user_id.trim()), json!(now()));
            s.save("_rate_limits.json", &limits)
        })?;
        Ok(Requested::TooMany)
    }

    /// A new code for `user_id`, or `None` when the user asked within 10 minutes, 3
    /// codes wait already, or approvals are locked.
    pub fn generate_code(
        &self,
        platform: &str,
        user_id: &str,
        user_name: &str,
    ) -> Result<Option<String>, PairingError> {
        self.locked(|s| {
            s.cleanup_expired(platform)?;
            let t = now();
            let mut limits = s.load("_rate_limits.json");
            if locked_out(&limits, platform, t) {
                return Ok(None);
            }
            let key = format!("{platform}:{}", user_id.trim());
            if limits
                .get(&key)
                .and_then(Value::as_f64)
                .is_some_and(|last| t - last < RATE_LIMIT_SECONDS)
            {
                return Ok(None);
            }
            let pending_name = format!("{platform}-pending.json");
            let mut pending = s.load(&pending_name);
            if pending.len() >= MAX_PENDING_PER_PLATFORM {
                return Ok(None);
            }
            let code = new_code();
            let salt: [u8; 16] = rand::random();
            let entry_id = hex::encode(rand::random::<[u8; 8]>());
            pending.insert(
                entry_id,
                json!({
                    "hash": hash_code(&code, &salt),
                    "salt": hex::encode(salt),
                    "user_id": user_id.trim(),
                    "user_name": user_name,
                    "created_at": t,
                }),
            );
            s.save(&pending_name, &pending)?;
            limits.insert(key, json!(t));
            s.save("_rate_limits.json", &limits)?;
            Ok(Some(code))
        })
    }

    /// Approves a code: the user it was given to (id, name), or `None` when no
    /// pending code matches (a failed attempt) or approvals are locked.
    pub fn approve_code(
        &self,
        platform: &str,
        code: &str,
    ) -> Result<Option<(String, String)>, PairingError> {
        self.locked(|s| {
            s.cleanup_expired(platform)?;
            let code = code.trim().to_uppercase();
            let t = now();
            let mut limits = s.load("_rate_limits.json");
            if locked_out(&limits, platform, t) {
                return Ok(None);
            }
            let pending_name = format!("{platform}-pending.json");
            let mut pending = s.load(&pending_name);
            let Some(key) = pending
                .iter()
                .find(|(_, e)| matches(e, &code))
                .map(|(k, _)| k.clone())
            else {
                record_failure(&mut limits, platform, t);
                s.save("_rate_limits.json", &limits)?;
                return Ok(None);
            };
            let entry = pending.remove(&key).unwrap_or_default();
            s.save(&pending_name, &pending)?;
            let user_id = entry["user_id"].as_str().unwrap_or_default().to_owned();
            let user_name = entry["user_name"].as_str().unwrap_or_default().to_owned();
            let approved_name = format!("{platform}-approved.json");
            let mut approved = s.load(&approved_name);
            approved.insert(
                user_id.clone(),
                json!({"user_name": user_name, "approved_at": t}),
            );
            s.save(&approved_name, &approved)?;
            Ok(Some((user_id, user_name)))
        })
    }

    /// Takes a user's approval back; whether there was one.
    pub fn revoke(&self, platform: &str, user_id: &str) -> Result<bool, PairingError> {
        self.locked(|s| {
            let name = format!("{platform}-approved.json");
            let mut approved = s.load(&name);
            let found = approved.remove(user_id.trim()).is_some();
            if found {
                s.save(&name, &approved)?;
            }
            Ok(found)
        })
    }

    /// Drops every pending request (of one platform, or all); how many.
    pub fn clear_pending(&self, platform: Option<&str>) -> Result<usize, PairingError> {
        self.locked(|s| {
            let mut count = 0;
            for p in s.platforms(platform, "pending") {
                let name = format!("{p}-pending.json");
                count += s.load(&name).len();
                s.save(&name, &Map::new())?;
            }
            Ok(count)
        })
    }

    /// The pending requests (expired ones dropped first).
    pub fn list_pending(
        &self,
        platform: Option<&str>,
    ) -> Result<Vec<PendingRequest>, PairingError> {
        self.locked(|s| {
            let t = now();
            let mut out = Vec::new();
            for p in s.platforms(platform, "pending") {
                s.cleanup_expired(&p)?;
                for info in s.load(&format!("{p}-pending.json")).values() {
                    let Some(created) = info["created_at"].as_f64() else {
                        continue;
                    };
                    out.push(PendingRequest {
                        platform: p.clone(),
                        code: info["hash"]
                            .as_str()
                            .map_or("legacy".into(), |h| h.chars().take(8).collect()),
                        user_id: info["user_id"].as_str().unwrap_or_default().into(),
                        user_name: info["user_name"].as_str().unwrap_or_default().into(),
                        age_minutes: ((t - created) / 60.0) as i64,
                    });
                }
            }
            Ok(out)
        })
    }

    /// The approved users.
    pub fn list_approved(&self, platform: Option<&str>) -> Vec<ApprovedUser> {
        let mut out = Vec::new();
        for p in self.platforms(platform, "approved") {
            for (user_id, info) in self.load(&format!("{p}-approved.json")) {
                out.push(ApprovedUser {
                    platform: p.clone(),
                    user_id,
                    user_name: info["user_name"].as_str().unwrap_or_default().into(),
                });
            }
        }
        out
    }

    /// Platforms with a `<platform>-<suffix>.json`, or just `only`.
    fn platforms(&self, only: Option<&str>, suffix: &str) -> Vec<String> {
        if let Some(p) = only {
            return vec![p.to_owned()];
        }
        let tail = format!("-{suffix}.json");
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut names: Vec<String> = dir
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter_map(|n| n.strip_suffix(&tail).map(str::to_owned))
            .filter(|p| !p.starts_with('_'))
            .collect();
        names.sort();
        names
    }

    /// Drops pending codes older than an hour (and malformed ones).
    fn cleanup_expired(&self, platform: &str) -> Result<(), PairingError> {
        let name = format!("{platform}-pending.json");
        let mut pending = self.load(&name);
        let t = now();
        let before = pending.len();
        pending.retain(|_, e| {
            e["created_at"]
                .as_f64()
                .is_some_and(|c| t - c <= CODE_TTL_SECONDS)
        });
        if pending.len() != before {
            self.save(&name, &pending)?;
        }
        Ok(())
    }
}

/// A file created (or truncated) with mode 0600.
fn private_file(path: &Path) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}

fn new_code() -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    (0..CODE_LENGTH)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect()
}

/// SHA-256 of the salt then the code, in hex (Hermes's `_hash_code`).
fn hash_code(code: &str, salt: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(salt);
    h.update(code.as_bytes());
    hex::encode(h.finalize())
}

/// Whether a pending entry is this code's (compared in constant time).
fn matches(entry: &Value, code: &str) -> bool {
    let (Some(salt), Some(hash)) = (entry["salt"].as_str(), entry["hash"].as_str()) else {
        return false;
    };
    let Ok(salt) = hex::decode(salt) else {
        return false;
    };
    let candidate = hash_code(code, &salt);
    subtle::ConstantTimeEq::ct_eq(candidate.as_bytes(), hash.as_bytes()).into()
}

fn locked_out(limits: &Map<String, Value>, platform: &str, t: f64) -> bool {
    limits
        .get(&format!("_lockout:{platform}"))
        .and_then(Value::as_f64)
        .is_some_and(|until| t < until)
}

fn record_failure(limits: &mut Map<String, Value>, platform: &str, t: f64) {
    let key = format!("_failures:{platform}");
    let fails = limits.get(&key).and_then(Value::as_i64).unwrap_or(0) + 1;
    if fails >= MAX_FAILED_ATTEMPTS {
        limits.insert(format!("_lockout:{platform}"), json!(t + LOCKOUT_SECONDS));
        limits.insert(key, json!(0));
        tracing::warn!(
            platform,
            "pairing approvals locked for an hour after 5 wrong codes"
        );
    } else {
        limits.insert(key, json!(fails));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_is_approved_once_and_the_files_hold_only_its_hash() {
        let home = tempfile::tempdir().unwrap();
        let store = PairingStore::of_home(home.path());
        let code = store
            .generate_code("telegram", "42", "Ann")
            .unwrap()
            .unwrap();
        assert_eq!(code.len(), CODE_LENGTH);
        assert!(code.bytes().all(|b| ALPHABET.contains(&b)));
        let pending = std::fs::read_to_string(store.dir().join("telegram-pending.json")).unwrap();
        assert!(!pending.contains(&code));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(store.dir().join("telegram-pending.json"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // One request per user per 10 minutes.
        assert_eq!(store.generate_code("telegram", "42", "Ann").unwrap(), None);
        assert_eq!(store.list_pending(None).unwrap().len(), 1);
        let who = store
            .approve_code("telegram", &code.to_lowercase())
            .unwrap();
        assert_eq!(who, Some(("42".into(), "Ann".into())));
        assert!(store.is_approved("telegram", "42"));
        assert_eq!(store.approve_code("telegram", &code).unwrap(), None);
        assert!(store.revoke("telegram", "42").unwrap());
        assert!(!store.is_approved("telegram", "42"));
    }

    #[test]
    fn three_codes_wait_at_most_and_five_wrong_codes_lock_approvals() {
        let home = tempfile::tempdir().unwrap();
        let store = PairingStore::of_home(home.path());
        let codes: Vec<_> = (0..4)
            .map(|u| store.generate_code("telegram", &u.to_string(), "").unwrap())
            .collect();
        assert!(codes[..3].iter().all(Option::is_some));
        assert_eq!(codes[3], None);
        for _ in 0..5 {
            assert_eq!(store.approve_code("telegram", "AAAAAAAA").unwrap(), None);
        }
        let right = codes[0].clone().unwrap();
        assert_eq!(
            store.approve_code("telegram", &right).unwrap(),
            None,
            "locked"
        );
        assert_eq!(store.clear_pending(None).unwrap(), 3);
    }

    #[test]
    fn a_legacy_folder_with_content_is_used() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join("pairing")).unwrap();
        std::fs::write(
            home.path().join("pairing/telegram-approved.json"),
            r#"{"7": {"user_name": "x", "approved_at": 1}}"#,
        )
        .unwrap();
        let store = PairingStore::of_home(home.path());
        assert!(store.is_approved("telegram", "7"));
        assert_eq!(store.list_approved(None)[0].user_id, "7");
    }
}
