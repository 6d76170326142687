//! The stdio servers' process groups, killed on every way herald ends: when their
//! connection is dropped, when herald exits (an `atexit` hook, which also covers
//! `std::process::exit`), and when herald is killed (each server is started with
//! `PR_SET_PDEATHSIG`, so the kernel kills it with its parent).

use std::collections::BTreeSet;
use std::sync::{Mutex, Once};

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

/// Kills `pid`'s process group now and forgets it.
pub fn kill(pid: u32) {
    if let Ok(mut g) = GROUPS.lock() {
        g.remove(&pid);
    }
    herald_process::kill_group(Some(pid));
}

/// Kills every server process group still running.
pub fn kill_all() {
    let pids: Vec<u32> = match GROUPS.lock() {
        Ok(mut g) => std::mem::take(&mut *g).into_iter().collect(),
        Err(_) => return,
    };
    for pid in pids {
        herald_process::kill_group(Some(pid));
    }
}

extern "C" fn kill_all_at_exit() {
    kill_all();
}

/// The number of server processes herald runs now.
pub fn running() -> usize {
    GROUPS.lock().map_or(0, |g| g.len())
}
