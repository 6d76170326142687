//! Prompt templates: `{dot.path}` placeholders rendered against a payload (spec §10).
//!
//! A template is compiled once (when the route is loaded) into literal and placeholder
//! segments; rendering is a single pass that never rescans replaced text.

use crate::{pyjson, raw_render};
use serde_json::{Map, Value};
use std::borrow::Cow;

/// `{__raw__}` is cut to this many code points.
pub const RAW_MAX_CHARS: usize = 4000;
/// A nested value (object or array) is cut to this many code points.
pub const NESTED_MAX_CHARS: usize = 2000;

/// A compiled template.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    segments: Vec<Segment>,
}

#[derive(Debug, Clone, PartialEq)]
enum Segment {
    Literal(String),
    Raw,
    EventType,
    /// The path split on `.`, and the placeholder as written (kept when unresolved).
    Path(Vec<String>, String),
}

/// What a template is rendered against.
pub struct RenderContext<'a> {
    pub payload: &'a Map<String, Value>,
    pub event_type: &'a Value,
    /// The whole payload as `{__raw__}` shows it, when already rendered from the body's
    /// text (the payload then holds only the paths the route reads).
    pub raw: Option<&'a str>,
    /// The payload's JSON text, when it holds numbers the payload holds only through
    /// stand-ins (see [`herald_protocol::json_literal`]): placeholders are then rendered from it.
    pub text: Option<&'a [u8]>,
}

impl RenderContext<'_> {
    /// `{__raw__}`: the whole payload as indented JSON, cut.
    fn raw_text(&self) -> Cow<'_, str> {
        if let Some(text) = self.raw {
            return Cow::Borrowed(text);
        }
        if let Some(shown) = self
            .text
            .and_then(|text| raw_render::indented_cut(text, RAW_MAX_CHARS))
        {
            return Cow::Owned(shown);
        }
        Cow::Owned(pyjson::indented_object_cut(self.payload, RAW_MAX_CHARS))
    }

    /// A `{a.b}` placeholder's rendering, or `None` when the path does not resolve.
    /// A value that may hold a stand-in is written from the text, when there is one.
    fn shown(&self, path: &[String]) -> Option<String> {
        let value = lookup(self.payload, path)?;
        let from_text = self
            .text
            .filter(|_| may_hold_stand_in(value))
            .and_then(|text| crate::pick::value_text(text, path))
            .and_then(|found| raw_render::template_value(found, NESTED_MAX_CHARS));
        Some(from_text.unwrap_or_else(|| pyjson::template_value(value, NESTED_MAX_CHARS)))
    }
}

/// Whether `value` holds a number that may stand in for a literal only the text holds
/// (see [`herald_protocol::json_literal`]): a double at or past 2^63 in size. `-0`'s
/// stand-in, the int 0, renders as Python renders `-0`.
fn may_hold_stand_in(value: &Value) -> bool {
    match value {
        Value::Number(n) => {
            n.is_f64()
                && n.as_f64()
                    .is_some_and(|f| f.abs() >= 9.223_372_036_854_776e18)
        }
        Value::Array(items) => items.iter().any(may_hold_stand_in),
        Value::Object(map) => map.values().any(may_hold_stand_in),
        _ => false,
    }
}

impl Template {
    /// Compiles `text`; never fails: anything that is not a placeholder is literal text.
    pub fn compile(text: &str) -> Self {
        let mut segments = Vec::new();
        let mut literal = String::new();
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'{' {
                let start = i + 1;
                let mut j = start;
                while j < bytes.len() && is_name_byte(bytes[j]) {
                    j += 1;
                }
                if j > start && j < bytes.len() && bytes[j] == b'}' {
                    if !literal.is_empty() {
                        segments.push(Segment::Literal(std::mem::take(&mut literal)));
                    }
                    // Name bytes are ASCII, so these slices are on char boundaries.
                    let name = &text[start..j];
                    segments.push(match name {
                        "__raw__" => Segment::Raw,
                        "event_type" => Segment::EventType,
                        _ => Segment::Path(
                            name.split('.').map(str::to_owned).collect(),
                            text[i..=j].to_owned(),
                        ),
                    });
                    i = j + 1;
                    continue;
                }
            }
            // Copy one whole UTF-8 character.
            let ch_len = utf8_len(bytes[i]);
            let end = (i + ch_len).min(bytes.len());
            literal.push_str(text.get(i..end).unwrap_or_default());
            i = end;
        }
        if !literal.is_empty() {
            segments.push(Segment::Literal(literal));
        }
        Template { segments }
    }

    /// Adds the payload paths this template reads (`{__raw__}` reads everything).
    pub fn add_paths(&self, paths: &mut crate::pick::PayloadPaths) {
        for segment in &self.segments {
            match segment {
                Segment::Raw => paths.add_raw(),
                Segment::Path(path, _) => paths.add_shown(path),
                Segment::Literal(_) | Segment::EventType => {}
            }
        }
    }

    /// The template as written.
    pub fn text(&self) -> String {
        self.segments
            .iter()
            .map(|s| match s {
                Segment::Literal(l) => l.as_str(),
                Segment::Raw => "{__raw__}",
                Segment::EventType => "{event_type}",
                Segment::Path(_, written) => written.as_str(),
            })
            .collect()
    }

    /// True when the template has no text at all.
    pub fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    /// Renders against a payload; unresolved placeholders stay as written.
    pub fn render(&self, ctx: &RenderContext<'_>) -> String {
        let mut out = String::new();
        for segment in &self.segments {
            match segment {
                Segment::Literal(s) => out.push_str(s),
                Segment::Raw => out.push_str(&ctx.raw_text()),
                Segment::EventType => {
                    out.push_str(&pyjson::template_value(ctx.event_type, NESTED_MAX_CHARS))
                }
                Segment::Path(path, written) => match ctx.shown(path) {
                    Some(shown) => out.push_str(&shown),
                    None => out.push_str(written),
                },
            }
        }
        out
    }
}

/// The prompt used when a route has no (or an empty) `prompt` (spec §10.4).
pub fn default_prompt(route: &str, ctx: &RenderContext<'_>) -> String {
    let event = match ctx.event_type {
        Value::String(s) => s.clone(),
        other => pyjson::text_form(other),
    };
    let json = ctx.raw_text();
    format!("Webhook event '{event}' on route '{route}':\n\n```json\n{json}\n```")
}

/// The value a `{a.b}` placeholder resolves to: keys through nested objects.
pub fn lookup<'a>(payload: &'a Map<String, Value>, path: &[String]) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    let mut current = payload.get(first)?;
    for segment in rest {
        current = current.as_object()?.get(segment)?;
    }
    Some(current)
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'.'
}

fn utf8_len(first: u8) -> usize {
    match first {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn render(template: &str, payload: Value) -> String {
        let payload = payload.as_object().cloned().unwrap();
        let event = json!("push");
        Template::compile(template).render(&RenderContext {
            payload: &payload,
            event_type: &event,
            raw: None,
            text: None,
        })
    }

    #[test]
    fn numbers_only_the_text_holds_render_as_python_shows_them() {
        let body = br#"{"big": 123456789012345678901234567890, "o": {"z": -0, "inf": 1e400}, "s": "1e400"}"#;
        let crate::json_text::JsonRead::Object { map, .. } = crate::json_text::read(body) else {
            panic!("not read");
        };
        let event = json!("push");
        let ctx = RenderContext {
            payload: &map,
            event_type: &event,
            raw: None,
            text: Some(body),
        };
        assert_eq!(
            Template::compile("{big} {o} {o.inf} {o.z} {s}").render(&ctx),
            "123456789012345678901234567890 {\n  \"z\": 0,\n  \"inf\": Infinity\n} inf 0 1e400"
        );
        assert!(default_prompt("r", &ctx).contains(
            "{\n  \"big\": 123456789012345678901234567890,\n  \"o\": {\n    \"z\": 0,\n    \"inf\": Infinity\n  },\n  \"s\": \"1e400\"\n}"
        ));
        // The tree holds stand-ins: the largest float for `inf`, the int 0 for `-0`.
        assert_eq!(map["o"]["z"], json!(0));
        assert_eq!(map["o"]["inf"], json!(f64::MAX));
    }

    #[test]
    fn paths_resolve_and_missing_stay() {
        let p = json!({"a": {"b": "x", "n": 42, "f": 1.5, "t": true, "z": null}, "l": [1, 2]});
        assert_eq!(
            render("{a.b}/{a.n}/{a.f}/{a.t}/{a.z}", p.clone()),
            "x/42/1.5/True/None"
        );
        assert_eq!(
            render("{a.c} {missing} {l.0}", p.clone()),
            "{a.c} {missing} {l.0}"
        );
        assert_eq!(
            render("{a-b} { a } {} {$a} {é}", p.clone()),
            "{a-b} { a } {} {$a} {é}"
        );
        assert_eq!(render("{{a.b}}", p.clone()), "{x}");
        assert_eq!(render("{l}", p), "[\n  1,\n  2\n]");
    }

    #[test]
    fn event_type_is_reserved() {
        assert_eq!(
            render("{event_type}", json!({"event_type": "other"})),
            "push"
        );
    }

    #[test]
    fn replacement_is_not_rescanned() {
        assert_eq!(render("{a}", json!({"a": "{b}", "b": "no"})), "{b}");
    }

    #[test]
    fn nested_values_are_cut() {
        let long: Vec<String> = (0..2000).map(|i| format!("item{i}")).collect();
        let out = render("{l}", json!({ "l": long }));
        assert_eq!(out.chars().count(), NESTED_MAX_CHARS);
        let raw = render("{__raw__}", json!({ "l": long }));
        assert_eq!(raw.chars().count(), RAW_MAX_CHARS);
    }

    #[test]
    fn default_prompt_has_fence() {
        let payload = json!({"a": 1}).as_object().cloned().unwrap();
        let ev = json!("ping");
        let out = default_prompt(
            "r",
            &RenderContext {
                payload: &payload,
                event_type: &ev,
                raw: None,
                text: None,
            },
        );
        assert_eq!(
            out,
            "Webhook event 'ping' on route 'r':\n\n```json\n{\n  \"a\": 1\n}\n```"
        );
    }

    #[test]
    fn unicode_literals_survive() {
        assert_eq!(render("héllo ✓ {a} 😀", json!({"a": "ü"})), "héllo ✓ ü 😀");
    }
}
