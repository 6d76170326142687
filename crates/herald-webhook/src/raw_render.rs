//! `json.dumps(payload, indent=2)` cut to its first characters, written straight from
//! the body's text without building the payload.
//!
//! The default prompt and `{__raw__}` show the whole payload cut to 4,000 characters;
//! building a tree of a 1 MB body only to show its start costs many times the body
//! (every JSON value is an 80-byte node). This writer reads the text once and stops
//! writing at the cut. The one thing a tree does differently is a repeated key (the
//! value shown is the last one, at the first one's place): when a key repeats in an
//! object whose keys were written, [`indented_cut`] answers `None` and the caller
//! builds the tree.

use crate::pyjson;
use std::collections::HashSet;

/// An object or array being read.
struct Frame {
    is_object: bool,
    /// Keys written so far (checked against repeats); `None` once writing has stopped
    /// before this container was opened (its keys are not shown).
    keys: Option<HashSet<String>>,
}

/// `json.dumps(value, indent=2)` of the JSON text `text` (valid JSON, as the caller has
/// checked), cut to `max_chars`; `None` when a repeated key would change what is shown.
pub fn indented_cut(text: &[u8], max_chars: usize) -> Option<String> {
    let mut r = Reader { text, at: 0 };
    let mut out = String::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut expect_value = true;
    loop {
        let writing = out.len() <= max_chars;
        if expect_value {
            expect_value = r.value_start(&mut out, &mut stack, writing)?;
            continue;
        }
        let depth = stack.len();
        let Some(frame) = stack.last_mut() else {
            break;
        };
        match r.next_byte()? {
            b',' => {
                if writing {
                    out.push(',');
                    pyjson::newline(&mut out, depth);
                }
                if frame.is_object {
                    r.key(&mut out, frame, writing)?;
                }
                expect_value = true;
            }
            close @ (b'}' | b']') => {
                stack.pop();
                if writing {
                    pyjson::newline(&mut out, depth - 1);
                    out.push(close as char);
                }
            }
            _ => return None,
        }
    }
    Some(pyjson::cut_chars(out, max_chars))
}

/// A value's rendering in a template ([`pyjson::template_value`]) written from its JSON
/// text `text` (valid JSON, as the caller has checked): strings as themselves, numbers
/// in Python's text form, `True`/`False`/`None`, containers as indented JSON cut to
/// `max_chars`; `None` when a repeated key would change what is shown.
pub fn template_value(text: &str, max_chars: usize) -> Option<String> {
    let text = text.trim();
    match text.as_bytes().first()? {
        b'{' | b'[' => indented_cut(text.as_bytes(), max_chars),
        b'"' => serde_json::from_str::<String>(text).ok(),
        b't' => Some("True".to_owned()),
        b'f' => Some("False".to_owned()),
        b'n' => Some("None".to_owned()),
        _ => Some(pyjson::literal_str(text)),
    }
}

struct Reader<'a> {
    text: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn skip_ws(&mut self) {
        while matches!(self.text.get(self.at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn next_byte(&mut self) -> Option<u8> {
        self.skip_ws();
        let b = *self.text.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.text.get(self.at).copied()
    }

    /// Reads an object key and its `:`; writes it, and checks it against the keys
    /// written before in the same object.
    fn key(&mut self, out: &mut String, frame: &mut Frame, writing: bool) -> Option<()> {
        if self.next_byte()? != b'"' {
            return None;
        }
        match &mut frame.keys {
            Some(keys) => {
                let key = self.string_body()?;
                if keys.contains(&key) {
                    return None;
                }
                if writing {
                    pyjson::write_json_string(out, &key);
                    out.push_str(": ");
                    keys.insert(key);
                }
            }
            None => self.skip_string_body()?,
        }
        (self.next_byte()? == b':').then_some(())
    }

    /// Reads the start of a value: a scalar (or an empty container) whole, or a
    /// container's opening and its first key, pushing a frame for it. `Some(true)`: the
    /// container's first value comes next.
    fn value_start(
        &mut self,
        out: &mut String,
        stack: &mut Vec<Frame>,
        writing: bool,
    ) -> Option<bool> {
        let b = self.next_byte()?;
        match b {
            b'{' | b'[' => {
                let close = if b == b'{' { b'}' } else { b']' };
                if self.peek()? == close {
                    self.at += 1;
                    if writing {
                        out.push_str(if b == b'{' { "{}" } else { "[]" });
                    }
                    return Some(false);
                }
                let mut frame = Frame {
                    is_object: b == b'{',
                    keys: writing.then(HashSet::new),
                };
                if writing {
                    out.push(b as char);
                    pyjson::newline(out, stack.len() + 1);
                }
                if frame.is_object {
                    self.key(out, &mut frame, writing)?;
                }
                stack.push(frame);
                Some(true)
            }
            b'"' => {
                if writing {
                    let s = self.string_body()?;
                    pyjson::write_json_string(out, &s);
                } else {
                    self.skip_string_body()?;
                }
                Some(false)
            }
            b't' | b'f' | b'n' => {
                let word: &[u8] = match b {
                    b't' => b"rue",
                    b'f' => b"alse",
                    _ => b"ull",
                };
                if !self.text.get(self.at..)?.starts_with(word) {
                    return None;
                }
                self.at += word.len();
                if writing {
                    out.push_str(match b {
                        b't' => "true",
                        b'f' => "false",
                        _ => "null",
                    });
                }
                Some(false)
            }
            _ => {
                let start = self.at - 1;
                while matches!(
                    self.text.get(self.at),
                    Some(b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
                ) {
                    self.at += 1;
                }
                if writing {
                    let literal = std::str::from_utf8(&self.text[start..self.at]).ok()?;
                    out.push_str(&pyjson::json_literal(literal));
                }
                Some(false)
            }
        }
    }

    /// Decodes a string after its opening quote, through its closing one.
    fn string_body(&mut self) -> Option<String> {
        let start = self.at;
        let end = self.string_end()?;
        let raw = &self.text[start - 1..end];
        self.at = end;
        serde_json::from_slice::<String>(raw).ok()
    }

    fn skip_string_body(&mut self) -> Option<()> {
        self.at = self.string_end()?;
        Some(())
    }

    /// The index just past the closing quote of the string starting at `self.at`.
    fn string_end(&self) -> Option<usize> {
        let mut i = self.at;
        loop {
            let found = memchr::memchr2(b'"', b'\\', self.text.get(i..)?)?;
            i += found;
            if self.text[i] == b'\\' {
                i += 2;
            } else {
                return Some(i + 1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn python(text: &str) -> String {
        let v: Value = serde_json::from_str(text).unwrap();
        pyjson::indented(&v)
    }

    #[test]
    fn writes_what_the_tree_writes() {
        for text in [
            r#"{}"#,
            r#"{"a": 1, "b": [1, 2.50, {"c": null, "d": []}], "e": {}, "f": "x\u00e9\"y\n", "g": true, "h": false}"#,
            r#"{"big": 18446744073709551615, "f": 1e5, "g": -0.0, "u": "\ud83d\ude00"}"#,
            r#"  {"nested": [[[[1]]], [[]], {"k": {"k": {"k": "v"}}}]}  "#,
        ] {
            assert_eq!(
                indented_cut(text.as_bytes(), usize::MAX).as_deref(),
                Some(python(text).as_str()),
                "{text}"
            );
            for cut in [0, 1, 5, 17, 40] {
                let want = pyjson::cut_chars(python(text), cut);
                assert_eq!(
                    indented_cut(text.as_bytes(), cut),
                    Some(want),
                    "{text} cut {cut}"
                );
            }
        }
    }

    #[test]
    fn numbers_a_tree_cannot_hold_are_written_as_python_reads_them() {
        let text = r#"{"big": 123456789012345678901234567890, "z": -0, "inf": 1e400, "ninf": -1E400, "l": [-0, 1.0e309]}"#;
        assert_eq!(
            indented_cut(text.as_bytes(), usize::MAX).as_deref(),
            Some(
                "{\n  \"big\": 123456789012345678901234567890,\n  \"z\": 0,\n  \"inf\": Infinity,\n  \"ninf\": -Infinity,\n  \"l\": [\n    0,\n    Infinity\n  ]\n}"
            )
        );
        assert_eq!(
            template_value("123456789012345678901234567890", 10).as_deref(),
            Some("123456789012345678901234567890")
        );
        assert_eq!(template_value("-0", 10).as_deref(), Some("0"));
        assert_eq!(template_value("1e400", 10).as_deref(), Some("inf"));
        assert_eq!(
            template_value(r#""a\u00e9""#, 10).as_deref(),
            Some("a\u{e9}")
        );
        assert_eq!(template_value("true", 10).as_deref(), Some("True"));
        assert_eq!(template_value("null", 10).as_deref(), Some("None"));
        assert_eq!(template_value("[1, 2]", 3).as_deref(), Some("[\n "));
    }

    #[test]
    fn repeated_keys_that_would_show_ask_for_the_tree() {
        assert_eq!(indented_cut(br#"{"a": 1, "a": 2}"#, 1000), None);
        assert_eq!(
            indented_cut(br#"{"x": {"a": 1, "b": 2, "a": 3}}"#, 1000),
            None
        );
        // After the cut, a repeat of a key already shown still changes what is shown...
        let late = format!(r#"{{"a": 1, "pad": "{}", "a": 2}}"#, "p".repeat(100));
        assert_eq!(indented_cut(late.as_bytes(), 20), None);
        // ...but repeats inside containers opened after the cut do not.
        let hidden = format!(
            r#"{{"pad": "{}", "z": {{"a": 1, "a": 2}}}}"#,
            "p".repeat(100)
        );
        assert_eq!(
            indented_cut(hidden.as_bytes(), 20),
            Some(pyjson::cut_chars(python(&hidden), 20))
        );
    }

    #[test]
    fn deep_text_is_read_without_recursion() {
        let deep = format!("{{\"a\": {}1{}}}", "[".repeat(5000), "]".repeat(5000));
        let out = indented_cut(deep.as_bytes(), 4000).unwrap();
        assert_eq!(out.chars().count(), 4000);
    }
}
