//! Each method's params (rpc-gateway.md §2–§5) as a typed struct.
//!
//! Fields read leniently, as the gateway always has: a text field that is not a
//! non-empty string is absent, a flag that is not `true` is false, a count that is not
//! a non-negative integer is absent, and unknown fields are ignored. So reading params
//! never fails; a method refuses a missing field it needs with its own code
//! ([`required`]).

use crate::errors::RpcError;
use serde::Deserialize;
use serde::de::{DeserializeOwned, Deserializer};
use serde_json::{Map, Value};

/// Params as they arrive (a JSON object).
pub type Params = Map<String, Value>;

/// Reads the params object `p` into a method's params, or says why it could not
/// (every field reads leniently, so only a bug in a params type fails).
pub fn try_read<T: DeserializeOwned>(p: &Value) -> Result<T, serde_json::Error> {
    T::deserialize(p)
}

/// Reads the params object `p` into a method's params.
pub fn read<T: DeserializeOwned + Default>(p: &Value) -> T {
    try_read(p).unwrap_or_else(|e| {
        tracing::error!(error = %e, "params did not read");
        T::default()
    })
}

/// A text param that must be there; `code` otherwise.
pub fn required(value: Option<String>, key: &str, code: i64) -> Result<String, RpcError> {
    value.ok_or_else(|| RpcError::new(code, format!("{key} is required")))
}

/// A non-empty trimmed string.
fn text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_owned()),
        _ => None,
    })
}

/// A setting's value: a string (trimmed), or a boolean or number as its text.
fn scalar<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_owned()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    })
}

/// A string as sent (a live session id is matched exactly).
fn exact<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) => Some(s),
        _ => None,
    })
}

/// A field that is there: its string, or `""` when it is not one.
fn given<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(Some(exact(d)?.unwrap_or_default()))
}

fn flag<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(matches!(Value::deserialize(d)?, Value::Bool(true)))
}

/// A flag that is true unless it is `false`.
fn flag_or_yes<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(!matches!(Value::deserialize(d)?, Value::Bool(false)))
}

fn yes() -> bool {
    true
}

fn count<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    let n = Value::deserialize(d)?.as_u64();
    Ok(n.and_then(|n| usize::try_from(n).ok()))
}

fn number<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    Ok(Value::deserialize(d)?.as_f64())
}

/// The live session a call names (most methods take no more).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Target {
    #[serde(deserialize_with = "exact")]
    pub session_id: Option<String>,
}

/// `reload.mcp`: `confirm` (do it now) and `always` (with `confirm`: never ask again).
#[derive(Debug, Default, Deserialize)]
pub struct McpReload {
    #[serde(default, deserialize_with = "exact")]
    pub session_id: Option<String>,
    #[serde(default)]
    pub confirm: bool,
    #[serde(default)]
    pub always: bool,
}

/// `complete.slash` (`text`) and `complete.path` (`word`, `cwd`), read as typed.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Complete {
    #[serde(deserialize_with = "exact")]
    pub session_id: Option<String>,
    #[serde(deserialize_with = "exact")]
    pub text: Option<String>,
    #[serde(deserialize_with = "exact")]
    pub word: Option<String>,
    #[serde(deserialize_with = "text")]
    pub cwd: Option<String>,
}

/// `paste.collapse` and `input.detect_drop` (the text as typed).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Paste {
    #[serde(deserialize_with = "exact")]
    pub session_id: Option<String>,
    #[serde(deserialize_with = "exact")]
    pub text: Option<String>,
}

/// `tools.configure` and the model picker's `model.save_key` / `model.disconnect`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Configure {
    #[serde(deserialize_with = "text")]
    pub action: Option<String>,
    pub names: Vec<Value>,
    #[serde(deserialize_with = "text")]
    pub slug: Option<String>,
    #[serde(deserialize_with = "text")]
    pub api_key: Option<String>,
}

/// `shell.exec`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Shell {
    #[serde(deserialize_with = "text")]
    pub command: Option<String>,
}

/// The hubs: `skills.manage`, `plugins.manage`, `rollback.*`, and the answers of the
/// features herald lacks (`voice.toggle`, `browser.manage` ...).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Hub {
    #[serde(deserialize_with = "exact")]
    pub session_id: Option<String>,
    #[serde(deserialize_with = "text")]
    pub action: Option<String>,
    #[serde(deserialize_with = "text")]
    pub query: Option<String>,
    #[serde(deserialize_with = "text")]
    pub name: Option<String>,
    #[serde(deserialize_with = "text")]
    pub hash: Option<String>,
    #[serde(deserialize_with = "flag")]
    pub enable: bool,
}

/// `session.create`.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub struct Create {
    #[serde(deserialize_with = "text")]
    pub cwd: Option<String>,
    #[serde(deserialize_with = "text")]
    pub model: Option<String>,
    #[serde(deserialize_with = "text")]
    pub title: Option<String>,
    #[serde(default = "yes", deserialize_with = "flag_or_yes")]
    pub close_on_disconnect: bool,
}

/// `session.resume`.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub struct Resume {
    /// The stored session's id.
    #[serde(deserialize_with = "text")]
    pub session_id: Option<String>,
    #[serde(deserialize_with = "text")]
    pub cwd: Option<String>,
    #[serde(default = "yes", deserialize_with = "flag_or_yes")]
    pub close_on_disconnect: bool,
}

/// `session.delete`: a stored session's id.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub struct Stored {
    #[serde(deserialize_with = "text")]
    pub session_id: Option<String>,
}

/// `session.list`.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub struct List {
    #[serde(deserialize_with = "count")]
    pub limit: Option<usize>,
}

/// `session.title`: reads the title without `title`, sets it with one.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub struct Title {
    #[serde(deserialize_with = "exact")]
    pub session_id: Option<String>,
    #[serde(deserialize_with = "given")]
    pub title: Option<String>,
}

/// `session.steer`, `prompt.submit` (with its rewind) and `prompt.background`.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub struct Prompt {
    #[serde(deserialize_with = "exact")]
    pub session_id: Option<String>,
    #[serde(deserialize_with = "text")]
    pub text: Option<String>,
    pub truncate_before_row_id: Option<Value>,
    /// Newer upstream's message id; herald's messages have one id, the row id.
    pub truncate_before_message_id: Option<Value>,
    pub truncate_before_user_ordinal: Option<Value>,
    pub confirm_truncate: Option<Value>,
    pub confirm_empty_truncate: Option<Value>,
}

/// `session.branch`.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub struct Branch {
    #[serde(deserialize_with = "exact")]
    pub session_id: Option<String>,
    #[serde(deserialize_with = "text")]
    pub name: Option<String>,
}

/// `session.compress`.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub struct Compress {
    #[serde(deserialize_with = "exact")]
    pub session_id: Option<String>,
    #[serde(deserialize_with = "text")]
    pub focus_topic: Option<String>,
}

/// `approval.respond`.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub struct Approval {
    #[serde(deserialize_with = "exact")]
    pub session_id: Option<String>,
    #[serde(deserialize_with = "text")]
    pub request_id: Option<String>,
    #[serde(deserialize_with = "text")]
    pub choice: Option<String>,
    #[serde(deserialize_with = "flag")]
    pub all: bool,
}

/// `clarify.respond`, `sudo.respond` and `secret.respond`.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub struct Answer {
    #[serde(deserialize_with = "text")]
    pub request_id: Option<String>,
    /// As typed, spaces kept.
    #[serde(deserialize_with = "exact")]
    pub answer: Option<String>,
    /// `sudo.respond`'s answer, as typed.
    #[serde(deserialize_with = "exact")]
    pub password: Option<String>,
    /// `secret.respond`'s answer, as typed.
    #[serde(deserialize_with = "exact")]
    pub value: Option<String>,
}

/// `command.resolve`, `command.dispatch` and `slash.exec`.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub struct Command {
    #[serde(deserialize_with = "exact")]
    pub session_id: Option<String>,
    #[serde(deserialize_with = "text")]
    pub command: Option<String>,
    #[serde(deserialize_with = "text")]
    pub name: Option<String>,
    #[serde(deserialize_with = "text")]
    pub arg: Option<String>,
}

/// `config.get` and `config.set`.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub struct Config {
    #[serde(deserialize_with = "exact")]
    pub session_id: Option<String>,
    #[serde(deserialize_with = "text")]
    pub key: Option<String>,
    #[serde(deserialize_with = "scalar")]
    pub value: Option<String>,
    #[serde(deserialize_with = "text")]
    pub cwd: Option<String>,
    #[serde(deserialize_with = "text")]
    pub scope: Option<String>,
}

/// `model.options`.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub struct Models {
    #[serde(deserialize_with = "flag")]
    pub refresh: bool,
}

/// `cli.exec`.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub struct CliExec {
    /// Checked by the method: a non-empty list of strings.
    pub argv: Option<Value>,
    #[serde(deserialize_with = "count")]
    pub timeout: Option<usize>,
}

/// `image.attach`.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub struct Attach {
    #[serde(deserialize_with = "exact")]
    pub session_id: Option<String>,
    #[serde(deserialize_with = "text")]
    pub path: Option<String>,
}

/// `subagent.interrupt` and `subagent.steer`.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub struct Subagent {
    #[serde(deserialize_with = "text")]
    pub subagent_id: Option<String>,
    #[serde(deserialize_with = "text")]
    pub text: Option<String>,
}

/// `delegation.pause` (`paused` checked by the method: only a boolean is one).
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub struct Pause {
    pub paused: Option<Value>,
}

/// `spawn_tree.save`, `.list` and `.load`.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub struct SpawnTree {
    /// A folder name here, not a live session.
    #[serde(deserialize_with = "text")]
    pub session_id: Option<String>,
    /// Checked by `save`: a non-empty list.
    pub subagents: Option<Value>,
    #[serde(deserialize_with = "text")]
    pub label: Option<String>,
    #[serde(deserialize_with = "number")]
    pub started_at: Option<f64>,
    #[serde(deserialize_with = "number")]
    pub finished_at: Option<f64>,
    #[serde(deserialize_with = "flag")]
    pub cross_session: bool,
    #[serde(deserialize_with = "count")]
    pub limit: Option<usize>,
    #[serde(deserialize_with = "text")]
    pub path: Option<String>,
}

/// `terminal.resize`: the width is echoed back as sent.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub struct Resize {
    pub cols: Option<Value>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_read_leniently_as_they_always_have() {
        let c: Create = read(&json!({"cwd": "  ", "model": " m ", "title": 5}));
        assert_eq!(
            (c.cwd, c.model.as_deref(), c.title),
            (None, Some("m"), None)
        );
        assert!(c.close_on_disconnect);
        let c: Create = read(&json!({"close_on_disconnect": "no"}));
        assert!(c.close_on_disconnect, "only false turns it off");
        let c: Create = read(&json!({"close_on_disconnect": false}));
        assert!(!c.close_on_disconnect);
        let a: Approval = read(&json!({"session_id": " ab", "all": "yes"}));
        assert_eq!((a.session_id.as_deref(), a.all), (Some(" ab"), false));
        let l: List = read(&json!({"limit": -3}));
        assert_eq!(l.limit, None);
        let t: Title = read(&json!({"title": null}));
        assert_eq!(
            t.title.as_deref(),
            Some(""),
            "a title that is there sets it"
        );
        let t: Title = read(&json!({}));
        assert_eq!(t.title, None);
        let p: Prompt = read(&json!({"confirm_truncate": false, "x": [1]}));
        assert_eq!(p.confirm_truncate, Some(json!(false)));
        let p: Prompt = read(&json!({"truncate_before_row_id": null}));
        assert_eq!(p.truncate_before_row_id, None);
    }
}
