//! What a chat platform shows while a turn works, and which files an answer may send,
//! read as Hermes 0.19.0 reads them:
//! - `streaming:` (top level, else `gateway.streaming`): `enabled` (false; the `mode`
//!   alias turns it on unless `off`), `edit_interval` (0.8 s), `buffer_threshold` (24
//!   characters), `cursor` (" ▉"); `display.platforms.<platform>.streaming` overrides
//!   `enabled`;
//! - `display.platforms.<platform>.tool_progress`, else
//!   `display.tool_progress_overrides.<platform>`, else `display.tool_progress`, else the
//!   platform's default (`off` on Telegram, Slack);
//! - `HERMES_MEDIA_ALLOW_DIRS` (separated by `:`) and `gateway.media_delivery_allow_dirs`:
//!   folders an answer's `MEDIA:` lines may send files from, besides the session's own.

use crate::config::EnvLookup;
use crate::node::{Node, NodeValue};
use crate::reader::{Reader, parse_bool_text};
use std::path::PathBuf;
use std::time::Duration;

/// Top-level keys this module reads.
pub const TOP_KEYS: &[&str] = &["streaming"];
/// Keys of `gateway:` this module reads.
pub const GATEWAY_KEYS: &[&str] = &["streaming", "media_delivery_allow_dirs"];
/// Keys of a `streaming:` block herald reads.
pub const STREAMING_KEYS: &[&str] = &[
    "enabled",
    "mode",
    "transport",
    "edit_interval",
    "buffer_threshold",
    "cursor",
];

/// Streaming answers into one message edited as the text grows.
#[derive(Debug, Clone, PartialEq)]
pub struct Streaming {
    pub enabled: bool,
    /// The least time between two edits.
    pub edit_interval: Duration,
    /// Characters that must be new before an edit is worth sending.
    pub buffer_threshold: usize,
    /// Shown at the end of the text while it grows.
    pub cursor: String,
}

impl Default for Streaming {
    fn default() -> Self {
        Streaming {
            enabled: false,
            edit_interval: Duration::from_millis(800),
            buffer_threshold: 24,
            cursor: " ▉".into(),
        }
    }
}

/// `tool_progress`: which tool calls are shown in the chat while a turn works.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolProgress {
    #[default]
    Off,
    /// A line when the tool differs from the one before.
    New,
    /// A line per call.
    All,
    /// A line per call with its arguments.
    Verbose,
}

/// What one platform shows while a turn works, and where its answers' files may come
/// from.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatDisplay {
    pub streaming: Streaming,
    pub tool_progress: ToolProgress,
    pub media_allow_dirs: Vec<PathBuf>,
}

/// Reads `platform`'s display settings from the whole document.
pub fn read_chat_display(
    r: &mut Reader,
    doc: &Node,
    env: EnvLookup<'_>,
    platform: &str,
) -> ChatDisplay {
    let gateway = doc.get("gateway").filter(|n| !n.is_null());
    let display = doc.get("display").filter(|n| !n.is_null());
    let per_platform = display
        .and_then(|d| d.get("platforms"))
        .and_then(|p| p.get(platform));
    let mut streaming = read_streaming(r, doc, gateway);
    if let Some(on) = per_platform
        .and_then(|p| p.get("streaming"))
        .and_then(|n| flag(r, n, &format!("display.platforms.{platform}.streaming")))
    {
        streaming.enabled = on;
    }
    ChatDisplay {
        streaming,
        tool_progress: tool_progress(display, per_platform, platform),
        media_allow_dirs: media_dirs(r, gateway, env),
    }
}

fn read_streaming(r: &mut Reader, doc: &Node, gateway: Option<&Node>) -> Streaming {
    let mut s = Streaming::default();
    let (block, prefix) = match doc.get("streaming").filter(|n| is_map(n)) {
        Some(b) => (b, "streaming"),
        None => match gateway
            .and_then(|g| g.get("streaming"))
            .filter(|n| is_map(n))
        {
            Some(b) => (b, "gateway.streaming"),
            None => return s,
        },
    };
    r.check_keys(block, prefix, STREAMING_KEYS);
    let mode = block.get("mode").map(transport_word);
    s.enabled = match block.get("enabled") {
        Some(n) => flag(r, n, &format!("{prefix}.enabled")).unwrap_or(false),
        None => mode.is_some_and(|m| m != "off"),
    };
    if let Some(n) = block.get("edit_interval") {
        match number(n).filter(|v| v.is_finite() && *v >= 0.0) {
            Some(secs) => s.edit_interval = Duration::from_secs_f64(secs.min(60.0)),
            None => r.warn(
                Some(n),
                &format!("{prefix}.edit_interval"),
                "not a number of seconds; 0.8 is used",
            ),
        }
    }
    if let Some(n) = block.get("buffer_threshold") {
        match number(n).filter(|v| *v >= 0.0) {
            Some(v) => s.buffer_threshold = v.min(4096.0) as usize,
            None => r.warn(
                Some(n),
                &format!("{prefix}.buffer_threshold"),
                "not a number; 24 is used",
            ),
        }
    }
    if let Some(NodeValue::Str(c)) = block.get("cursor").map(|n| &n.value) {
        s.cursor = c.clone();
    }
    s
}

fn is_map(n: &Node) -> bool {
    matches!(n.value, NodeValue::Map(_))
}

/// A transport or mode word as Hermes normalizes it (YAML's bare `off` is `false`).
fn transport_word(n: &Node) -> &'static str {
    match &n.value {
        NodeValue::Bool(false) => "off",
        NodeValue::Str(s)
            if matches!(
                s.trim().to_ascii_lowercase().as_str(),
                "off" | "false" | "0" | "no"
            ) =>
        {
            "off"
        }
        _ => "on",
    }
}

fn flag(r: &mut Reader, n: &Node, key: &str) -> Option<bool> {
    match &n.value {
        NodeValue::Null => None,
        _ => r.bool(n, key),
    }
}

fn number(n: &Node) -> Option<f64> {
    match &n.value {
        NodeValue::Int(i) => Some(*i as f64),
        NodeValue::Float(f) => Some(*f),
        NodeValue::Str(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Hermes's order: the platform's override, the legacy override map, the global
/// setting, the platform's default (off for every chat platform herald serves).
fn tool_progress(
    display: Option<&Node>,
    per_platform: Option<&Node>,
    platform: &str,
) -> ToolProgress {
    let legacy = display
        .and_then(|d| d.get("tool_progress_overrides"))
        .and_then(|o| o.get(platform));
    let global = display.and_then(|d| d.get("tool_progress"));
    [
        per_platform.and_then(|p| p.get("tool_progress")),
        legacy,
        global,
    ]
    .into_iter()
    .flatten()
    .find(|n| !n.is_null())
    .map(progress_word)
    .unwrap_or_default()
}

/// As Hermes's `_normalise`: booleans and yes/no words, else the named mode, else
/// `all`.
fn progress_word(n: &Node) -> ToolProgress {
    let word = match &n.value {
        NodeValue::Bool(b) => {
            return if *b {
                ToolProgress::All
            } else {
                ToolProgress::Off
            };
        }
        NodeValue::Str(s) => s.trim().to_ascii_lowercase(),
        NodeValue::Int(i) => i.to_string(),
        _ => String::new(),
    };
    if let Some(b) = parse_bool_text(&word) {
        return if b {
            ToolProgress::All
        } else {
            ToolProgress::Off
        };
    }
    match word.as_str() {
        "off" | "log" => ToolProgress::Off,
        "new" => ToolProgress::New,
        "verbose" => ToolProgress::Verbose,
        _ => ToolProgress::All,
    }
}

/// `HERMES_MEDIA_ALLOW_DIRS` and `gateway.media_delivery_allow_dirs`; only absolute
/// folders (a relative one is skipped with a warning: it would depend on where herald
/// was started).
fn media_dirs(r: &mut Reader, gateway: Option<&Node>, env: EnvLookup<'_>) -> Vec<PathBuf> {
    let mut dirs: Vec<String> = env("HERMES_MEDIA_ALLOW_DIRS")
        .map(|v| v.split(':').map(str::to_owned).collect())
        .unwrap_or_default();
    let key = "gateway.media_delivery_allow_dirs";
    if let Some(n) = gateway.and_then(|g| g.get("media_delivery_allow_dirs")) {
        dirs.extend(r.string_list(n, key).unwrap_or_default());
    }
    let mut out = Vec::new();
    for d in dirs.iter().map(|d| d.trim()).filter(|d| !d.is_empty()) {
        let path = crate::home::expand_tilde(d);
        if path.is_absolute() {
            out.push(path);
        } else {
            r.warn(
                gateway.and_then(|g| g.get("media_delivery_allow_dirs")),
                key,
                format!("{d:?} is not an absolute folder; skipped"),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(yaml: &str, env: &[(&str, &str)]) -> ChatDisplay {
        let doc = Node::parse_yaml(yaml).unwrap();
        let mut r = Reader::new(std::path::Path::new("config.yaml"));
        let lookup = |k: &str| {
            env.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        };
        read_chat_display(&mut r, &doc, &lookup, "telegram")
    }

    #[test]
    fn streaming_is_off_unless_enabled_and_mode_implies_it() {
        assert!(!read("model: x\n", &[]).streaming.enabled);
        let on = read(
            "streaming:\n  enabled: true\n  edit_interval: 1.5\n  buffer_threshold: 10\n  cursor: ' |'\n",
            &[],
        );
        assert!(on.streaming.enabled);
        assert_eq!(on.streaming.edit_interval, Duration::from_millis(1500));
        assert_eq!(on.streaming.buffer_threshold, 10);
        assert_eq!(on.streaming.cursor, " |");
        assert!(read("streaming:\n  mode: edit\n", &[]).streaming.enabled);
        assert!(!read("streaming:\n  mode: off\n", &[]).streaming.enabled);
        // `transport` alone does not turn it on (Hermes's master switch is `enabled`).
        assert!(
            !read("streaming:\n  transport: edit\n", &[])
                .streaming
                .enabled
        );
        assert!(
            read("gateway:\n  streaming:\n    enabled: true\n", &[])
                .streaming
                .enabled
        );
        let off_here = read(
            "streaming:\n  enabled: true\ndisplay:\n  platforms:\n    telegram:\n      streaming: false\n",
            &[],
        );
        assert!(!off_here.streaming.enabled);
    }

    #[test]
    fn tool_progress_follows_hermes_order() {
        assert_eq!(read("model: x\n", &[]).tool_progress, ToolProgress::Off);
        assert_eq!(
            read("display:\n  tool_progress: all\n", &[]).tool_progress,
            ToolProgress::All
        );
        assert_eq!(
            read(
                "display:\n  tool_progress: all\n  platforms:\n    telegram:\n      tool_progress: new\n",
                &[]
            )
            .tool_progress,
            ToolProgress::New
        );
        assert_eq!(
            read(
                "display:\n  tool_progress_overrides:\n    telegram: verbose\n",
                &[]
            )
            .tool_progress,
            ToolProgress::Verbose
        );
        assert_eq!(
            read(
                "display:\n  platforms:\n    telegram:\n      tool_progress: off\n",
                &[]
            )
            .tool_progress,
            ToolProgress::Off
        );
        assert_eq!(
            read("display:\n  tool_progress: true\n", &[]).tool_progress,
            ToolProgress::All
        );
    }

    #[test]
    fn media_folders_come_from_the_variable_and_the_gateway_block() {
        let d = read(
            "gateway:\n  media_delivery_allow_dirs: [/srv/out, relative/dir]\n",
            &[("HERMES_MEDIA_ALLOW_DIRS", "/data/a:/data/b")],
        );
        assert_eq!(
            d.media_allow_dirs,
            vec![
                PathBuf::from("/data/a"),
                PathBuf::from("/data/b"),
                PathBuf::from("/srv/out")
            ]
        );
    }
}
