//! Child processes in a process group of their own, and killing the whole group: the one
//! implementation behind every child herald starts: the `terminal` and `process` tools, the
//! gateway's route scripts, `gh` in GitHub delivery, RPC `cli.exec`, MCP servers, and
//! the Python plugin host and its package lister. A crate of its own so that none of them
//! pulls in another to reach it. Kept by hand rather than through `process-wrap`: the callers kill by pid from
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

/// What a child started with [`command`] left when it ended: its exit status and the
/// start of its stdout and stderr (at most the bound given each).
#[derive(Debug)]
pub struct Finished {
    pub status: std::process::ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Why a bounded run did not finish.
#[derive(Debug)]
pub enum RunFailed {
    /// It could not start.
    Spawn(std::io::Error),
    /// It ran past the limit: its whole group was killed.
    Timeout,
    /// Waiting for it failed.
    Wait(std::io::Error),
}

/// Runs `cmd` (from [`command`]) to its end within `limit`, keeping at most
/// `max_output` bytes of each of stdout and stderr (the rest is read and dropped, so a
/// chatty child never blocks on a full pipe); at its end, or past `limit`, its whole
/// group is killed.
pub async fn run_bounded(
    mut cmd: tokio::process::Command,
    limit: std::time::Duration,
    max_output: usize,
) -> Result<Finished, RunFailed> {
    let mut child = cmd.spawn().map_err(RunFailed::Spawn)?;
    let pid = child.id();
    let (out, err) = (child.stdout.take(), child.stderr.take());
    let run = async {
        let (stdout, stderr) =
            tokio::join!(read_bounded(out, max_output), read_bounded(err, max_output));
        let status = child.wait().await.map_err(RunFailed::Wait)?;
        Ok(Finished {
            status,
            stdout,
            stderr,
        })
    };
    let done = tokio::time::timeout(limit, run).await;
    // Whatever it left in its group (a background child holding no pipe) goes with it.
    kill_group(pid);
    done.unwrap_or(Err(RunFailed::Timeout))
}

/// The first `max` bytes of `pipe`, reading it to its end.
async fn read_bounded<R: tokio::io::AsyncRead + Unpin>(pipe: Option<R>, max: usize) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let Some(mut pipe) = pipe else {
        return Vec::new();
    };
    let mut kept = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                let room = max.saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..n.min(room)]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_bounded_run_keeps_the_start_of_its_output_and_kills_its_group_at_the_limit() {
        let mut cmd = command("sh");
        cmd.args(["-c", "head -c 100000 /dev/zero; echo oops >&2; exit 3"]);
        let done = run_bounded(cmd, Duration::from_secs(10), 1000)
            .await
            .unwrap();
        assert_eq!(done.status.code(), Some(3));
        assert_eq!(
            (done.stdout.len(), done.stderr.as_slice()),
            (1000, &b"oops\n"[..])
        );
        let mut cmd = command("sh");
        // A grandchild in the group holds the pipe open: the group is killed.
        cmd.args(["-c", "sleep 30 & sleep 30"]);
        let started = std::time::Instant::now();
        let late = run_bounded(cmd, Duration::from_millis(300), 1000).await;
        assert!(matches!(late, Err(RunFailed::Timeout)));
        assert!(started.elapsed() < Duration::from_secs(5));
        let missing = run_bounded(command("/no/such/program"), Duration::from_secs(1), 10).await;
        assert!(matches!(missing, Err(RunFailed::Spawn(_))));
        // A background child that let go of the pipes does not outlive a normal end.
        let mut cmd = command("sh");
        cmd.args(["-c", "sleep 30 >/dev/null 2>&1 </dev/null & echo $!"]);
        let done = run_bounded(cmd, Duration::from_secs(10), 100)
            .await
            .unwrap();
        let stray: u32 = String::from_utf8_lossy(&done.stdout)
            .trim()
            .parse()
            .unwrap();
        let gone = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(20));
            has_exited(stray)
        });
        assert!(gone, "the background sleep {stray} outlived the run");
    }
}
