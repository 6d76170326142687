//! Configuration errors and warnings, each naming the file, line, key and the fix.

use std::fmt;
use std::path::PathBuf;

/// Where a problem is: the file, the position (0 when unknown) and the dotted key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub file: PathBuf,
    pub line: u64,
    pub column: u64,
    pub key: String,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(
                f,
                "{}:{}:{}: `{}`",
                self.file.display(),
                self.line,
                self.column,
                self.key
            )
        } else {
            write!(f, "{}: `{}`", self.file.display(), self.key)
        }
    }
}

/// One problem in a configuration source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub place: Place,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.place, self.message)
    }
}

/// Why configuration could not be loaded; herald exits without serving.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}:{column}: YAML syntax error: {message}")]
    Syntax {
        path: PathBuf,
        line: u64,
        column: u64,
        message: String,
    },
    #[error("{}", join(.0))]
    Invalid(Vec<Problem>),
}

fn join(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}
