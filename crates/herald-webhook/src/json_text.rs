//! JSON as Python's `json` reads it from bytes (spec §6 rule 6): a UTF-8 byte-order mark
//! is skipped, lone surrogate escapes are valid, and nesting goes as deep as Python's
//! default recursion limit allows. serde_json refuses the last two, so a body with lone
//! surrogates is parsed (and stored) with each one replaced by U+FFFD, as a Rust string
//! cannot hold a lone surrogate, and deep bodies are parsed on a stack that grows as
//! needed. Number literals beyond what a tree holds (see [`herald_protocol::json_literal`]) are parsed
//! through stand-ins.

use herald_protocol::json_depth::nesting_depth;
use herald_protocol::json_literal as literal;
use serde::Deserialize;
use serde_json::{Map, Value};

/// The deepest nesting accepted, about what Python's default recursion limit allows.
pub const MAX_DEPTH: usize = 1000;
/// Bodies with at most this many `[`/`{` take serde_json's ordinary parse.
const SHALLOW_OPENERS: usize = 100;
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// What a body is, read as JSON.
#[derive(Debug, Clone, PartialEq)]
pub enum JsonRead {
    /// A JSON object; `rewritten` when its text had to be changed to be parsed (a
    /// byte-order mark or a lone surrogate), so it cannot be stored as received.
    Object {
        map: Map<String, Value>,
        rewritten: bool,
    },
    /// Valid JSON whose top-level value is not an object.
    NotObject,
    /// JSON nested deeper than [`MAX_DEPTH`].
    TooDeep,
    /// Not JSON at all.
    NotJson,
}

/// Reads `body` as Python's `json.loads(body)` would.
pub fn read(body: &[u8]) -> JsonRead {
    let Some(text) = readable(body) else {
        return JsonRead::TooDeep;
    };
    let rewritten = text.changed;
    let tree = text.tree_bytes();
    let parsed = if text.shallow {
        serde_json::from_slice::<Value>(&tree)
    } else {
        parse_deep(&tree)
    };
    match parsed {
        Ok(Value::Object(map)) => JsonRead::Object { map, rewritten },
        Ok(_) => JsonRead::NotObject,
        Err(_) => JsonRead::NotJson,
    }
}

/// A body's text as serde_json can read it.
pub struct Readable<'a> {
    /// The text: the body's own bytes, or a copy without its byte-order mark and with
    /// lone surrogate escapes replaced.
    pub bytes: std::borrow::Cow<'a, [u8]>,
    /// Whether `bytes` differs from the body.
    pub changed: bool,
    /// Few enough `[`/`{` that serde_json's own nesting limit is never reached.
    pub shallow: bool,
    /// Holds a number literal that a tree cannot hold as Python does (see
    /// [`herald_protocol::json_literal`]): what renders the payload reads its numbers from `bytes`.
    pub exotic: bool,
}

impl Readable<'_> {
    /// The text a tree is parsed from: `bytes`, with stand-ins for exotic literals.
    pub fn tree_bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        if self.exotic {
            literal::tree_text(&self.bytes)
        } else {
            std::borrow::Cow::Borrowed(&self.bytes)
        }
    }
}

/// The body made readable for serde_json, or `None` when it nests deeper than
/// [`MAX_DEPTH`].
pub fn readable(body: &[u8]) -> Option<Readable<'_>> {
    let (text, bom) = match body.strip_prefix(BOM) {
        Some(rest) => (rest, true),
        None => (body, false),
    };
    let shallow = is_shallow(text);
    if !shallow && nesting_depth(text) > MAX_DEPTH {
        return None;
    }
    let (bytes, changed) = match replace_lone_surrogates(text) {
        Some(fixed) => (std::borrow::Cow::Owned(fixed), true),
        None => (std::borrow::Cow::Borrowed(text), bom),
    };
    let exotic = literal::has_exotic(&bytes);
    Some(Readable {
        bytes,
        changed,
        shallow,
        exotic,
    })
}

/// Whether a body starts with a UTF-8 byte-order mark.
pub fn has_bom(body: &[u8]) -> bool {
    body.starts_with(BOM)
}

/// Few enough `[`/`{` that serde_json's own nesting limit (128) cannot be reached.
pub(crate) fn is_shallow(text: &[u8]) -> bool {
    memchr::memchr2_iter(b'[', b'{', text)
        .take(SHALLOW_OPENERS + 1)
        .count()
        <= SHALLOW_OPENERS
}

/// Parses without serde_json's nesting limit, growing the stack instead of overflowing.
pub(crate) fn parse_deep(input: &[u8]) -> serde_json::Result<Value> {
    let mut de = serde_json::Deserializer::from_slice(input);
    de.disable_recursion_limit();
    let value = Value::deserialize(serde_stacker::Deserializer::new(&mut de))?;
    de.end()?;
    Ok(value)
}

/// The text with every lone surrogate escape (`\ud800` without its pair) replaced by
/// `\ufffd`, or `None` when it has none.
fn replace_lone_surrogates(text: &[u8]) -> Option<Vec<u8>> {
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0;
    let mut i = 0;
    while let Some(found) = text.get(i..).and_then(|rest| memchr::memchr(b'\\', rest)) {
        let at = i + found;
        if text.get(at + 1) != Some(&b'u') {
            i = at + 2;
            continue;
        }
        let Some(unit) = hex4(text, at + 2) else {
            i = at + 2;
            continue;
        };
        let paired = (0xD800..0xDC00).contains(&unit)
            && text.get(at + 6) == Some(&b'\\')
            && text.get(at + 7) == Some(&b'u')
            && hex4(text, at + 8).is_some_and(|low| (0xDC00..0xE000).contains(&low));
        if paired {
            i = at + 12;
        } else if (0xD800..0xE000).contains(&unit) {
            let buf = out.get_or_insert_with(|| Vec::with_capacity(text.len()));
            buf.extend_from_slice(&text[copied..at]);
            buf.extend_from_slice(b"\\ufffd");
            copied = at + 6;
            i = at + 6;
        } else {
            i = at + 6;
        }
    }
    let mut buf = out?;
    buf.extend_from_slice(&text[copied..]);
    Some(buf)
}

fn hex4(text: &[u8], at: usize) -> Option<u32> {
    let digits = text.get(at..at + 4)?;
    let s = std::str::from_utf8(digits).ok()?;
    u32::from_str_radix(s, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(body: &[u8]) -> (Value, bool) {
        match read(body) {
            JsonRead::Object { map, rewritten } => (Value::Object(map), rewritten),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn python_reads_these_as_json() {
        assert_eq!(object(b"\xEF\xBB\xBF{\"a\": 1}"), (json!({"a": 1}), true));
        assert_eq!(
            object(br#"{"a": "x\ud800y", "b": "\ud83d\ude00", "c": "\udc00"}"#),
            (
                json!({"a": "x\u{FFFD}y", "b": "\u{1F600}", "c": "\u{FFFD}"}),
                true
            )
        );
        assert_eq!(
            object(br#"{"a": "\\ud800"}"#),
            (json!({"a": "\\ud800"}), false)
        );
        let deep = format!("{{\"a\": {}1{}}}", "[".repeat(900), "]".repeat(900));
        let (v, rewritten) = object(deep.as_bytes());
        assert!(!rewritten);
        assert!(v["a"].is_array());
    }

    #[test]
    fn limits_and_refusals() {
        let too_deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert_eq!(read(too_deep.as_bytes()), JsonRead::TooDeep);
        let at_limit = format!(
            "{{\"a\":{}{}}}",
            "[".repeat(MAX_DEPTH - 1),
            "]".repeat(MAX_DEPTH - 1)
        );
        assert!(matches!(read(at_limit.as_bytes()), JsonRead::Object { .. }));
        assert_eq!(read(b"[1]"), JsonRead::NotObject);
        assert_eq!(read(b"a=1"), JsonRead::NotJson);
        // Brackets inside strings do not count.
        let in_strings = format!("{{\"a\": \"{}\"}}", "[".repeat(5000));
        assert!(matches!(
            read(in_strings.as_bytes()),
            JsonRead::Object { .. }
        ));
    }
}
