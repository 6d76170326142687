//! Number literals as Python's `json` reads them, from their text.
//!
//! Python reads a literal without `.`, `e` or `E` as an int of any size and every other
//! one as a float (`1e400` is `inf`). serde_json's numbers hold 64-bit integers and
//! finite floats, so a body with a literal beyond those ("exotic": an int past 64 bits,
//! `-0`, a float that overflows) is parsed into a tree through stand-ins, and whatever
//! must show it as Python does reads the number from the text (herald-webhook's
//! templates).

use std::borrow::Cow;

/// A number literal as Python holds it.
#[derive(Debug, Clone, PartialEq)]
pub enum NumberText {
    /// An int, in canonical digits (no leading zeros, no `-0`).
    Int(String),
    Float(f64),
}

/// Python's reading of the number literal `text` (valid JSON, as the caller has checked).
pub fn classify(text: &str) -> NumberText {
    if text.contains(['.', 'e', 'E']) {
        return NumberText::Float(text.parse::<f64>().unwrap_or(f64::NAN));
    }
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() {
        return NumberText::Int("0".to_owned());
    }
    NumberText::Int(if negative {
        format!("-{digits}")
    } else {
        digits.to_owned()
    })
}

/// A literal a serde_json tree cannot hold as Python does.
enum Exotic {
    /// An int past 64 bits: serde_json reads it as the nearest float, which is the
    /// tree's stand-in.
    Kept,
    /// What the tree holds in its place, written into the text serde_json reads.
    Replaced(&'static [u8]),
}

/// `None` when serde_json reads `literal` as Python does (or it is no JSON number at
/// all: then serde_json refuses it, as Python does).
fn exotic(literal: &[u8]) -> Option<Exotic> {
    let exponent = literal.iter().any(|b| matches!(b, b'e' | b'E'));
    let float = exponent || literal.contains(&b'.');
    // The common literals are settled by their length: a float without an exponent
    // overflows only past 309 digits, an int leaves 64 bits only past 18.
    if (float && !exponent && literal.len() < 309)
        || (!float && literal.len() < 19 && literal != b"-0")
        || !is_json_number(literal)
    {
        return None;
    }
    let text = std::str::from_utf8(literal).ok()?;
    if !float && text == "-0" {
        return Some(Exotic::Replaced(b"0"));
    }
    if !float && (text.parse::<i64>().is_ok() || text.parse::<u64>().is_ok()) {
        return None;
    }
    // serde_json reads a float, or an int past 64 bits, as the nearest double; one
    // that overflows it refuses.
    match text.parse::<f64>() {
        Ok(f) if f == f64::INFINITY => Some(Exotic::Replaced(b"1.7976931348623157e308")),
        Ok(f) if f == f64::NEG_INFINITY => Some(Exotic::Replaced(b"-1.7976931348623157e308")),
        _ if float => None,
        _ => Some(Exotic::Kept),
    }
}

/// JSON's number grammar: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
fn is_json_number(literal: &[u8]) -> bool {
    let digits = |at: usize| {
        literal[at.min(literal.len())..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count()
    };
    let mut at = usize::from(literal.first() == Some(&b'-'));
    let int = digits(at);
    if int == 0 || (int > 1 && literal[at] == b'0') {
        return false;
    }
    at += int;
    if literal.get(at) == Some(&b'.') {
        let frac = digits(at + 1);
        if frac == 0 {
            return false;
        }
        at += 1 + frac;
    }
    if matches!(literal.get(at), Some(b'e' | b'E')) {
        at += 1;
        if matches!(literal.get(at), Some(b'+' | b'-')) {
            at += 1;
        }
        let exp = digits(at);
        if exp == 0 {
            return false;
        }
        at += exp;
    }
    at == literal.len()
}

/// Whether `text` (JSON) holds a number literal that a serde_json tree cannot hold as
/// Python does.
pub fn has_exotic(text: &[u8]) -> bool {
    let mut found = false;
    scan(text, |_, literal| {
        found |= exotic(literal).is_some();
        !found
    });
    found
}

/// `text` with each exotic literal replaced by what the tree holds in its place: a float
/// that overflows becomes the largest finite float of its sign, `-0` becomes `0` (ints
/// past 64 bits stay: serde_json reads them as the nearest float).
pub fn tree_text(text: &[u8]) -> Cow<'_, [u8]> {
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0;
    scan(text, |at, literal| {
        if let Some(Exotic::Replaced(replacement)) = exotic(literal) {
            let buf = out.get_or_insert_with(|| Vec::with_capacity(text.len()));
            buf.extend_from_slice(&text[copied..at]);
            buf.extend_from_slice(replacement);
            copied = at + literal.len();
        }
        true
    });
    match out {
        Some(mut buf) => {
            buf.extend_from_slice(&text[copied..]);
            Cow::Owned(buf)
        }
        None => Cow::Borrowed(text),
    }
}

/// Calls `each(offset, literal)` for every number literal outside strings, while it
/// answers `true`.
fn scan(text: &[u8], mut each: impl FnMut(usize, &[u8]) -> bool) {
    let mut i = 0;
    while let Some(&b) = text.get(i) {
        match b {
            b'"' => match string_end(text, i + 1) {
                Some(end) => i = end,
                None => return,
            },
            b'-' | b'0'..=b'9' => {
                let start = i;
                while matches!(
                    text.get(i),
                    Some(b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
                ) {
                    i += 1;
                }
                if !each(start, &text[start..i]) {
                    return;
                }
            }
            _ => i += 1,
        }
    }
}

/// The index just past the closing quote of the string whose body starts at `at`.
fn string_end(text: &[u8], mut at: usize) -> Option<usize> {
    loop {
        at += memchr::memchr2(b'"', b'\\', text.get(at..)?)?;
        if text[at] == b'\\' {
            at += 2;
        } else {
            return Some(at + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exotic_literals_are_found_outside_strings_only() {
        for body in [
            r#"{"a": 123456789012345678901234567890}"#,
            r#"{"a": [1, -0]}"#,
            r#"{"a": 1.0e400}"#,
            r#"{"a": -1E309}"#,
            r#"{"a": -9223372036854775809}"#,
            r#"{"a": 18446744073709551616}"#,
            r#"{"a": 1E+400}"#,
        ] {
            assert!(has_exotic(body.as_bytes()), "{body}");
        }
        for body in [
            r#"{"a": "123456789012345678901234567890", "b": "-0", "c": "1e400"}"#,
            r#"{"a\"": "\"1e400", "b": -0.0, "c": 1e-400, "d": 0}"#,
            r#"{"a": -9223372036854775808, "b": 18446744073709551615, "c": 1.5e308}"#,
            r#"{"a": 0e400, "b": -1e-400, "c": -0e5, "d": -0.0}"#,
            // Not JSON: left for serde_json to refuse, as Python does.
            r#"{"a": 1.e400, "b": 01e400, "c": -e400, "d": 1e}"#,
        ] {
            assert!(!has_exotic(body.as_bytes()), "{body}");
        }
    }

    #[test]
    fn the_tree_text_holds_stand_ins_serde_json_reads() {
        let body = br#"{"inf": 1e400, "ninf": -1e400, "z": -0, "big": 123456789012345678901234567890, "s": "-0 1e400"}"#;
        let text = tree_text(body);
        assert_eq!(
            std::str::from_utf8(&text).unwrap(),
            r#"{"inf": 1.7976931348623157e308, "ninf": -1.7976931348623157e308, "z": 0, "big": 123456789012345678901234567890, "s": "-0 1e400"}"#
        );
        assert!(serde_json::from_slice::<serde_json::Value>(&text).is_ok());
        assert!(matches!(tree_text(b"{\"a\": 1}"), Cow::Borrowed(_)));
        // An int too large even for a double is read as the largest one.
        let huge = format!(
            "{{\"a\": 1{}, \"b\": -1{}}}",
            "0".repeat(309),
            "0".repeat(400)
        );
        assert!(has_exotic(huge.as_bytes()));
        let text = tree_text(huge.as_bytes());
        let tree: serde_json::Value = serde_json::from_slice(&text).unwrap();
        assert_eq!(tree["a"], serde_json::json!(f64::MAX));
        assert_eq!(tree["b"], serde_json::json!(-f64::MAX));
    }

    #[test]
    fn only_json_numbers_are_numbers() {
        for good in ["0", "-0", "12", "-1.5", "1e5", "1E+5", "2.50e-3"] {
            assert!(is_json_number(good.as_bytes()), "{good}");
        }
        for bad in [
            "", "-", "01", "1.", ".5", "1e", "1e+", "+1", "1.e4", "--1", "1-2", "0x1",
        ] {
            assert!(!is_json_number(bad.as_bytes()), "{bad}");
        }
    }

    #[test]
    fn literals_read_as_python_reads_them() {
        assert_eq!(classify("-0"), NumberText::Int("0".into()));
        assert_eq!(classify("007"), NumberText::Int("7".into()));
        assert_eq!(
            classify("-123456789012345678901234567890"),
            NumberText::Int("-123456789012345678901234567890".into())
        );
        assert_eq!(classify("1e400"), NumberText::Float(f64::INFINITY));
        assert_eq!(classify("2.50"), NumberText::Float(2.5));
    }
}
