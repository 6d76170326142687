//! YAML syntax errors as a user can act on them: the parser's position and message, plus
//! the likely cause when the text shows one (an unclosed bracket or quote, a tab in the
//! indentation, a missing space after `:`). Parsers often stop a line after the mistake,
//! so the cause names its own line.

use crate::error::ConfigError;
use std::path::Path;

/// How many lines above the reported one are searched for the cause.
const LOOK_BACK: usize = 5;

/// The syntax error for `text`, with the likely cause when one is found.
pub fn syntax_error(path: &Path, text: &str, e: &serde_saphyr::Error) -> ConfigError {
    let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
    let mut message = parser_message(&e.to_string());
    if let Some(cause) = likely_cause(text, line) {
        message.push_str(&format!(" (likely cause: {cause})"));
    }
    ConfigError::Syntax {
        path: path.to_path_buf(),
        line,
        column,
        message,
    }
}

/// The parser's first line without its own `error: line N column M:` prefix (the
/// position is already given).
fn parser_message(text: &str) -> String {
    let first = text.lines().next().unwrap_or(text);
    let rest = first.strip_prefix("error: ").unwrap_or(first);
    match rest.strip_prefix("line ").and_then(|r| r.split_once(": ")) {
        Some((position, message)) if position.contains("column") => message.to_owned(),
        _ => rest.to_owned(),
    }
}

/// The nearest cause at or above `line` (1-based), searching a few lines up.
pub fn likely_cause(text: &str, line: u64) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let last = usize::try_from(line).ok()?.min(lines.len());
    let first = last.saturating_sub(LOOK_BACK).max(1);
    (first..=last).rev().find_map(|n| {
        cause_on_line(lines[n - 1]).map(|(what, advice)| format!("{what} on line {n}{advice}"))
    })
}

/// What is wrong on the line, and advice to follow it.
fn cause_on_line(line: &str) -> Option<(&'static str, &'static str)> {
    let indent: String = line.chars().take_while(|c| c.is_whitespace()).collect();
    if indent.contains('\t') {
        return Some((
            "a tab in the indentation",
            "; YAML indents with spaces only",
        ));
    }
    let code = without_comment(line);
    if let Some(open) = unclosed(code) {
        return Some((open, ""));
    }
    if missing_space_after_colon(code) {
        return Some(("a missing space after `:`", "; write `key: value`"));
    }
    None
}

/// The line up to an unquoted ` #` comment.
fn without_comment(line: &str) -> &str {
    let mut quote = None;
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '#') if prev.is_whitespace() => return &line[..i],
            _ => {}
        }
        prev = c;
    }
    line
}

/// An opening bracket or quote the line never closes.
fn unclosed(code: &str) -> Option<&'static str> {
    let mut quote = None;
    let (mut square, mut curly) = (0i32, 0i32);
    for c in code.chars() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '[') => square += 1,
            (None, ']') => square -= 1,
            (None, '{') => curly += 1,
            (None, '}') => curly -= 1,
            _ => {}
        }
    }
    match quote {
        Some('"') => Some("a `\"` quote that is never closed"),
        Some(_) => Some("a `'` quote that is never closed"),
        None if square > 0 => Some("an unclosed `[`"),
        None if curly > 0 => Some("an unclosed `{`"),
        None => None,
    }
}

/// `key:value` where `key: value` was meant (URLs such as `http://x` are left alone).
fn missing_space_after_colon(code: &str) -> bool {
    let item = code.trim_start().trim_start_matches("- ");
    let Some((key, rest)) = item.split_once(':') else {
        return false;
    };
    let key_like = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    key_like
        && rest
            .chars()
            .next()
            .is_some_and(|c| !c.is_whitespace() && c != '/' && c != ':')
}

/// The numbers of prompt lines whose unquoted ` #` starts a YAML comment, cutting the
/// prompt short.
pub fn prompts_cut_by_comments(text: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter_map(|(i, line)| {
            let value = line.trim_start().strip_prefix("prompt:")?.trim_start();
            let plain = !value.starts_with(['"', '\'', '|', '>']);
            (plain && without_comment(line).len() < line.len()).then_some(i + 1)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes() {
        let text = "a:\n  b: [1, 2\n  c: 3\n";
        assert_eq!(
            likely_cause(text, 3).as_deref(),
            Some("an unclosed `[` on line 2")
        );
        assert_eq!(
            likely_cause("a:\n\tb: 1\n", 2).as_deref(),
            Some("a tab in the indentation on line 2; YAML indents with spaces only")
        );
        assert_eq!(
            likely_cause("a:\n  port:1\n  b: 2\n", 3).as_deref(),
            Some("a missing space after `:` on line 2; write `key: value`")
        );
        assert_eq!(likely_cause("url: http://x\nb: [1]\n", 2), None);
        assert_eq!(
            likely_cause("p: \"open\nq: 1\n", 1).as_deref(),
            Some("a `\"` quote that is never closed on line 1")
        );
        assert_eq!(
            parser_message("error: line 7 column 17: illegal placement of ':' indicator\nmore"),
            "illegal placement of ':' indicator"
        );
    }

    #[test]
    fn prompt_comments() {
        let text = "r:\n  prompt: Issue #{number} opened\n  other: a #b\n  prompt: \"quoted #x\"\n  prompt: fine#x\n";
        assert_eq!(prompts_cut_by_comments(text), vec![2]);
    }
}
