//! Python's renderings of JSON values, reproduced exactly.
//!
//! Hermes builds prompts with `json.dumps(value, indent=2)` and compares filter values
//! through `str()`/`json.dumps(sort_keys=True)`; herald must produce the same text so
//! that a route's output does not change when a user switches.

use herald_protocol::json_literal::{self as literal, NumberText};
use serde_json::{Number, Value};
use std::fmt::Write;

/// `json.dumps(value, indent=2)`: two-space indentation, keys in payload order,
/// every non-ASCII code point escaped as `\uXXXX`.
pub fn indented(value: &Value) -> String {
    let mut out = String::new();
    write_indented(&mut out, value, 0, usize::MAX);
    out
}

/// `json.dumps(value, indent=2)` cut to its first `max_chars` code points.
pub fn indented_cut(value: &Value, max_chars: usize) -> String {
    let mut out = String::new();
    write_indented(&mut out, value, 0, max_chars);
    cut_chars(out, max_chars)
}

/// The text form used by `contains` and `regex` filters (spec §8.4).
pub fn text_form(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "None".to_owned(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::Number(n) => number(n),
        Value::Array(_) | Value::Object(_) => {
            let mut out = String::new();
            write_sorted_compact(&mut out, value);
            out
        }
    }
}

/// `json.dumps(payload, indent=2)` of an object, cut to `max_chars` (no copy of the map).
pub fn indented_object_cut(map: &serde_json::Map<String, Value>, max_chars: usize) -> String {
    let mut out = String::new();
    write_object(&mut out, map, 0, max_chars);
    cut_chars(out, max_chars)
}

/// A scalar's rendering in a template: strings as themselves, numbers in Python's text
/// form, `True`/`False`/`None`; containers as indented JSON cut to `max_chars`.
pub fn template_value(value: &Value, max_chars: usize) -> String {
    match value {
        Value::Array(_) | Value::Object(_) => indented_cut(value, max_chars),
        other => text_form(other),
    }
}

/// Keeps the first `max_chars` Unicode code points of `s`.
pub fn cut_chars(mut s: String, max_chars: usize) -> String {
    if let Some((idx, _)) = s.char_indices().nth(max_chars) {
        s.truncate(idx);
    }
    s
}

/// Writes `value` indented; stops early once `out` is longer than `limit` bytes (the
/// text is ASCII, so bytes are characters), so a cut rendering of a huge payload costs
/// only the cut.
fn write_indented(out: &mut String, value: &Value, depth: usize, limit: usize) {
    match value {
        Value::Array(items) if !items.is_empty() => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if out.len() > limit {
                    return;
                }
                if i > 0 {
                    out.push(',');
                }
                newline(out, depth + 1);
                write_indented(out, item, depth + 1, limit);
            }
            newline(out, depth);
            out.push(']');
        }
        Value::Object(map) => write_object(out, map, depth, limit),
        scalar => write_scalar(out, scalar),
    }
}

fn write_object(
    out: &mut String,
    map: &serde_json::Map<String, Value>,
    depth: usize,
    limit: usize,
) {
    if map.is_empty() {
        out.push_str("{}");
        return;
    }
    out.push('{');
    for (i, (key, item)) in map.iter().enumerate() {
        if out.len() > limit {
            return;
        }
        if i > 0 {
            out.push(',');
        }
        newline(out, depth + 1);
        write_json_string(out, key);
        out.push_str(": ");
        write_indented(out, item, depth + 1, limit);
    }
    newline(out, depth);
    out.push('}');
}

pub(crate) fn newline(out: &mut String, depth: usize) {
    out.push('\n');
    for _ in 0..depth {
        out.push_str("  ");
    }
}

fn write_sorted_compact(out: &mut String, value: &Value) {
    match value {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_sorted_compact(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            // Python sorts str keys by code point, which is UTF-8 byte order.
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_json_string(out, key);
                out.push_str(": ");
                write_sorted_compact(out, item);
            }
            out.push('}');
        }
        scalar => write_scalar(out, scalar),
    }
}

fn write_scalar(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => out.push_str(&json_number(n)),
        Value::String(s) => write_json_string(out, s),
        Value::Array(_) => out.push_str("[]"),
        Value::Object(_) => out.push_str("{}"),
    }
}

/// A JSON string with Python's `ensure_ascii=True` escapes.
pub(crate) fn write_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
}

/// A number as `json.dumps` writes it.
fn json_number(n: &Number) -> String {
    json_number_text(classify(n))
}

/// A number literal (JSON text) as `json.dumps` writes what Python read from it (floats
/// that overflow become `Infinity`).
pub(crate) fn json_literal(text: &str) -> String {
    json_number_text(literal::classify(text))
}

fn json_number_text(n: NumberText) -> String {
    match n {
        NumberText::Int(text) => text,
        NumberText::Float(f) if f.is_infinite() => {
            if f > 0.0 { "Infinity" } else { "-Infinity" }.to_owned()
        }
        NumberText::Float(f) => float_repr(f),
    }
}

/// A number as Python's `str()` writes it.
pub fn number(n: &Number) -> String {
    str_number_text(classify(n))
}

/// A number literal (JSON text) as Python's `str()` writes what it read from it.
pub fn literal_str(text: &str) -> String {
    str_number_text(literal::classify(text))
}

fn str_number_text(n: NumberText) -> String {
    match n {
        NumberText::Int(text) => text,
        NumberText::Float(f) if f.is_infinite() => if f > 0.0 { "inf" } else { "-inf" }.to_owned(),
        NumberText::Float(f) => float_repr(f),
    }
}

/// A tree's number as Python holds it: serde_json keeps ints as ints and everything
/// else as a finite float (see [`herald_protocol::json_literal`] for what only the text holds).
fn classify(n: &Number) -> NumberText {
    match n.as_f64() {
        Some(f) if n.is_f64() => NumberText::Float(f),
        _ => NumberText::Int(n.to_string()),
    }
}

/// Python's `repr(float)`: the shortest round-trip digits, fixed notation for decimal
/// exponents in `-4..16`, otherwise `d.ddde+XX`.
pub fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_owned();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.to_owned();
    }
    // Rust's `{:e}` gives the shortest round-trip digits: `-1.2345e-7`.
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if (-4..16).contains(&exp) {
        let mut out = String::from(sign);
        if exp < 0 {
            out.push_str("0.");
            for _ in 0..(-exp - 1) {
                out.push('0');
            }
            out.push_str(&digits);
        } else {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                out.push_str(&digits);
                for _ in digits.len()..int_len {
                    out.push('0');
                }
                out.push_str(".0");
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        }
        out
    } else {
        let mut out = String::from(sign);
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
        out
    }
}

/// JSON equality as spec §8.3 defines it: numbers numerically, other values by type.
pub fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => numbers_equal(x, y),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Null, Value::Null) => true,
        _ => false,
    }
}

fn numbers_equal(a: &Number, b: &Number) -> bool {
    match (classify(a), classify(b)) {
        (NumberText::Int(x), NumberText::Int(y)) => x == y,
        (NumberText::Int(x), NumberText::Float(f)) | (NumberText::Float(f), NumberText::Int(x)) => {
            x.parse::<f64>().is_ok_and(|i| i == f && f.fract() == 0.0) && int_float_exact(&x, f)
        }
        (NumberText::Float(x), NumberText::Float(y)) => x == y,
    }
}

/// An int equals a float only when the float is exactly that integer.
fn int_float_exact(int_text: &str, f: f64) -> bool {
    if f.abs() < 9.0e15 {
        return int_text.parse::<i64>().is_ok_and(|i| i as f64 == f);
    }
    // Large magnitudes: compare the float's exact integer digits.
    format!("{f:.0}") == int_text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(s: &str) -> Value {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn spec_example_renders_like_python() {
        let v = parse(r#"{"z":1,"a":[true,null,1.5],"u":"naïve ✓","e":{},"l":[]}"#);
        assert_eq!(
            indented(&v),
            "{\n  \"z\": 1,\n  \"a\": [\n    true,\n    null,\n    1.5\n  ],\n  \"u\": \"na\\u00efve \\u2713\",\n  \"e\": {},\n  \"l\": []\n}"
        );
    }

    #[test]
    fn floats_like_python_repr() {
        for (input, want) in [
            ("1.5", "1.5"),
            ("100.0", "100.0"),
            ("1e100", "1e+100"),
            ("1E2", "100.0"),
            ("0.0000001", "1e-07"),
            ("0.0001", "0.0001"),
            ("1e16", "1e+16"),
            ("123456789012345.6", "123456789012345.6"),
            ("-2.5e-5", "-2.5e-05"),
            ("-0.0", "-0.0"),
        ] {
            assert_eq!(text_form(&parse(input)), want, "{input}");
            assert_eq!(literal_str(input), want, "{input}");
        }
        assert_eq!(literal_str("1.0e400"), "inf");
        assert_eq!(json_literal("-1.0e400"), "-Infinity");
    }

    #[test]
    fn integers_of_any_size_are_exact_from_their_text() {
        assert_eq!(
            literal_str("123456789012345678901234567890"),
            "123456789012345678901234567890"
        );
        assert_eq!(literal_str("-0"), "0");
        assert_eq!(
            text_form(&parse("18446744073709551615")),
            "18446744073709551615"
        );
        assert_eq!(
            text_form(&parse("-9223372036854775808")),
            "-9223372036854775808"
        );
    }

    #[test]
    fn astral_chars_become_surrogate_pairs() {
        assert_eq!(indented(&json!("😀")), "\"\\ud83d\\ude00\"");
        assert_eq!(indented(&json!("\u{7f}\u{1}")), "\"\\u007f\\u0001\"");
    }

    #[test]
    fn text_form_sorts_keys() {
        let v = parse(r#"{"b":2,"a":[1,"é"]}"#);
        assert_eq!(text_form(&v), r#"{"a": [1, "\u00e9"], "b": 2}"#);
        assert_eq!(text_form(&json!(true)), "True");
        assert_eq!(text_form(&Value::Null), "None");
    }

    #[test]
    fn equality_is_numeric_and_typed() {
        assert!(json_equal(&parse("4"), &parse("4.0")));
        assert!(!json_equal(&parse("4"), &json!("4")));
        assert!(!json_equal(&json!(true), &parse("1")));
        assert!(json_equal(
            &parse(r#"{"a":1,"b":[2]}"#),
            &parse(r#"{"b":[2.0],"a":1}"#)
        ));
        assert!(!json_equal(&parse("4"), &parse("4.5")));
        assert!(json_equal(
            &parse("10000000000000000000000"),
            &parse("1e22")
        ));
    }

    #[test]
    fn cut_counts_code_points() {
        assert_eq!(cut_chars("héllo".to_owned(), 2), "hé");
        assert_eq!(cut_chars("hi".to_owned(), 5), "hi");
    }
}
