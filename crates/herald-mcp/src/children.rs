//! The stdio servers' process groups, stopped on every way herald ends: when their
//! connection is dropped and when herald exits (an `atexit` hook, which also covers
//! `std::process::exit`), each group is asked to end (SIGTERM) and killed (SIGKILL)
//! after a grace; when herald is killed, the kernel kills each server with its parent
//! (`PR_SET_PDEATHSIG`).

use std::collections::BTreeSet;
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

/// How long a server whose connection was dropped gets to end before it is killed.
const GRACE: Duration = Duration::from_secs(2);
/// How long herald's exit waits for its servers to end before killing them.
const EXIT_GRACE: Duration = Duration::from_secs(2);

static GROUPS: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());
static HOOK: Once = Once::new();

/// Keeps `pid` (a process-group leader) to kill at exit.
pub fn track(pid: u32) {
    HOOK.call_once(|| {
        // SAFETY: registers a plain `extern "C" fn` with no captured state.
        unsafe {
            libc::atexit(kill_all_at_exit);
        }
    });
    if let Ok(mut g) = GROUPS.lock() {
        g.insert(pid);
    }
}

/// Kills `pid`'s process group now and forgets it (a server that failed to start).
pub fn kill(pid: u32) {
    if let Ok(mut g) = GROUPS.lock() {
        g.remove(&pid);
    }
    herald_process::kill_group(Some(pid));
}

/// Stops `pid`'s process group: SIGTERM now, SIGKILL once it has ended or after
/// [`GRACE`] (on a thread of its own: the caller does not wait). It is forgotten only
/// then, so an exit meanwhile still waits for it (herald's end would otherwise kill
/// it at once, through `PR_SET_PDEATHSIG`).
pub fn stop(pid: u32) {
    herald_process::terminate_group(Some(pid));
    let reaper = std::thread::Builder::new()
        .name("mcp-stop".into())
        .spawn(move || {
            wait_ended(&[pid], GRACE);
            kill(pid);
        });
    if reaper.is_err() {
        kill(pid);
    }
}

/// Waits until every leader in `pids` has ended, or `within` passes.
fn wait_ended(pids: &[u32], within: Duration) {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline && !pids.iter().all(|p| herald_process::has_exited(*p)) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Stops every server process group still running: SIGTERM, up to [`EXIT_GRACE`]
/// for them to end, then SIGKILL (which also reaches what they left behind).
pub fn stop_all() {
    let pids: Vec<u32> = match GROUPS.lock() {
        Ok(mut g) => std::mem::take(&mut *g).into_iter().collect(),
        Err(_) => return,
    };
    for pid in &pids {
        herald_process::terminate_group(Some(*pid));
    }
    wait_ended(&pids, EXIT_GRACE);
    for pid in pids {
        herald_process::kill_group(Some(pid));
    }
}

extern "C" fn kill_all_at_exit() {
    stop_all();
}

/// The number of server processes herald runs now.
pub fn running() -> usize {
    GROUPS.lock().map_or(0, |g| g.len())
}
