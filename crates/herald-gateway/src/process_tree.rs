//! Finding and killing everything a route script started, including processes that left
//! its process group (`setsid`, double forks).
//!
//! Two nets: the script runs as a child subreaper, so while it lives every orphan of its
//! tree becomes its child and stays its descendant; and every process of the run carries
//! a marker in its environment, which finds what outlived the script itself (an orphan
//! of an exited script belongs to init).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable that marks a script run's processes.
pub const RUN_MARKER_VAR: &str = "HERALD_SCRIPT_RUN";
/// Rounds of find-and-kill (a process may fork while the tree is being killed).
const ROUNDS: usize = 4;

/// A fresh marker value for one script run.
pub fn new_run_marker() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Makes the calling process a child subreaper (inherited across `exec`): called in the
/// script's process between fork and exec.
pub fn become_subreaper() -> std::io::Result<()> {
    // SAFETY: prctl(PR_SET_CHILD_SUBREAPER) is a plain syscall on the calling process;
    // it is async-signal-safe, as code between fork and exec must be.
    let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Kills the script's process group, its descendants and every process carrying the
/// run's marker. Returns how many processes outside the group were found.
pub fn kill_run(root: Option<u32>, marker: &str) -> usize {
    herald_process::kill_group(root);
    let root = root.and_then(|p| i32::try_from(p).ok()).filter(|p| *p > 0);
    let wanted = format!("{RUN_MARKER_VAR}={marker}");
    let mut found_total = 0;
    for _ in 0..ROUNDS {
        let found = find(root, wanted.as_bytes());
        if found.is_empty() {
            break;
        }
        found_total += found.len();
        for pid in found {
            herald_process::kill(pid);
        }
    }
    found_total
}

/// The live processes below `root` or carrying `marker` (never herald itself).
fn find(root: Option<i32>, marker: &[u8]) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id() as i32;
    let mut parent_of = HashMap::new();
    let mut marked = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Some(ppid) = parent_pid(pid) else {
            continue;
        };
        parent_of.insert(pid, ppid);
        if has_marker(pid, marker) {
            marked.push(pid);
        }
    }
    let mut found = marked;
    if let Some(root) = root {
        found.extend(
            parent_of
                .keys()
                .copied()
                .filter(|&pid| pid != root && descends_from(pid, root, &parent_of)),
        );
    }
    found.sort_unstable();
    found.dedup();
    found
}

fn descends_from(mut pid: i32, root: i32, parent_of: &HashMap<i32, i32>) -> bool {
    for _ in 0..parent_of.len() {
        match parent_of.get(&pid) {
            Some(&ppid) if ppid == root => return true,
            Some(&ppid) if ppid > 1 => pid = ppid,
            _ => return false,
        }
    }
    false
}

/// The parent pid from `/proc/<pid>/stat` (a zombie or a vanished process: `None`).
fn parent_pid(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
    let after = &stat[stat.rfind(')')? + 1..];
    let mut fields = after.split_whitespace();
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    fields.next()?.parse().ok()
}

fn has_marker(pid: i32, marker: &[u8]) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|b| *b == 0).any(|entry| entry == marker))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ancestry_walks_up_to_the_root() {
        let parent_of: HashMap<i32, i32> = [(10, 5), (11, 10), (12, 1), (5, 1)].into();
        assert!(descends_from(11, 5, &parent_of));
        assert!(descends_from(10, 5, &parent_of));
        assert!(!descends_from(12, 5, &parent_of));
        // A cycle (pid reuse while scanning) ends.
        let cyclic: HashMap<i32, i32> = [(20, 21), (21, 20)].into();
        assert!(!descends_from(20, 5, &cyclic));
    }

    #[test]
    fn markers_are_unique_per_run() {
        assert_ne!(new_run_marker(), new_run_marker());
    }
}
