//! Typed reads from a [`Node`] tree that collect problems instead of stopping at the
//! first one, plus the unknown-key warnings with their "did you mean".

use crate::error::{Place, Problem};
use crate::node::{Node, NodeValue};
use std::path::{Path, PathBuf};

/// Reads values out of one source file and records what is wrong with them.
pub struct Reader {
    pub file: PathBuf,
    pub errors: Vec<Problem>,
    pub warnings: Vec<Problem>,
    /// Mistakes that herald serves through but that change what a route does (a route
    /// that accepts every event, routes that are not served), in plain words.
    pub findings: Vec<String>,
}

impl Reader {
    pub fn new(file: &Path) -> Self {
        Reader {
            file: file.to_path_buf(),
            errors: Vec::new(),
            warnings: Vec::new(),
            findings: Vec::new(),
        }
    }

    pub fn place(&self, node: Option<&Node>, key: &str) -> Place {
        Place {
            file: self.file.clone(),
            line: node.map_or(0, |n| n.line),
            column: node.map_or(0, |n| n.column),
            key: key.to_owned(),
        }
    }

    pub fn error(&mut self, node: Option<&Node>, key: &str, message: impl Into<String>) {
        let place = self.place(node, key);
        self.errors.push(Problem {
            place,
            message: message.into(),
        });
    }

    pub fn warn(&mut self, node: Option<&Node>, key: &str, message: impl Into<String>) {
        let place = self.place(node, key);
        self.warnings.push(Problem {
            place,
            message: message.into(),
        });
    }

    /// Warns once for every key of `node` not in `known`, suggesting the closest one.
    pub fn check_keys(&mut self, node: &Node, prefix: &str, known: &[&str]) {
        self.check_keys_knowing(node, prefix, known, &[]);
    }

    /// Like [`Reader::check_keys`], but keys in `hermes` (Hermes settings herald does not
    /// implement) are returned as dotted keys instead of warned about.
    pub fn check_keys_knowing(
        &mut self,
        node: &Node,
        prefix: &str,
        known: &[&str],
        hermes: &[&str],
    ) -> Vec<String> {
        let mut hermes_only = Vec::new();
        let all: Vec<&str> = known.iter().chain(hermes).copied().collect();
        for (key, value) in node.entries() {
            if known.contains(&key.as_str()) {
                continue;
            }
            if hermes.contains(&key.as_str()) {
                hermes_only.push(join_key(prefix, key));
                continue;
            }
            let hint = suggest(key, &all)
                .map(|k| format!("; did you mean `{k}`?"))
                .unwrap_or_default();
            self.warn(
                Some(value),
                &join_key(prefix, key),
                format!("unknown key, ignored by herald{hint}"),
            );
        }
        hermes_only
    }

    /// A boolean: YAML booleans and the strings true/1/yes/on, false/0/no/off.
    pub fn bool(&mut self, node: &Node, key: &str) -> Option<bool> {
        match &node.value {
            NodeValue::Bool(b) => Some(*b),
            NodeValue::Int(0) => Some(false),
            NodeValue::Int(1) => Some(true),
            NodeValue::Str(s) => match parse_bool_text(s) {
                Some(b) => Some(b),
                None => {
                    self.error(
                        Some(node),
                        key,
                        format!("expected true or false, found {s:?}"),
                    );
                    None
                }
            },
            _ => {
                self.error(
                    Some(node),
                    key,
                    format!("expected true or false, found {}", node.kind()),
                );
                None
            }
        }
    }

    /// An integer (also a numeric string or a whole float) within `min..=max`.
    pub fn int(&mut self, node: &Node, key: &str, min: i128, max: i128) -> Option<i128> {
        let value = match &node.value {
            NodeValue::Int(i) => Some(*i),
            NodeValue::Float(f) if f.fract() == 0.0 && f.is_finite() => Some(*f as i128),
            NodeValue::Str(s) => s.trim().parse::<i128>().ok(),
            _ => None,
        };
        match value {
            Some(v) if (min..=max).contains(&v) => Some(v),
            Some(v) => {
                self.error(
                    Some(node),
                    key,
                    format!("{v} is out of range: use a whole number from {min} to {max}"),
                );
                None
            }
            None => {
                let found = match &node.value {
                    NodeValue::Str(s) => format!("{s:?}"),
                    _ => node.kind().to_owned(),
                };
                self.error(
                    Some(node),
                    key,
                    format!("expected a whole number, found {found}"),
                );
                None
            }
        }
    }

    /// A string; `null` is `None`. Numbers and booleans are refused.
    pub fn string(&mut self, node: &Node, key: &str) -> Option<Option<String>> {
        match &node.value {
            NodeValue::Str(s) => Some(Some(s.clone())),
            NodeValue::Null => Some(None),
            NodeValue::Int(i) => Some(Some(i.to_string())),
            _ => {
                self.error(
                    Some(node),
                    key,
                    format!("expected a string, found {}", node.kind()),
                );
                None
            }
        }
    }

    /// A list of strings; a single string is a one-element list; `null` is empty.
    pub fn string_list(&mut self, node: &Node, key: &str) -> Option<Vec<String>> {
        match &node.value {
            NodeValue::Null => Some(Vec::new()),
            NodeValue::Str(s) => Some(vec![s.clone()]),
            NodeValue::Seq(items) => {
                let mut out = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    match &item.value {
                        NodeValue::Str(s) => out.push(s.clone()),
                        NodeValue::Int(n) => out.push(n.to_string()),
                        _ => {
                            self.error(
                                Some(item),
                                &format!("{key}[{i}]"),
                                format!("expected a string, found {}", item.kind()),
                            );
                            return None;
                        }
                    }
                }
                Some(out)
            }
            _ => {
                self.error(
                    Some(node),
                    key,
                    format!("expected a list of strings, found {}", node.kind()),
                );
                None
            }
        }
    }
}

/// `true/1/yes/on` and `false/0/no/off`, any case, trimmed.
pub fn parse_bool_text(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}

pub fn join_key(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_owned()
    } else {
        format!("{prefix}.{key}")
    }
}

/// The known key closest to `key`, if it is close enough to be a typo.
pub fn suggest<'a>(key: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| {
            (
                *k,
                strsim::damerau_levenshtein(&key.to_ascii_lowercase(), k),
            )
        })
        .filter(|(k, d)| *d <= 2.max(k.len() / 4) && *d < k.len())
        .min_by_key(|(_, d)| *d)
        .map(|(k, _)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions() {
        assert_eq!(suggest("secert", &["secret", "events"]), Some("secret"));
        assert_eq!(suggest("compression", &["secret", "events"]), None);
        assert_eq!(
            suggest("rate_limt", &["rate_limit", "routes"]),
            Some("rate_limit")
        );
    }
}
