//! Child processes in a process group of their own, and killing the whole group: the one
//! implementation behind the `terminal` and `process` tools, the gateway's route scripts
//! and the Python plugin host. A crate of its own so that none of them pulls in another
//! to reach it. Kept by hand rather than through `process-wrap`: the callers kill by pid from
//! other tasks (a job registry keeps pids, not the child handle), and route scripts also
//! need their `setsid` descendants found and killed, which a process-group wrapper
//! cannot reach.

use std::process::Stdio;

/// `program` set up to start as the leader of a new process group, with stdin closed and
/// stdout/stderr piped, killed if its handle is dropped.
pub fn command(program: &str) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(program);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    cmd
}

/// Kills the process group led by `pid` (a child started with [`command`]).
pub fn kill_group(pid: Option<u32>) {
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()).filter(|p| *p > 0) {
        kill(-pid);
    }
}

/// Asks the process group led by `pid` to end (SIGTERM).
pub fn terminate_group(pid: Option<u32>) {
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()).filter(|p| *p > 0) {
        // SAFETY: kill(2) has no memory-safety preconditions.
        unsafe {
            libc::kill(-pid, libc::SIGTERM);
        }
    }
}

/// Whether `pid` has ended (gone, or a zombie nobody reaped yet).
pub fn has_exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command's closing parenthesis.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => true,
    }
}

/// Sends SIGKILL to `pid` (negative: a whole process group).
pub fn kill(pid: i32) {
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}
