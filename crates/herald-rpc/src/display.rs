//! The TUI's display toggles over `config.get` / `config.set` (`skin`, `details_mode`,
//! `thinking_mode`, `compact`, `statusbar`, `mouse`, `indicator`, `verbose`, and
//! `reasoning show|hide|full|clamp`): kept in config.yaml's `display:` and answered as
//! Hermes's TUI gateway answers them. They change what the TUI shows, never a run.

use crate::errors::RpcError;
use herald_config::default_config::{display_settings, set_display};
use serde_json::{Map, Value};
use std::path::Path;

const DETAIL_MODES: [&str; 3] = ["hidden", "collapsed", "expanded"];
const DETAIL_SECTIONS: [&str; 4] = ["thinking", "tools", "subagents", "activity"];
const THINKING_MODES: [&str; 3] = ["collapsed", "truncated", "full"];
const STATUSBAR_MODES: [&str; 3] = ["off", "top", "bottom"];
const INDICATORS: [&str; 4] = ["ascii", "emoji", "kaomoji", "unicode"];
const VERBOSE_MODES: [&str; 4] = ["off", "new", "all", "verbose"];

fn text<'a>(display: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    display.get(key).and_then(Value::as_str).map(str::trim)
}

/// The display keys `config.get` answers.
const KEYS: [&str; 9] = [
    "skin",
    "personality",
    "indicator",
    "details_mode",
    "thinking_mode",
    "compact",
    "statusbar",
    "mouse",
    "verbose",
];

/// The value `config.get` answers for a display key; `None` for another key (the file is
/// read only for a display key).
pub fn get(path: &Path, key: &str) -> Option<String> {
    KEYS.contains(&key)
        .then(|| get_in(&display_settings(path), key))
        .flatten()
}

/// [`get`] on the `display:` settings already read.
fn get_in(d: &Map<String, Value>, key: &str) -> Option<String> {
    let lower = |k: &str| text(d, k).map(str::to_ascii_lowercase);
    let known = |v: Option<String>, allowed: &[&str], default: &str| match v {
        Some(v) if allowed.contains(&v.as_str()) => v,
        _ => default.to_owned(),
    };
    Some(match key {
        "skin" => text(d, "skin").unwrap_or("default").to_owned(),
        "personality" => text(d, "personality")
            .filter(|p| !p.is_empty())
            .unwrap_or("none")
            .to_owned(),
        "indicator" => known(lower("tui_status_indicator"), &INDICATORS, "kaomoji"),
        "details_mode" => known(lower("details_mode"), &DETAIL_MODES, "collapsed"),
        "thinking_mode" => match lower("thinking_mode") {
            Some(m) if THINKING_MODES.contains(&m.as_str()) => m,
            _ if lower("details_mode").as_deref() == Some("expanded") => "full".into(),
            _ => "collapsed".into(),
        },
        "compact" => on_off(d.get("tui_compact") == Some(&Value::Bool(true))),
        "statusbar" => statusbar(d.get("tui_statusbar")),
        "mouse" => mouse(d),
        "verbose" => match d.get("tool_progress") {
            Some(Value::Bool(false)) => "off".into(),
            Some(Value::String(m)) => {
                known(Some(m.trim().to_ascii_lowercase()), &VERBOSE_MODES, "all")
            }
            _ => "all".into(),
        },
        _ => return None,
    })
}

/// `reasoning`'s display half: `show` unless `display.show_reasoning` is false.
pub fn reasoning_display(path: &Path) -> &'static str {
    match display_settings(path).get("show_reasoning") {
        Some(Value::Bool(false)) => "hide",
        _ => "show",
    }
}

fn on_off(on: bool) -> String {
    if on { "on" } else { "off" }.to_owned()
}

fn statusbar(raw: Option<&Value>) -> String {
    match raw {
        Some(Value::Bool(false)) => "off".into(),
        Some(Value::String(s))
            if STATUSBAR_MODES.contains(&s.trim().to_ascii_lowercase().as_str()) =>
        {
            s.trim().to_ascii_lowercase()
        }
        _ => "top".into(),
    }
}

/// `display.mouse_tracking` as one of `off|wheel|buttons|all` (the legacy `tui_mouse`
/// when it is absent).
fn mouse(d: &Map<String, Value>) -> String {
    let raw = d.get("mouse_tracking").or_else(|| d.get("tui_mouse"));
    match raw {
        Some(Value::Bool(false)) => "off".into(),
        Some(Value::Number(n)) if n.as_f64() == Some(0.0) => "off".into(),
        Some(Value::String(s)) => mouse_alias(s).unwrap_or("all").to_owned(),
        _ => "all".into(),
    }
}

fn mouse_alias(raw: &str) -> Option<&'static str> {
    Some(match raw.trim().to_ascii_lowercase().as_str() {
        "0" | "false" | "no" | "off" => "off",
        "1" | "all" | "any" | "full" | "on" | "true" | "yes" => "all",
        "button" | "buttons" | "click" => "buttons",
        "scroll" | "wheel" => "wheel",
        _ => return None,
    })
}

fn bad(what: &str, value: &str) -> RpcError {
    RpcError::new(RpcError::BAD_VALUE, format!("unknown {what}: {value}"))
}

/// Sets a display key from `config.set`; the value as answered. `None` for another
/// key.
pub fn set(path: &Path, key: &str, value: &str) -> Option<Result<String, RpcError>> {
    let raw = value.trim().to_ascii_lowercase();
    // Read only by the toggles, which answer from what is set now.
    let d = || display_settings(path);
    let write = |changes: &[(&str, Value)], answer: String| written(path, changes, answer);
    Some(match key {
        "skin" => write(
            &[("skin", Value::from(value.trim()))],
            value.trim().to_owned(),
        ),
        "details_mode" if DETAIL_MODES.contains(&raw.as_str()) => {
            let mut changes = vec![("details_mode".to_owned(), Value::from(raw.clone()))];
            changes.extend(
                DETAIL_SECTIONS.map(|s| (format!("sections.{s}"), Value::from(raw.clone()))),
            );
            let changes: Vec<(&str, Value)> = changes
                .iter()
                .map(|(k, v)| (k.as_str(), v.clone()))
                .collect();
            write(&changes, raw)
        }
        "details_mode" => Err(bad("details_mode", value)),
        section_key if section_key.starts_with("details_mode.") => section(path, section_key, &raw),
        "thinking_mode" if THINKING_MODES.contains(&raw.as_str()) => {
            let details = if raw == "full" {
                "expanded"
            } else {
                "collapsed"
            };
            write(
                &[
                    ("thinking_mode", Value::from(raw.clone())),
                    ("details_mode", Value::from(details)),
                ],
                raw,
            )
        }
        "thinking_mode" => Err(bad("thinking_mode", value)),
        "compact" => {
            let now = d().get("tui_compact") == Some(&Value::Bool(true));
            match raw.as_str() {
                "" | "toggle" => write(&[("tui_compact", Value::Bool(!now))], on_off(!now)),
                "on" | "off" => write(&[("tui_compact", Value::Bool(raw == "on"))], raw),
                _ => Err(bad("compact value", value)),
            }
        }
        "statusbar" => {
            let next = match raw.as_str() {
                "" | "toggle" if statusbar(d().get("tui_statusbar")) == "off" => "top".to_owned(),
                "" | "toggle" => "off".to_owned(),
                "on" => "top".to_owned(),
                m if STATUSBAR_MODES.contains(&m) => m.to_owned(),
                _ => return Some(Err(bad("statusbar value", value))),
            };
            write(&[("tui_statusbar", Value::from(next.clone()))], next)
        }
        "mouse" => {
            let next = match raw.as_str() {
                "" | "toggle" if mouse(&d()) == "off" => "all",
                "" | "toggle" => "off",
                other => match mouse_alias(other) {
                    Some(m) => m,
                    None => return Some(Err(bad("mouse value", value))),
                },
            };
            write(&[("mouse_tracking", Value::from(next))], next.to_owned())
        }
        "indicator" if INDICATORS.contains(&raw.as_str()) => {
            write(&[("tui_status_indicator", Value::from(raw.clone()))], raw)
        }
        "indicator" => Err(RpcError::new(
            RpcError::BAD_VALUE,
            format!(
                "unknown indicator: {raw:?}; pick one of {}",
                INDICATORS.join("|")
            ),
        )),
        "verbose" => {
            let next = match raw.as_str() {
                "" | "cycle" => {
                    let now = get_in(&d(), "verbose").unwrap_or_default();
                    let at = VERBOSE_MODES.iter().position(|m| *m == now).unwrap_or(2);
                    VERBOSE_MODES[(at + 1) % VERBOSE_MODES.len()].to_owned()
                }
                m if VERBOSE_MODES.contains(&m) => m.to_owned(),
                _ => return Some(Err(bad("verbose mode", value))),
            };
            write(&[("tool_progress", Value::from(next.clone()))], next)
        }
        "reasoning" => return reasoning(path, &raw),
        _ => return None,
    })
}

/// `details_mode.<section>`: one section's mode; empty clears it.
fn section(path: &Path, key: &str, raw: &str) -> Result<String, RpcError> {
    let name = key.trim_start_matches("details_mode.");
    if !DETAIL_SECTIONS.contains(&name) {
        return Err(RpcError::new(
            RpcError::BAD_VALUE,
            format!("unknown section: {name}"),
        ));
    }
    if !raw.is_empty() && !DETAIL_MODES.contains(&raw) {
        return Err(bad("details_mode", raw));
    }
    let value = match raw.is_empty() {
        true => Value::Null,
        false => Value::from(raw),
    };
    written(
        path,
        &[(&format!("sections.{name}"), value)],
        raw.to_owned(),
    )
}

/// Writes `changes` under `display:`; `answer` once written.
fn written(path: &Path, changes: &[(&str, Value)], answer: String) -> Result<String, RpcError> {
    set_display(path, changes)
        .map(|()| answer)
        .map_err(|e| RpcError::new(RpcError::CONFIG_FAILED, e.to_string()))
}

/// `reasoning show|hide|full|clamp` (and their aliases): how the TUI shows thinking.
/// `None` for an effort level, which is the session's.
fn reasoning(path: &Path, raw: &str) -> Option<Result<String, RpcError>> {
    let (changes, answer): (Vec<(&str, Value)>, &str) = match raw {
        "show" | "on" => (
            vec![
                ("show_reasoning", Value::Bool(true)),
                ("sections.thinking", Value::from("expanded")),
            ],
            "show",
        ),
        "hide" | "off" => (
            vec![
                ("show_reasoning", Value::Bool(false)),
                ("sections.thinking", Value::from("hidden")),
            ],
            "hide",
        ),
        "full" | "all" => (
            vec![
                ("reasoning_full", Value::Bool(true)),
                ("sections.thinking", Value::from("expanded")),
            ],
            "full",
        ),
        "clamp" | "collapse" | "short" => (
            vec![
                ("reasoning_full", Value::Bool(false)),
                ("sections.thinking", Value::from("collapsed")),
            ],
            "clamp",
        ),
        _ => return None,
    };
    Some(written(path, &changes, answer.to_owned()))
}
