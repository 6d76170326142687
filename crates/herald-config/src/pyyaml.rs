//! Plain YAML scalars resolved exactly as PyYAML's safe loader resolves them.
//!
//! Hermes reads `config.yaml` with PyYAML, whose implicit types are YAML 1.1's with its
//! own patterns: `y` and `n` stay strings while `yes`/`on`/`off` are booleans, `012`
//! is octal, `1:30` is sexagesimal, `1e5` is a string (an exponent needs a `.` and a
//! sign). serde-saphyr types plain scalars its own way, so every plain, untagged scalar
//! is typed again here from its source text.

use crate::node::NodeValue;
use regex::Regex;
use std::sync::LazyLock;

static BOOL: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$")
        .ok()
});
static NULL: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"^(?:~|null|Null|NULL|)$").ok());
static INT: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$",
    )
    .ok()
});
static FLOAT: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9_]+(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
    )
    .ok()
});

fn matches(re: &LazyLock<Option<Regex>>, text: &str) -> bool {
    re.as_ref().is_some_and(|re| re.is_match(text))
}

/// The value PyYAML's safe loader gives a plain, untagged scalar written as `text`.
/// (Timestamps, which PyYAML makes dates, stay strings.)
pub fn resolve_plain(text: &str) -> NodeValue {
    if matches(&BOOL, text) {
        let lower = text.to_ascii_lowercase();
        return NodeValue::Bool(matches!(lower.as_str(), "yes" | "true" | "on"));
    }
    if matches(&NULL, text) {
        return NodeValue::Null;
    }
    if matches(&INT, text) {
        return int(text);
    }
    if matches(&FLOAT, text) {
        return NodeValue::Float(float(text));
    }
    NodeValue::Str(text.to_owned())
}

/// PyYAML's `construct_yaml_int`.
fn int(text: &str) -> NodeValue {
    let cleaned: String = text.chars().filter(|c| *c != '_').collect();
    let (sign, digits) = match cleaned.as_bytes().first() {
        Some(b'-') => (-1, &cleaned[1..]),
        Some(b'+') => (1, &cleaned[1..]),
        _ => (1, cleaned.as_str()),
    };
    let parsed = if digits == "0" {
        Some(0)
    } else if let Some(bin) = digits.strip_prefix("0b") {
        i128::from_str_radix(bin, 2).ok()
    } else if let Some(hex) = digits.strip_prefix("0x") {
        i128::from_str_radix(hex, 16).ok()
    } else if digits.starts_with('0') {
        i128::from_str_radix(digits, 8).ok()
    } else if digits.contains(':') {
        sexagesimal(digits).map(|v| v as i128)
    } else {
        digits.parse::<i128>().ok()
    };
    match parsed {
        Some(v) => NodeValue::Int(sign * v),
        // Beyond i128 (Python ints have no bound): the nearest float.
        None => NodeValue::Float(sign as f64 * digits.parse::<f64>().unwrap_or(f64::NAN)),
    }
}

/// PyYAML's `construct_yaml_float`.
fn float(text: &str) -> f64 {
    let cleaned: String = text
        .chars()
        .filter(|c| *c != '_')
        .collect::<String>()
        .to_ascii_lowercase();
    let (sign, rest) = match cleaned.as_bytes().first() {
        Some(b'-') => (-1.0, &cleaned[1..]),
        Some(b'+') => (1.0, &cleaned[1..]),
        _ => (1.0, cleaned.as_str()),
    };
    if rest == ".inf" {
        return sign * f64::INFINITY;
    }
    if rest == ".nan" {
        return f64::NAN;
    }
    if rest.contains(':') {
        return sign * sexagesimal(rest).unwrap_or(f64::NAN);
    }
    sign * rest.parse::<f64>().unwrap_or(f64::NAN)
}

/// `a:b:c` as a * 3600 + b * 60 + c (the last part may be a float).
fn sexagesimal(text: &str) -> Option<f64> {
    let mut value = 0.0;
    for part in text.split(':') {
        value = value * 60.0 + part.parse::<f64>().ok()?;
    }
    Some(value)
}

/// The source text of a scalar when it is plain and untagged (the only scalars whose
/// type is implicit), else `None`.
pub fn plain_source(source: &str, start: usize, len: usize) -> Option<&str> {
    let raw = source.get(start..start.checked_add(len)?)?;
    if raw.is_empty() || raw.contains('\n') || raw.starts_with(['"', '\'']) {
        return None;
    }
    let before = source.get(..start)?;
    let same_line = &before[before.rfind('\n').map_or(0, |i| i + 1)..];
    if same_line.trim().is_empty() {
        // The scalar starts its line: the line above may open a block scalar.
        let above = before[..before.len() - same_line.len()].trim_end();
        let last_line = &above[above.rfind('\n').map_or(0, |i| i + 1)..];
        let code = last_line.split(" #").next().unwrap_or("").trim_end();
        if code
            .split_whitespace()
            .last()
            .is_some_and(is_block_indicator)
        {
            return None;
        }
    } else {
        for token in same_line.split_whitespace().rev() {
            if token.starts_with('!') {
                return None;
            }
            if !token.starts_with('&') {
                break;
            }
        }
    }
    Some(raw)
}

fn is_block_indicator(token: &str) -> bool {
    let mut chars = token.chars();
    matches!(chars.next(), Some('|' | '>'))
        && chars.all(|c| c == '-' || c == '+' || c.is_ascii_digit())
}

#[cfg(test)]
#[path = "pyyaml_tests.rs"]
mod tests;
