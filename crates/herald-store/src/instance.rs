//! Which process owns a row: an instance id of the process id, its start time and the
//! boot it started in (`<pid>:<start ticks>:<boot id>`), so a row's owner can be told
//! alive or gone after any restart, pid reuse included. Runs record their owner, and a
//! host recovers only the runs of owners that are gone.

use std::sync::LazyLock;

static CURRENT: LazyLock<String> = LazyLock::new(|| {
    let pid = std::process::id();
    format!(
        "{pid}:{}:{}",
        start_ticks(pid).unwrap_or_default(),
        boot_id()
    )
});

/// This process's instance id.
pub fn current() -> &'static str {
    &CURRENT
}

/// Whether the process `owner` names still runs (this one included). An owner that
/// cannot be read (rows from before owners were kept) is gone.
pub fn is_alive(owner: &str) -> bool {
    if owner == current() {
        return true;
    }
    let mut parts = owner.splitn(3, ':');
    let (Some(pid), Some(ticks), Some(boot)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let Ok(pid) = pid.parse::<u32>() else {
        return false;
    };
    boot == boot_id() && start_ticks(pid).is_some_and(|t| t.to_string() == ticks)
}

/// A process's start time in clock ticks since boot (`/proc/<pid>/stat`, field 22).
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from its end.
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19)?.parse().ok()
}

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_gone_or_garbled_owner_is_not() {
        assert!(is_alive(current()));
        let me = current().to_owned();
        let parts: Vec<&str> = me.splitn(3, ':').collect();
        assert!(!parts[1].is_empty(), "start time read: {me}");
        // Same pid, another start time: the pid was reused.
        assert!(!is_alive(&format!("{}:1:{}", parts[0], parts[2])));
        // Another boot.
        assert!(!is_alive(&format!("{}:{}:other-boot", parts[0], parts[1])));
        for garbled in ["", "x", "1:2", "notapid:1:b", "4294967295:0:x"] {
            assert!(!is_alive(garbled), "{garbled}");
        }
    }

    #[test]
    fn a_child_is_alive_until_it_exits() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let owner = format!(
            "{}:{}:{}",
            child.id(),
            start_ticks(child.id()).unwrap(),
            boot_id()
        );
        assert!(is_alive(&owner));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!is_alive(&owner));
    }
}
