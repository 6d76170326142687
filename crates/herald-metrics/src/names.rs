//! Bounded label values. A label's values are names herald knows (routes, targets,
//! tools, providers, MCP servers, plugin hooks), never text from a request; each label
//! takes at most [`MAX_VALUES`] distinct ones, and further names count as [`OTHER`].

use std::collections::HashSet;
use std::sync::RwLock;

/// Distinct values one label takes before the rest count as [`OTHER`].
pub const MAX_VALUES: usize = 1000;
/// The value of every name past [`MAX_VALUES`].
pub const OTHER: &str = "other";
/// The value for a request that named no route herald knows.
pub const UNKNOWN: &str = "unknown";

/// The values one label has taken.
#[derive(Debug, Default)]
pub struct Names {
    seen: RwLock<HashSet<String, foldhash::fast::RandomState>>,
}

impl Names {
    /// `name` as the label's value: itself while the label has room, else [`OTHER`].
    pub fn value(&self, name: &str) -> String {
        if let Ok(seen) = self.seen.read()
            && seen.contains(name)
        {
            return name.to_owned();
        }
        let Ok(mut seen) = self.seen.write() else {
            return OTHER.to_owned();
        };
        if seen.len() < MAX_VALUES {
            seen.insert(name.to_owned());
            return name.to_owned();
        }
        if seen.contains(name) {
            name.to_owned()
        } else {
            OTHER.to_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_past_the_bound_are_other() {
        let names = Names::default();
        for n in 0..MAX_VALUES {
            assert_eq!(names.value(&format!("r{n}")), format!("r{n}"));
        }
        assert_eq!(names.value("one-more"), OTHER);
        assert_eq!(
            names.value("r7"),
            "r7",
            "a name already taken keeps its value"
        );
    }
}
