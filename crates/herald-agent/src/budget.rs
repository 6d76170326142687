//! The budget of one run tree: a root run and every subagent it starts, however deep,
//! share one count of provider calls and one count of subagents started, as a cgroup's
//! `pids.max` bounds a whole process tree. A herald departure from Hermes, which
//! budgets each subagent on its own.

use std::sync::atomic::{AtomicU32, Ordering};

/// Default `delegation.max_total_children`.
pub const DEFAULT_MAX_TOTAL_CHILDREN: u32 = 9;
/// Default `agent.max_tool_calls_per_answer`.
pub const DEFAULT_MAX_TOOL_CALLS_PER_ANSWER: usize = 64;

/// What a run tree may still spend.
#[derive(Debug)]
pub struct TreeBudget {
    calls: AtomicU32,
    max_calls: u32,
    children: AtomicU32,
    max_children: u32,
}

/// Why subagents were not started: the tree's allowance is spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChildrenSpent {
    /// Subagents the tree started so far.
    pub started: u32,
    /// `delegation.max_total_children`.
    pub max: u32,
}

impl TreeBudget {
    /// A root run's budget: `max_calls` provider calls and `max_children` subagents for
    /// the whole tree.
    pub fn new(max_calls: u32, max_children: u32) -> TreeBudget {
        TreeBudget {
            calls: AtomicU32::new(0),
            max_calls: max_calls.max(1),
            children: AtomicU32::new(0),
            max_children,
        }
    }

    /// Counts one provider call of any agent of the tree; false once the tree has made
    /// `max_calls` (the agent then gets one last call without tools to answer).
    pub fn take_call(&self) -> bool {
        self.calls
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.max_calls).then_some(n + 1)
            })
            .is_ok()
    }

    /// Counts `n` subagents about to start, all or none.
    pub fn take_children(&self, n: u32) -> Result<(), ChildrenSpent> {
        self.children
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |started| {
                started
                    .checked_add(n)
                    .filter(|total| *total <= self.max_children)
            })
            .map(|_| ())
            .map_err(|started| ChildrenSpent {
                started,
                max: self.max_children,
            })
    }

    /// Provider calls the tree has made.
    pub fn calls(&self) -> u32 {
        self.calls.load(Ordering::SeqCst)
    }

    /// Subagents the tree has started.
    pub fn children(&self) -> u32 {
        self.children.load(Ordering::SeqCst)
    }
}

impl Default for TreeBudget {
    /// The budget of a run nothing configured: `agent.max_turns`'s default in calls,
    /// the default subagent allowance.
    fn default() -> Self {
        TreeBudget::new(
            crate::turn::DEFAULT_MAX_ITERATIONS,
            DEFAULT_MAX_TOTAL_CHILDREN,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_and_children_are_counted_for_the_whole_tree_all_or_none() {
        let b = TreeBudget::new(3, 9);
        assert!(b.take_call() && b.take_call() && b.take_call());
        assert!(!b.take_call(), "the fourth call is past the budget");
        assert_eq!(b.calls(), 3);
        assert_eq!(b.take_children(3), Ok(()));
        assert_eq!(b.take_children(6), Ok(()));
        assert_eq!(
            b.take_children(1),
            Err(ChildrenSpent { started: 9, max: 9 })
        );
        let b = TreeBudget::new(1, 5);
        b.take_children(3).unwrap();
        assert_eq!(
            b.take_children(3),
            Err(ChildrenSpent { started: 3, max: 5 }),
            "three more would pass five: none start"
        );
        assert_eq!(b.children(), 3);
    }

    #[test]
    fn many_agents_at_once_never_take_more_than_the_budget() {
        let b = std::sync::Arc::new(TreeBudget::new(1000, 9));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let b = b.clone();
                std::thread::spawn(move || {
                    let mut took = 0;
                    while b.take_call() {
                        took += 1;
                    }
                    took + u32::from(b.take_children(1).is_ok()) * 10_000
                })
            })
            .collect();
        let total: u32 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(total % 10_000, 1000);
        assert_eq!(total / 10_000, 8);
    }
}
