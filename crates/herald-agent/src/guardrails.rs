//! Tool-loop guardrails (agent spec §6.4), per turn: warnings on by default, hard stops
//! off by default. Identical failing call: warn after 2, block after 5; the same tool
//! failing: warn after 3, halt after 8; an identical call that makes no progress (the
//! same result again): warn after 2, block after 5.

use std::collections::HashMap;

const IDENTICAL_FAIL_WARN: u32 = 2;
const IDENTICAL_FAIL_BLOCK: u32 = 5;
const TOOL_FAIL_WARN: u32 = 3;
const TOOL_FAIL_HALT: u32 = 8;
const NO_PROGRESS_WARN: u32 = 2;
const NO_PROGRESS_BLOCK: u32 = 5;

/// One turn's record of tool outcomes.
#[derive(Debug, Default)]
pub struct LoopGuard {
    /// Block instead of only warning (off by default).
    pub hard_stop: bool,
    identical_failures: HashMap<String, u32>,
    tool_failures: HashMap<String, u32>,
    repeats: HashMap<String, (String, u32)>,
}

fn key(name: &str, args: &str) -> String {
    format!("{name}\u{1f}{args}")
}

impl LoopGuard {
    pub fn new(hard_stop: bool) -> Self {
        LoopGuard {
            hard_stop,
            ..Default::default()
        }
    }

    /// With hard stops on: why this call must not run, if it must not.
    pub fn before_call(&self, name: &str, args: &str) -> Option<String> {
        if !self.hard_stop {
            return None;
        }
        let k = key(name, args);
        if self
            .identical_failures
            .get(&k)
            .is_some_and(|n| *n >= IDENTICAL_FAIL_BLOCK)
        {
            return Some(format!(
                "blocked: this exact `{name}` call has failed {IDENTICAL_FAIL_BLOCK} times; change the approach"
            ));
        }
        if self
            .tool_failures
            .get(name)
            .is_some_and(|n| *n >= TOOL_FAIL_HALT)
        {
            return Some(format!(
                "blocked: `{name}` has failed {TOOL_FAIL_HALT} times in this turn; stop using it"
            ));
        }
        if self
            .repeats
            .get(&k)
            .is_some_and(|(_, n)| *n >= NO_PROGRESS_BLOCK)
        {
            return Some(format!(
                "blocked: this exact `{name}` call keeps returning the same result"
            ));
        }
        None
    }

    /// Records an outcome; returns a warning to append to the result, if one is due.
    pub fn after_call(
        &mut self,
        name: &str,
        args: &str,
        result: &str,
        is_error: bool,
    ) -> Option<String> {
        let k = key(name, args);
        if is_error {
            let same = self.identical_failures.entry(k.clone()).or_insert(0);
            *same += 1;
            let same = *same;
            let tool = self.tool_failures.entry(name.to_owned()).or_insert(0);
            *tool += 1;
            let tool = *tool;
            self.repeats.remove(&k);
            if same >= IDENTICAL_FAIL_WARN {
                return Some(format!(
                    "[herald guardrail] This exact `{name}` call has now failed {same} times. Do not repeat it unchanged; try a different approach."
                ));
            }
            if tool >= TOOL_FAIL_WARN {
                return Some(format!(
                    "[herald guardrail] `{name}` has failed {tool} times in this turn. Reconsider how you are using it."
                ));
            }
            return None;
        }
        self.identical_failures.remove(&k);
        let entry = self
            .repeats
            .entry(k)
            .or_insert_with(|| (result.to_owned(), 0));
        if entry.0 == result {
            entry.1 += 1;
        } else {
            *entry = (result.to_owned(), 1);
        }
        (entry.1 >= NO_PROGRESS_WARN).then(|| {
            format!("[herald guardrail] This exact `{name}` call returned the same result {} times; it is not making progress.", entry.1)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_and_hard_stops() {
        let mut g = LoopGuard::new(false);
        assert!(g.after_call("terminal", "{a}", "err", true).is_none());
        assert!(
            g.after_call("terminal", "{a}", "err", true)
                .unwrap()
                .contains("failed 2 times")
        );
        assert!(
            g.before_call("terminal", "{a}").is_none(),
            "no hard stop by default"
        );
        assert!(g.after_call("read_file", "{p}", "same", false).is_none());
        assert!(
            g.after_call("read_file", "{p}", "same", false)
                .unwrap()
                .contains("same result 2 times")
        );
        assert!(
            g.after_call("read_file", "{p}", "different", false)
                .is_none()
        );
        let mut hard = LoopGuard::new(true);
        for _ in 0..5 {
            hard.after_call("terminal", "{x}", "err", true);
        }
        assert!(
            hard.before_call("terminal", "{x}")
                .unwrap()
                .starts_with("blocked")
        );
        assert!(hard.before_call("terminal", "{y}").is_none());
    }
}
