//! Writing `webhook_subscriptions.json`, next to its reader ([`crate::subscriptions`]):
//! the file's entries in file order, a new entry written from a typed
//! [`NewSubscription`], and the whole file replaced atomically with mode 0600. Entries
//! this writer did not make (Hermes's, hand-written ones) are kept as they are.

use serde::Serialize;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// Why the file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SubscriptionsFileError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} is not valid JSON ({message}); fix or remove it")]
    Json { path: String, message: String },
    #[error("{path} is not a JSON object; fix or remove it")]
    NotObject { path: String },
    #[error("cannot replace {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
}

/// A subscription as `herald webhook subscribe` (and Hermes's `hermes webhook
/// subscribe`) writes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NewSubscription {
    pub description: String,
    pub events: Vec<String>,
    pub secret: String,
    pub prompt: String,
    pub skills: Vec<String>,
    pub deliver: String,
    /// `YYYY-MM-DDTHH:MM:SSZ`.
    pub created_at: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub deliver_only: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deliver_extra: Option<DeliverChat>,
    /// The sender's preset and its settings (`source:`, `public_key:`, ...).
    #[serde(flatten)]
    pub sender: SenderFields,
}

/// A subscription's `source:` and the settings its preset reads, as written to the file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SenderFields {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tolerance_seconds: Option<u32>,
}

/// `deliver_extra` with the chat to deliver to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeliverChat {
    pub chat_id: String,
}

/// One entry as `herald webhook list` shows it (fields read leniently).
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    pub name: String,
    pub description: Option<String>,
    pub events: Vec<String>,
    pub deliver: String,
    pub deliver_only: bool,
    pub script: Option<String>,
    pub source: Option<String>,
}

/// The subscriptions file, read whole (a missing file is empty).
#[derive(Debug)]
pub struct SubscriptionsFile {
    path: PathBuf,
    entries: Map<String, Value>,
}

impl SubscriptionsFile {
    pub fn open(path: &Path) -> Result<SubscriptionsFile, SubscriptionsFileError> {
        let shown = || path.display().to_string();
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(source) => {
                return Err(SubscriptionsFileError::Read {
                    path: shown(),
                    source,
                });
            }
        };
        let entries = match bytes.is_empty() {
            true => Map::new(),
            false => match serde_json::from_slice::<Value>(&bytes) {
                Ok(Value::Object(m)) => m,
                Ok(_) => return Err(SubscriptionsFileError::NotObject { path: shown() }),
                Err(e) => {
                    let message = e.to_string();
                    return Err(SubscriptionsFileError::Json {
                        path: shown(),
                        message,
                    });
                }
            },
        };
        Ok(SubscriptionsFile {
            path: path.to_path_buf(),
            entries,
        })
    }

    pub fn contains(&self, name: &str) -> bool {
        self.entries.contains_key(name)
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Adds or replaces `name`.
    pub fn put(&mut self, name: &str, sub: &NewSubscription) {
        let value = serde_json::to_value(sub).unwrap_or(Value::Null);
        self.entries.insert(name.to_owned(), value);
    }

    /// Removes `name`; false when there was none.
    pub fn remove(&mut self, name: &str) -> bool {
        self.entries.shift_remove(name).is_some()
    }

    /// Every entry in file order, as `herald webhook list` shows it.
    pub fn listed(&self) -> Vec<Listed> {
        let text = |e: &Value, k: &str| e.get(k).and_then(Value::as_str).map(str::to_owned);
        self.entries
            .iter()
            .map(|(name, e)| Listed {
                name: name.clone(),
                description: text(e, "description").filter(|d| !d.is_empty()),
                events: e
                    .get("events")
                    .and_then(|v| serde_json::from_value(v.clone()).ok())
                    .unwrap_or_default(),
                deliver: text(e, "deliver").unwrap_or_else(|| "log".into()),
                deliver_only: e.get("deliver_only") == Some(&Value::Bool(true)),
                script: text(e, "script"),
                source: text(e, "source"),
            })
            .collect()
    }

    /// Writes the file through a temporary file and an atomic rename, mode 0600 (its
    /// folder 0700 when made).
    pub fn save(&self) -> Result<(), SubscriptionsFileError> {
        let failed = |source| SubscriptionsFileError::Write {
            path: self.path.display().to_string(),
            source,
        };
        if let Some(dir) = self.path.parent() {
            crate::home::create_private_dir(dir).map_err(failed)?;
        }
        let mut text = serde_json::to_string_pretty(&Value::Object(self.entries.clone()))
            .map_err(|e| failed(std::io::Error::other(e)))?;
        text.push('\n');
        crate::default_config::write_private_replace(&self.path, text.as_bytes()).map_err(failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn sub(prompt: &str) -> NewSubscription {
        NewSubscription {
            description: "d".into(),
            events: vec!["push".into()],
            secret: "s".into(),
            prompt: prompt.into(),
            skills: vec![],
            deliver: "log".into(),
            created_at: "2026-12-02T00:00:00Z".into(),
            deliver_only: false,
            script: None,
            deliver_extra: Some(DeliverChat {
                chat_id: "-100".into(),
            }),
            sender: SenderFields::default(),
        }
    }

    #[test]
    fn entries_are_written_typed_others_kept_and_the_file_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hooks/webhook_subscriptions.json");
        let mut f = SubscriptionsFile::open(&path).unwrap();
        assert!(f.is_empty());
        f.put("b", &sub("two"));
        f.save().unwrap();
        let mut text = std::fs::read_to_string(&path).unwrap();
        text = text.replacen('{', "{\"a\": {\"prompt\": \"hand\", \"extra\": 1},", 1);
        std::fs::write(&path, text).unwrap();
        let mut f = SubscriptionsFile::open(&path).unwrap();
        f.put("c", &sub("three"));
        assert!(f.remove("b") && !f.remove("b"));
        f.save().unwrap();
        let back: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(back["a"], serde_json::json!({"prompt": "hand", "extra": 1}));
        assert_eq!(back["c"]["deliver_extra"]["chat_id"], "-100");
        assert!(back["c"].get("deliver_only").is_none() && back["c"].get("script").is_none());
        let names: Vec<String> = f.listed().into_iter().map(|l| l.name).collect();
        assert_eq!(names, ["a", "c"]);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        std::fs::write(&path, "[1]").unwrap();
        assert!(matches!(
            SubscriptionsFile::open(&path),
            Err(SubscriptionsFileError::NotObject { .. })
        ));
    }
}
