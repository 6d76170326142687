//! Building only the part of a JSON payload a route reads.
//!
//! Most routes read a handful of fields (a template's `{pull_request.title}`, a filter's
//! `action`), yet a full parse builds every key of a 2 KB payload into an ordered map.
//! [`PayloadPaths`] is the set of paths a route can read (computed once, when the route
//! is loaded); [`PayloadPaths::pick`] validates the whole body exactly as the full parse
//! does but builds only those paths. Every lookup of a path in the set (or a prefix of
//! one) gives the same value as on the full payload.
//!
//! The body is read as [`crate::json_text`] reads it (a byte-order mark skipped, lone
//! surrogates replaced, nesting up to its limit). When that is not a JSON object — not
//! UTF-8, not JSON, another JSON value, or nested too deep — `pick` returns `None` and
//! the caller parses in full for the exact answer.

use crate::json_text;
use crate::template::NESTED_MAX_CHARS;
use serde::Deserializer as _;
use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

/// Payload keys read for the event type (spec §7.1) and GitLab's `object_kind` (§7.2).
const EVENT_TYPE_KEYS: [&str; 3] = ["event_type", "type", "object_kind"];

/// The payload paths a route reads.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PayloadPaths {
    everything: bool,
    /// The route shows the whole payload cut (`{__raw__}`, the default prompt).
    raw: bool,
    root: Node,
}

#[derive(Debug, Clone, PartialEq, Default)]
struct Node {
    /// The whole value at this path is read.
    whole: bool,
    /// The value at this path is only shown by a template (cut to
    /// [`NESTED_MAX_CHARS`]): a container is built only as far as its rendering can
    /// show.
    shown: bool,
    children: BTreeMap<String, Node>,
}

impl PayloadPaths {
    /// Only the event type keys; add what the route reads with [`PayloadPaths::add`].
    pub fn new() -> Self {
        let mut p = PayloadPaths::default();
        for key in EVENT_TYPE_KEYS {
            p.add(&[key.to_owned()]);
        }
        p
    }

    /// A route that needs the whole payload built (a script).
    pub fn everything() -> Self {
        PayloadPaths {
            everything: true,
            raw: true,
            root: Node::default(),
        }
    }

    pub fn needs_everything(&self) -> bool {
        self.everything
    }

    /// The route reads the value at `path` (and everything under it).
    pub fn add(&mut self, path: &[String]) {
        if path.is_empty() {
            self.everything = true;
            return;
        }
        let mut node = &mut self.root;
        for segment in path {
            node = node.children.entry(segment.clone()).or_default();
        }
        node.whole = true;
    }

    /// A template shows the value at `path`: an object or a list there is built only as
    /// far as its rendering, cut to [`NESTED_MAX_CHARS`], can show (a path that
    /// something else also reads is built whole).
    pub fn add_shown(&mut self, path: &[String]) {
        if path.is_empty() {
            self.everything = true;
            return;
        }
        let mut node = &mut self.root;
        for segment in path {
            node = node.children.entry(segment.clone()).or_default();
        }
        node.shown = true;
    }

    /// The body as a payload holding only these paths, or `None` when only the full
    /// parse can give the exact answer (the body is not a JSON object, or nests deeper
    /// than herald reads).
    pub fn pick<'a>(&self, body: &'a [u8]) -> Option<Picked<'a>> {
        if self.everything {
            return None;
        }
        let text = json_text::readable(body)?;
        // Skipped strings are not checked by serde_json: a body that is not UTF-8 is
        // refused by the full parse, so it is not picked either.
        std::str::from_utf8(&text.bytes).ok()?;
        let payload = pick_object(&text.tree_bytes(), &self.root, text.shallow).ok()?;
        Some(Picked {
            payload,
            rewritten: text.changed,
            exotic: text.exotic,
            text: text.bytes,
        })
    }

    /// Whether the route shows the whole payload (`{__raw__}`, the default prompt).
    pub fn needs_raw(&self) -> bool {
        self.raw
    }

    /// The route shows the whole payload, cut (rendered from the text, see
    /// [`crate::raw_render`]).
    pub fn add_raw(&mut self) {
        self.raw = true;
    }
}

/// A payload with only the paths a route reads, and the text it was read from.
pub struct Picked<'a> {
    pub payload: Map<String, Value>,
    /// The body's text as read (without a byte-order mark, lone surrogates replaced).
    pub text: std::borrow::Cow<'a, [u8]>,
    /// Whether `text` differs from the body (then the payload cannot be stored as received).
    pub rewritten: bool,
    /// `text` holds number literals the payload holds only through stand-ins (see
    /// [`herald_protocol::json_literal`]): what renders reads them from `text`.
    pub exotic: bool,
}

/// Picks `node`'s paths out of the JSON object `text`; a text with many `[`/`{` is read
/// without serde_json's nesting limit, on a stack that grows as needed.
fn pick_object(
    text: &[u8],
    node: &Node,
    shallow: bool,
) -> Result<Map<String, Value>, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(text);
    let map = if shallow {
        de.deserialize_map(PickObject(node))?
    } else {
        de.disable_recursion_limit();
        serde_stacker::Deserializer::new(&mut de).deserialize_map(PickObject(node))?
    };
    de.end()?;
    Ok(map)
}

/// The text of the value at `path` in the JSON object `text`, found as
/// [`crate::template::lookup`] finds it in the tree: keys through nested objects, the
/// last of repeated keys.
pub fn value_text<'t>(text: &'t [u8], path: &[String]) -> Option<&'t str> {
    let mut current = std::str::from_utf8(text).ok()?.trim_start();
    for segment in path {
        current = member(current, segment)?;
    }
    Some(current)
}

/// The text of the last value under `key` when `text` is an object.
fn member<'t>(text: &'t str, key: &str) -> Option<&'t str> {
    if !text.starts_with('{') {
        return None;
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let found = if json_text::is_shallow(text.as_bytes()) {
        de.deserialize_map(Member(key))
    } else {
        de.disable_recursion_limit();
        serde_stacker::Deserializer::new(&mut de).deserialize_map(Member(key))
    };
    found.ok().flatten()
}

/// Visits an object for the text of the last value under one key.
struct Member<'k>(&'k str);

impl<'de> Visitor<'de> for Member<'_> {
    type Value = Option<&'de str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(Key(key)) = access.next_key::<Key<'de>>()? {
            if key == self.0 {
                found = Some(access.next_value::<&'de RawValue>()?.get());
            } else {
                access.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// UTF-8 without `\u` escapes and with too few `[`/`{` to reach serde_json's nesting
/// limit: the bodies on which skipping a value answers exactly as parsing it.
pub fn plain_json_text(body: &[u8]) -> bool {
    let escapes_ok = memchr::memchr_iter(b'\\', body).all(|i| body.get(i + 1) != Some(&b'u'));
    escapes_ok && json_text::is_shallow(body) && std::str::from_utf8(body).is_ok()
}

/// A key, borrowed from the body when it has no escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// Visits an object, keeping only the keys `node` names.
struct PickObject<'n>(&'n Node);

impl<'de> Visitor<'de> for PickObject<'_> {
    type Value = Map<String, Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
        let mut out = Map::new();
        while let Some(Key(key)) = access.next_key::<Key<'de>>()? {
            match self.0.children.get(key.as_ref()) {
                None => {
                    access.next_value::<IgnoredAny>()?;
                }
                Some(child) if !child.whole && child.children.is_empty() => {
                    let budget = std::cell::Cell::new(SHOWN_BUDGET);
                    let value = access.next_value_seed(Shown(&budget))?;
                    out.insert(key.into_owned(), value);
                }
                // Shown and read deeper too: built whole, as both need.
                Some(child) if child.whole || child.shown || child.children.is_empty() => {
                    let value: Value = access.next_value()?;
                    out.insert(key.into_owned(), value);
                }
                Some(child) => {
                    let raw: &'de RawValue = access.next_value()?;
                    let value = pick_value(raw.get(), child).map_err(de::Error::custom)?;
                    out.insert(key.into_owned(), value);
                }
            }
        }
        Ok(out)
    }
}

/// How much of a shown value is built: counted so that the kept part always renders to
/// more than the cut (each count is at most what its rendering writes).
const SHOWN_BUDGET: usize = NESTED_MAX_CHARS + 1;

/// A value built only as far as its indented rendering, cut to [`NESTED_MAX_CHARS`],
/// can show: once `budget` is spent, the rest of every open container is skipped.
/// Rendering follows document order, so the cut text is the same as the whole value's.
/// A key repeated after the budget is spent still replaces its earlier value (the last
/// one wins, in the first one's place, as Python's dict keeps it).
struct Shown<'b>(&'b std::cell::Cell<usize>);

impl Shown<'_> {
    fn spend(&self, n: usize) {
        self.0.set(self.0.get().saturating_sub(n));
    }

    fn spent(&self) -> bool {
        self.0.get() == 0
    }
}

impl<'de> de::DeserializeSeed<'de> for Shown<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Shown<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        self.spend(4);
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        self.spend(1);
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        self.spend(1);
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        self.spend(1);
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        self.spend(v.chars().count() + 2);
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        self.spend(v.chars().count() + 2);
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        self.spend(4);
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        self.spend(4);
        Ok(Value::Null)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        self.spend(2);
        let mut out = Map::new();
        while let Some(Key(key)) = access.next_key::<Key<'de>>()? {
            if !self.spent() {
                self.spend(key.chars().count() + 4);
                let value = access.next_value_seed(Shown(self.0))?;
                out.insert(key.into_owned(), value);
            } else if out.contains_key(key.as_ref()) {
                let fresh = std::cell::Cell::new(SHOWN_BUDGET);
                let value = access.next_value_seed(Shown(&fresh))?;
                out.insert(key.into_owned(), value);
            } else {
                access.next_value::<IgnoredAny>()?;
            }
        }
        Ok(Value::Object(out))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        self.spend(2);
        let mut out = Vec::new();
        while !self.spent() {
            match access.next_element_seed(Shown(self.0))? {
                Some(v) => out.push(v),
                None => return Ok(Value::Array(out)),
            }
        }
        while access.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Value::Array(out))
    }
}

/// An object is picked further; anything else is taken whole (a path through it
/// resolves the same way on the whole value).
fn pick_value(text: &str, node: &Node) -> Result<Value, serde_json::Error> {
    let shallow = json_text::is_shallow(text.as_bytes());
    if text.starts_with('{') {
        pick_object(text.as_bytes(), node, shallow).map(Value::Object)
    } else if shallow {
        serde_json::from_str(text)
    } else {
        json_text::parse_deep(text.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths(list: &[&str]) -> PayloadPaths {
        let mut p = PayloadPaths::new();
        for path in list {
            p.add(&path.split('.').map(str::to_owned).collect::<Vec<_>>());
        }
        p
    }

    #[test]
    fn keeps_only_the_named_paths() {
        let body = br#"{"number": 42, "action": "opened", "type": "pr",
            "pull_request": {"title": "Fix", "body": "long", "user": {"login": "x"}},
            "list": [1, {"a": 2}], "big": 123456789012345678901234567890}"#;
        let picked = paths(&[
            "number",
            "pull_request.title",
            "list.1.a",
            "big",
            "missing.x",
        ])
        .pick(body)
        .unwrap();
        // An int past 64 bits is in the tree as the nearest float, and in the text.
        assert!(picked.exotic);
        assert_eq!(
            value_text(&picked.text, &["big".to_owned()]),
            Some("123456789012345678901234567890")
        );
        assert_eq!(
            Value::Object(picked.payload),
            json!({"number": 42, "type": "pr", "pull_request": {"title": "Fix"},
                   "list": [1, {"a": 2}], "big": 1.2345678901234568e29})
        );
    }

    #[test]
    fn value_text_finds_what_lookup_finds() {
        let body = br#" {"a": {"b": [1, 2], "b": {"c": -0}}, "s": "x", "a2": 1e400}"#;
        let at = |path: &str| {
            let path: Vec<String> = path.split('.').map(str::to_owned).collect();
            value_text(body, &path)
        };
        assert_eq!(at("a.b"), Some(r#"{"c": -0}"#));
        assert_eq!(at("a.b.c"), Some("-0"));
        assert_eq!(at("a2"), Some("1e400"));
        assert_eq!(at("s.x"), None);
        assert_eq!(at("a.b.0"), None);
        assert_eq!(at("missing"), None);
        let deep = format!(
            "{{\"x\": {}1{}, \"k\": 7}}",
            "[".repeat(900),
            "]".repeat(900)
        );
        assert_eq!(value_text(deep.as_bytes(), &["k".to_owned()]), Some("7"));
    }

    #[test]
    fn refuses_what_only_the_full_parse_answers_exactly() {
        let p = paths(&["a"]);
        assert!(p.pick(b"[1]").is_none());
        assert!(p.pick(b"{\"a\": 1").is_none());
        assert!(p.pick(b"{\"a\": 1} x").is_none());
        assert!(p.pick(b"{\"a\": \"\xff\"}").is_none());
        assert!(p.pick(b"a=1&b=2").is_none());
        let too_deep = format!("{{\"a\": {}{}}}", "[".repeat(1200), "]".repeat(1200));
        assert!(p.pick(too_deep.as_bytes()).is_none());
        assert!(PayloadPaths::everything().pick(b"{}").is_none());
        // Escaped keys and values are fine.
        let picked = p.pick(br#"{"\"a\"": 1, "a": "x\ny"}"#).unwrap();
        assert_eq!(Value::Object(picked.payload), json!({"a": "x\ny"}));
    }

    #[test]
    fn reads_what_python_reads_as_json() {
        let p = paths(&["a", "b.c"]);
        let picked = p
            .pick(b"\xEF\xBB\xBF{\"a\": \"\\ud800\", \"z\": 1}")
            .unwrap();
        assert!(picked.rewritten);
        assert_eq!(Value::Object(picked.payload), json!({"a": "\u{FFFD}"}));
        let deep = format!(
            "{{\"x\": {}1{}, \"a\": 1, \"b\": {{\"c\": {}2{}, \"d\": 0}}}}",
            "[".repeat(600),
            "]".repeat(600),
            "[".repeat(300),
            "]".repeat(300)
        );
        let picked = p.pick(deep.as_bytes()).unwrap();
        assert!(!picked.rewritten);
        assert_eq!(picked.payload["a"], json!(1));
        assert!(picked.payload["b"]["c"].is_array());
        assert!(picked.payload["b"].get("d").is_none());
    }

    #[test]
    fn a_body_that_is_not_utf8_in_a_skipped_string_is_not_picked() {
        // Found by the payload_pick fuzz target: 0xd1 starts a sequence `"` cannot end.
        let body = b"{\"objkind\":\":obJect_kind\xd1\"\n\n\n\n}\t\n";
        assert!(paths(&["a"]).pick(body).is_none());
        assert!(matches!(
            json_text::read(body),
            json_text::JsonRead::NotJson
        ));
        // The issue's input (fuzz/seeds/payload_pick), with the target's default paths.
        let body = b"{\"~\":\"\\te\xdeobjecy\"}";
        assert!(paths(&["a", "b.c", "d.e.f"]).pick(body).is_none());
        assert!(matches!(
            json_text::read(body),
            json_text::JsonRead::NotJson
        ));
    }

    #[test]
    fn a_shown_container_is_built_only_as_far_as_its_cut_shows_and_renders_the_same() {
        use crate::template::Template;
        let unit = format!("{}1{}", "[".repeat(50), "]".repeat(50));
        let chains = vec![unit; 5000].join(",");
        let late = "x".repeat(3000);
        let body = format!(
            r#"{{"a": {{"k": "first", "list": [{chains}], "k": {{"late": "{late}"}}, "n": 12345678901234567890123}}, "b": {{"c": [1.5, true, null, "\u00e9"]}}}}"#
        );
        let template = Template::compile("A={a} C={b.c}");
        let mut shown = PayloadPaths::new();
        template.add_paths(&mut shown);
        let picked = shown.pick(body.as_bytes()).unwrap().payload;
        let full: Map<String, Value> = serde_json::from_str(&body).unwrap();
        assert_eq!(render(&template, &picked), render(&template, &full));
        let kept = serde_json::to_string(&picked["a"]["list"]).unwrap();
        assert!(kept.len() < 20_000, "built {} bytes of a list", kept.len());
        // The repeated key replaced its value in the first one's place.
        assert!(picked["a"]["k"].is_object());
        // A filter's path is built whole.
        let mut whole = shown.clone();
        whole.add(&["a".to_owned()]);
        let picked = whole.pick(body.as_bytes()).unwrap().payload;
        assert_eq!(picked["a"], full["a"]);
    }

    #[test]
    fn a_container_shown_and_read_deeper_is_built_whole() {
        use crate::template::Template;
        let template = Template::compile("{a} {a.b}");
        let mut shown = PayloadPaths::new();
        template.add_paths(&mut shown);
        let body = br#"{"a": {"b": 1, "c": 2}, "d": 3}"#;
        let picked = shown.pick(body).unwrap().payload;
        let full: Map<String, Value> = serde_json::from_slice(body).unwrap();
        let want = "{\n  \"b\": 1,\n  \"c\": 2\n} 1";
        assert_eq!(render(&template, &picked), want);
        assert_eq!(render(&template, &full), want);
    }

    /// `template` rendered on `payload` (no raw text, no body text).
    fn render(template: &crate::template::Template, payload: &Map<String, Value>) -> String {
        template.render(&crate::template::RenderContext {
            payload,
            event_type: &Value::Null,
            raw: None,
            text: None,
        })
    }

    #[test]
    fn duplicate_keys_keep_the_last_value_like_the_full_parse() {
        let body = br#"{"a": {"b": 1}, "a": "s", "c": {"d": 1}, "c": {"d": 2, "e": 3}}"#;
        let picked = paths(&["a.b", "c.d"]).pick(body).unwrap().payload;
        assert_eq!(Value::Object(picked), json!({"a": "s", "c": {"d": 2}}));
    }
}
