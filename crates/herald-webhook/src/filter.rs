//! Declarative filters (spec §8): compiled once from the route's `filters` value,
//! evaluated per request against the payload, event type and headers.

use crate::pyjson::{json_equal, text_form};
use http::HeaderMap;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Largest compiled regex program accepted in a filter.
pub const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// A compiled filter tree.
#[derive(Debug, Clone)]
pub enum CompiledFilter {
    Always,
    Never,
    All(Vec<CompiledFilter>),
    Any(Vec<CompiledFilter>),
    Not(Box<CompiledFilter>),
    Exists(FieldPath, bool),
    Missing(FieldPath),
    Equals(FieldPath, Value),
    NotEquals(FieldPath, Value),
    Contains(FieldPath, Value),
    In(FieldPath, Vec<Value>),
    InFile(FieldPath, PathBuf),
    Regex(FieldPath, FilterRegex),
}

/// A filter's regular expression, searched as Python's `re.search` does.
#[derive(Debug, Clone)]
pub struct FilterRegex {
    re: regex::Regex,
    /// The pattern has a `$`: Python's also matches just before one final newline.
    has_dollar: bool,
}

impl FilterRegex {
    /// Whether the pattern is found in `text`. A `$` (without multi-line mode) matches at
    /// the end and, as in Python, just before a final newline: searching the text without
    /// that newline finds exactly those extra matches.
    pub fn is_match(&self, text: &str) -> bool {
        self.re.is_match(text)
            || (self.has_dollar
                && text
                    .strip_suffix('\n')
                    .is_some_and(|shorter| self.re.is_match(shorter)))
    }
}

/// Where a filter's `field` points.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldPath {
    Absent,
    Payload(Vec<String>),
    /// `payload.<rest>`: the payload's own `payload` key if present, else the payload.
    PayloadKey(Vec<String>),
    EventType {
        deeper: bool,
    },
    Header(String, Vec<String>),
}

/// A problem found while compiling; the offending part never matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterIssue {
    /// Where in the filters value (e.g. `filters[0].any[1]`).
    pub at: String,
    pub message: String,
}

/// Loads the value list of an `in_file` filter.
pub trait ListLoader: Send + Sync {
    fn load(&self, path: &Path) -> Arc<Vec<Value>>;
}

/// What a filter sees.
pub struct FilterInput<'a> {
    pub payload: &'a Map<String, Value>,
    pub event_type: &'a Value,
    pub headers: &'a HeaderMap,
}

/// Turns an `in_file` value into the path to read (the home decides: see herald-config's
/// `Home::resolve`).
pub type PathResolver<'a> = &'a dyn Fn(&str) -> PathBuf;

/// Compiles a route's `filters` value; `None` (absent) matches everything.
pub fn compile(
    filters: Option<&Value>,
    home: PathResolver<'_>,
) -> (CompiledFilter, Vec<FilterIssue>) {
    let mut issues = Vec::new();
    let compiled = match filters {
        None => CompiledFilter::Always,
        Some(Value::Array(specs)) => CompiledFilter::All(
            specs
                .iter()
                .enumerate()
                .map(|(i, s)| compile_spec(s, &format!("filters[{i}]"), home, &mut issues))
                .collect(),
        ),
        Some(spec @ Value::Object(_)) => compile_spec(spec, "filters", home, &mut issues),
        Some(Value::Null) => CompiledFilter::Always,
        Some(_) => {
            issues.push(FilterIssue {
                at: "filters".into(),
                message: "must be a list of filter specs or one spec (a mapping)".into(),
            });
            CompiledFilter::Never
        }
    };
    (compiled, issues)
}

fn compile_spec(
    spec: &Value,
    at: &str,
    home: PathResolver<'_>,
    issues: &mut Vec<FilterIssue>,
) -> CompiledFilter {
    let Value::Object(map) = spec else {
        issues.push(FilterIssue {
            at: at.into(),
            message: "a filter spec must be a mapping".into(),
        });
        return CompiledFilter::Never;
    };
    let mut issue = |message: String| {
        issues.push(FilterIssue {
            at: at.into(),
            message,
        })
    };
    if let Some(list) = map.get("all") {
        return match list {
            Value::Array(items) => CompiledFilter::All(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, s)| compile_spec(s, &format!("{at}.all[{i}]"), home, issues))
                    .collect(),
            ),
            _ => {
                issue("`all` must be a list of specs".into());
                CompiledFilter::Never
            }
        };
    }
    if let Some(list) = map.get("any") {
        return match list {
            Value::Array(items) => CompiledFilter::Any(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, s)| compile_spec(s, &format!("{at}.any[{i}]"), home, issues))
                    .collect(),
            ),
            _ => {
                issue("`any` must be a list of specs".into());
                CompiledFilter::Never
            }
        };
    }
    if let Some(inner) = map.get("not") {
        return CompiledFilter::Not(Box::new(compile_spec(
            inner,
            &format!("{at}.not"),
            home,
            issues,
        )));
    }
    let field = field_path(map.get("field"));
    if let Some(x) = map.get("exists") {
        return CompiledFilter::Exists(field, truthy(x));
    }
    if map.get("missing") == Some(&Value::Bool(true)) {
        return CompiledFilter::Missing(field);
    }
    if let Some(v) = map.get("equals") {
        return CompiledFilter::Equals(field, v.clone());
    }
    if let Some(v) = map.get("not_equals") {
        return CompiledFilter::NotEquals(field, v.clone());
    }
    if let Some(v) = map.get("contains") {
        return CompiledFilter::Contains(field, v.clone());
    }
    if let Some(v) = map.get("in") {
        return match v {
            Value::Array(values) => CompiledFilter::In(field, values.clone()),
            _ => {
                issue("`in` must be a list of values".into());
                CompiledFilter::Never
            }
        };
    }
    if let Some(v) = map.get("in_file") {
        return match v {
            Value::String(path) => CompiledFilter::InFile(field, home(path)),
            _ => {
                issue("`in_file` must be a file path".into());
                CompiledFilter::Never
            }
        };
    }
    if let Some(v) = map.get("regex") {
        let Value::String(pattern) = v else {
            issue("`regex` must be a string".into());
            return CompiledFilter::Never;
        };
        return match regex::RegexBuilder::new(pattern)
            .size_limit(REGEX_SIZE_LIMIT)
            .dfa_size_limit(REGEX_SIZE_LIMIT)
            .build()
        {
            Ok(re) => CompiledFilter::Regex(
                field,
                FilterRegex {
                    re,
                    has_dollar: pattern.contains('$'),
                },
            ),
            Err(e) => {
                issue(format!(
                    "invalid regex {}: {}; herald uses linear-time regexes \
                     (no look-around or back-references); this filter never matches",
                    crate::quoted::quoted(pattern),
                    crate::quoted::quoted(&first_line(&e.to_string()))
                ));
                CompiledFilter::Never
            }
        };
    }
    issue(
        "no operator: use one of exists, missing, equals, not_equals, contains, in, in_file, \
         regex, all, any, not"
            .into(),
    );
    CompiledFilter::Never
}

fn first_line(s: &str) -> String {
    s.lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or(s)
        .trim()
        .to_owned()
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

fn field_path(field: Option<&Value>) -> FieldPath {
    let Some(Value::String(field)) = field else {
        return FieldPath::Absent;
    };
    let segments: Vec<String> = field
        .split('.')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    let Some((first, rest)) = segments.split_first() else {
        return FieldPath::Absent;
    };
    match first.as_str() {
        "payload" => FieldPath::PayloadKey(rest.to_vec()),
        "event" | "event_type" => FieldPath::EventType {
            deeper: !rest.is_empty(),
        },
        "headers" => match rest.split_first() {
            Some((name, deeper)) => FieldPath::Header(name.to_ascii_lowercase(), deeper.to_vec()),
            None => FieldPath::Absent,
        },
        _ => FieldPath::Payload(segments),
    }
}

fn walk<'a>(mut current: &'a Value, path: &[String]) -> Option<&'a Value> {
    for segment in path {
        current = match current {
            Value::Object(map) => map.get(segment)?,
            Value::Array(items)
                if !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit()) =>
            {
                items.get(segment.parse::<usize>().ok()?)?
            }
            _ => return None,
        };
    }
    Some(current)
}

/// A looked-up field: borrowed from the payload, or built (headers).
enum Found<'a> {
    Borrowed(&'a Value),
    Owned(Value),
}

impl Found<'_> {
    fn get(&self) -> &Value {
        match self {
            Found::Borrowed(v) => v,
            Found::Owned(v) => v,
        }
    }
}

fn resolve<'a>(path: &FieldPath, input: &FilterInput<'a>) -> Option<Found<'a>> {
    match path {
        FieldPath::Absent => None,
        FieldPath::Payload(segments) => {
            let (first, rest) = segments.split_first()?;
            walk(input.payload.get(first)?, rest).map(Found::Borrowed)
        }
        FieldPath::PayloadKey(rest) => match input.payload.get("payload") {
            Some(root) => walk(root, rest).map(Found::Borrowed),
            None => {
                let (first, deeper) = rest.split_first()?;
                walk(input.payload.get(first)?, deeper).map(Found::Borrowed)
            }
        },
        FieldPath::EventType { deeper: false } => Some(Found::Borrowed(input.event_type)),
        FieldPath::EventType { deeper: true } => None,
        FieldPath::Header(name, deeper) => {
            if !deeper.is_empty() {
                return None;
            }
            let value = input.headers.get_all(name.as_str()).iter().next_back()?;
            Some(Found::Owned(Value::String(
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )))
        }
    }
}

impl CompiledFilter {
    /// Adds the payload paths this filter reads.
    pub fn add_paths(&self, paths: &mut crate::pick::PayloadPaths) {
        let field = |f: &FieldPath, paths: &mut crate::pick::PayloadPaths| match f {
            FieldPath::Payload(segments) => paths.add(segments),
            FieldPath::PayloadKey(rest) => {
                // The payload's own `payload` key if present, else the payload itself.
                let mut under = vec!["payload".to_owned()];
                under.extend(rest.iter().cloned());
                paths.add(&under);
                paths.add(rest);
            }
            FieldPath::Absent | FieldPath::EventType { .. } | FieldPath::Header(..) => {}
        };
        match self {
            CompiledFilter::Always | CompiledFilter::Never => {}
            CompiledFilter::All(list) | CompiledFilter::Any(list) => {
                for f in list {
                    f.add_paths(paths);
                }
            }
            CompiledFilter::Not(inner) => inner.add_paths(paths),
            CompiledFilter::Exists(f, _)
            | CompiledFilter::Missing(f)
            | CompiledFilter::Equals(f, _)
            | CompiledFilter::NotEquals(f, _)
            | CompiledFilter::Contains(f, _)
            | CompiledFilter::In(f, _)
            | CompiledFilter::InFile(f, _)
            | CompiledFilter::Regex(f, _) => field(f, paths),
        }
    }

    /// Whether the event passes.
    pub fn matches(&self, input: &FilterInput<'_>, lists: &dyn ListLoader) -> bool {
        match self {
            CompiledFilter::Always => true,
            CompiledFilter::Never => false,
            CompiledFilter::All(items) => items.iter().all(|f| f.matches(input, lists)),
            CompiledFilter::Any(items) => items.iter().any(|f| f.matches(input, lists)),
            CompiledFilter::Not(inner) => !inner.matches(input, lists),
            CompiledFilter::Exists(path, want) => resolve(path, input).is_some() == *want,
            CompiledFilter::Missing(path) => resolve(path, input).is_none(),
            CompiledFilter::Equals(path, v) => {
                resolve(path, input).is_some_and(|f| json_equal(f.get(), v))
            }
            CompiledFilter::NotEquals(path, v) => {
                resolve(path, input).is_none_or(|f| !json_equal(f.get(), v))
            }
            CompiledFilter::Contains(path, needle) => {
                resolve(path, input).is_some_and(|f| contains(f.get(), needle))
            }
            CompiledFilter::In(path, values) => {
                resolve(path, input).is_some_and(|f| values.iter().any(|v| json_equal(f.get(), v)))
            }
            CompiledFilter::InFile(path, file) => resolve(path, input).is_some_and(|f| {
                let values = lists.load(file);
                values.iter().any(|v| json_equal(f.get(), v))
            }),
            CompiledFilter::Regex(path, re) => {
                resolve(path, input).is_some_and(|f| re.is_match(&text_form(f.get())))
            }
        }
    }
}

fn contains(haystack: &Value, needle: &Value) -> bool {
    match haystack {
        Value::Array(items) => items.iter().any(|i| json_equal(i, needle)),
        Value::Object(map) => match needle {
            Value::String(key) => map.contains_key(key),
            _ => false,
        },
        other => text_form(other).contains(&text_form(needle)),
    }
}

/// Parses an `in_file` list (spec §8.5).
pub fn parse_list_file(text: &str) -> Vec<Value> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Array(items)) => items,
        Ok(Value::Object(map)) => map.keys().map(|k| Value::String(k.clone())).collect(),
        Ok(other) => vec![other],
        Err(_) => text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|l| Value::String(l.to_owned()))
            .collect(),
    }
}

/// An `in_file` loader that re-reads a file only when its mtime or size changes.
#[derive(Default)]
pub struct FileListCache {
    entries: std::sync::Mutex<std::collections::HashMap<PathBuf, CachedList>>,
}

struct CachedList {
    stamp: (Option<std::time::SystemTime>, u64),
    values: Arc<Vec<Value>>,
}

impl ListLoader for FileListCache {
    fn load(&self, path: &Path) -> Arc<Vec<Value>> {
        let Ok(meta) = std::fs::metadata(path) else {
            tracing_warn(path, "cannot be read");
            return Arc::new(Vec::new());
        };
        let stamp = (meta.modified().ok(), meta.len());
        let mut entries = match self.entries.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(cached) = entries.get(path).filter(|c| c.stamp == stamp) {
            return cached.values.clone();
        }
        let values = match std::fs::read(path) {
            Ok(bytes) => Arc::new(parse_list_file(&String::from_utf8_lossy(&bytes))),
            Err(_) => {
                tracing_warn(path, "cannot be read");
                return Arc::new(Vec::new());
            }
        };
        entries.insert(
            path.to_path_buf(),
            CachedList {
                stamp,
                values: values.clone(),
            },
        );
        values
    }
}

fn tracing_warn(path: &Path, what: &str) {
    tracing::warn!(file = %path.display(), "in_file list {what}; the filter does not match");
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use serde_json::json;

    fn check(filters: Value, payload: Value) -> bool {
        check_with(filters, payload, "push", HeaderMap::new())
    }

    fn check_with(filters: Value, payload: Value, event: &str, headers: HeaderMap) -> bool {
        let (compiled, _) = compile(Some(&filters), &|p| Path::new("/nonexistent-home").join(p));
        let payload = payload.as_object().cloned().unwrap();
        let event = json!(event);
        compiled.matches(
            &FilterInput {
                payload: &payload,
                event_type: &event,
                headers: &headers,
            },
            &FileListCache::default(),
        )
    }

    #[test]
    fn operators() {
        let p =
            json!({"a": {"b": [1, {"c": "x"}], "n": 4, "z": null}, "s": "hello", "o": {"k": 1}});
        assert!(check(
            json!([{"field": "a.b.1.c", "equals": "x"}]),
            p.clone()
        ));
        assert!(check(json!({"field": "a.n", "equals": 4.0}), p.clone()));
        assert!(!check(json!({"field": "a.n", "equals": "4"}), p.clone()));
        assert!(check(json!({"field": "a.z", "exists": true}), p.clone()));
        assert!(!check(json!({"field": "a.z", "missing": true}), p.clone()));
        assert!(check(json!({"field": "a.q", "missing": true}), p.clone()));
        assert!(!check(json!({"field": "a.q", "missing": false}), p.clone()));
        assert!(check(json!({"field": "a.q", "not_equals": 1}), p.clone()));
        assert!(check(json!({"field": "s", "contains": "ell"}), p.clone()));
        assert!(check(json!({"field": "a.b", "contains": 1}), p.clone()));
        assert!(check(json!({"field": "o", "contains": "k"}), p.clone()));
        assert!(check(json!({"field": "a.n", "in": [3, 4]}), p.clone()));
        assert!(!check(json!({"field": "a.n", "in": 4}), p.clone()));
        assert!(check(json!({"field": "s", "regex": "^h.l+o$"}), p.clone()));
        assert!(!check(
            json!({"field": "s", "regex": "(?<=h)ello"}),
            p.clone()
        ));
        assert!(check(json!({"field": "a.z", "regex": "None"}), p.clone()));
        assert!(check(
            json!({"any": [{"field": "s", "equals": "no"}, {"field": "s", "equals": "hello"}]}),
            p.clone()
        ));
        assert!(!check(json!({"any": []}), p.clone()));
        assert!(check(json!({"all": []}), p.clone()));
        assert!(check(
            json!({"not": {"field": "s", "equals": "no"}}),
            p.clone()
        ));
        assert!(!check(json!({"field": "s"}), p.clone()));
        assert!(!check(json!("string"), p.clone()));
        assert!(check(json!([]), p.clone()));
        assert!(!check(json!([5]), p));
    }

    #[test]
    fn roots() {
        let p = json!({"payload": {"x": 1}, "x": 2});
        assert!(check(json!({"field": "payload.x", "equals": 1}), p));
        assert!(check(
            json!({"field": "payload.x", "equals": 2}),
            json!({"x": 2})
        ));
        assert!(check(
            json!({"field": "event", "equals": "push"}),
            json!({})
        ));
        assert!(!check(
            json!({"field": "event.x", "exists": true}),
            json!({})
        ));
        let mut h = HeaderMap::new();
        h.append("x-tag", HeaderValue::from_static("one"));
        h.append("x-tag", HeaderValue::from_static("two"));
        assert!(check_with(
            json!({"field": "headers.X-Tag", "equals": "two"}),
            json!({}),
            "e",
            h
        ));
    }

    #[test]
    fn bad_regex_is_reported_and_never_matches() {
        let (_, issues) = compile(Some(&json!([{"field": "a", "regex": "("}])), &|p| {
            Path::new("/").join(p)
        });
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].at, "filters[0]");
    }

    #[test]
    fn list_files() {
        assert_eq!(parse_list_file("[42, \"a\"]"), vec![json!(42), json!("a")]);
        assert_eq!(parse_list_file("{\"k\": 1}"), vec![json!("k")]);
        assert_eq!(
            parse_list_file("alice\n\n  bob \n"),
            vec![json!("alice"), json!("bob")]
        );
        assert_eq!(parse_list_file("7"), vec![json!(7)]);
    }
}
