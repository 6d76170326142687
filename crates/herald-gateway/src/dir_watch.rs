//! Knowing cheaply whether anything in a directory changed: an inotify watch on it,
//! peeked on every request with one `FIONREAD` (no path lookup, unlike a `stat`).
//!
//! A change is seen by the first request after it: the kernel queues the event before
//! the writer's system call returns, and a request peeks at the queue. While one request
//! drains the queue and reloads, the others see the drain in progress and wait for it,
//! so none of them can miss a change another request consumed.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// What is watched: entries created, deleted, moved in or out, closed after writing,
/// or given new attributes (a `touch`). Plain writes (`IN_MODIFY`) are left out: the
/// inbox's database beside the file is written on every accepted event.
const MASK: u32 = libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_CLOSE_WRITE
    | libc::IN_ATTRIB
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF;
/// The fixed part of a `struct inotify_event` (wd, mask, cookie, len).
const EVENT_HEADER: usize = 16;

/// A watch on one directory.
pub struct DirWatch {
    fd: OwnedFd,
    /// Drains in progress: a request that finds the queue empty while one runs waits
    /// for it instead of trusting what it has.
    draining: AtomicUsize,
    /// The watch ended (the directory was removed or moved): nothing more is reported.
    blind: AtomicBool,
}

/// Marks a drain in progress until dropped (after the caller has acted on it).
pub struct Drain<'a>(&'a DirWatch);

impl Drop for Drain<'_> {
    fn drop(&mut self) {
        self.0.draining.fetch_sub(1, Ordering::SeqCst);
    }
}

impl DirWatch {
    /// Watches `dir`; `None` where inotify is not available (the caller checks itself).
    pub fn new(dir: &Path) -> Option<DirWatch> {
        let path = CString::new(dir.as_os_str().as_encoded_bytes()).ok()?;
        // SAFETY: inotify_init1 takes flags only; a non-negative result is a new fd we own.
        let raw = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if raw < 0 {
            return None;
        }
        // SAFETY: `raw` is a valid descriptor no one else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: `path` is a valid NUL-terminated string for the duration of the call.
        let wd = unsafe { libc::inotify_add_watch(fd.as_raw_fd(), path.as_ptr(), MASK) };
        (wd >= 0).then_some(DirWatch {
            fd,
            draining: AtomicUsize::new(0),
            blind: AtomicBool::new(false),
        })
    }

    /// Whether something may have changed: events are queued, a drain is in progress,
    /// or the watch has ended.
    pub fn pending(&self) -> bool {
        let mut queued: libc::c_int = 0;
        // SAFETY: FIONREAD writes one c_int to the pointer we pass.
        let rc = unsafe { libc::ioctl(self.fd.as_raw_fd(), libc::FIONREAD, &mut queued) };
        rc != 0
            || queued > 0
            || self.draining.load(Ordering::SeqCst) > 0
            || self.blind.load(Ordering::Relaxed)
    }

    /// Empties the queue; the returned guard keeps other requests waiting on
    /// [`pending`](Self::pending) until the caller has acted and dropped it.
    pub fn drain(&self) -> Drain<'_> {
        self.draining.fetch_add(1, Ordering::SeqCst);
        let mut buf = [0u8; 4096];
        loop {
            // SAFETY: read writes at most `buf.len()` bytes into `buf`.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            let Ok(n) = usize::try_from(n) else {
                break; // EAGAIN: empty (any other error: nothing more to read either)
            };
            if n == 0 {
                break;
            }
            if watch_ended(&buf[..n]) {
                self.blind.store(true, Ordering::Relaxed);
            }
        }
        Drain(self)
    }
}

/// Whether any event in `events` says the watch itself is gone.
fn watch_ended(mut events: &[u8]) -> bool {
    let mut ended = false;
    while events.len() >= EVENT_HEADER {
        let field = |at: usize| {
            u32::from_ne_bytes([events[at], events[at + 1], events[at + 2], events[at + 3]])
        };
        let (mask, len) = (field(4), field(12) as usize);
        ended |= mask & (libc::IN_IGNORED | libc::IN_DELETE_SELF | libc::IN_MOVE_SELF) != 0;
        events = events.get(EVENT_HEADER + len..).unwrap_or_default();
    }
    ended
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_pending_until_drained_and_a_removed_directory_is_blind() {
        let dir = tempfile::tempdir().unwrap();
        let watch = DirWatch::new(dir.path()).unwrap();
        assert!(!watch.pending());
        let file = dir.path().join("subs.json");
        std::fs::write(&file, "{}").unwrap();
        assert!(watch.pending());
        let drain = watch.drain();
        // Still pending while the drainer acts on what it read.
        assert!(watch.pending());
        drop(drain);
        assert!(!watch.pending());
        std::fs::rename(&file, dir.path().join("other")).unwrap();
        assert!(watch.pending());
        drop(watch.drain());
        let path = dir.path().to_path_buf();
        dir.close().unwrap();
        assert!(watch.pending());
        drop(watch.drain());
        assert!(
            watch.pending(),
            "a watch that ended reports changes forever"
        );
        assert!(!path.exists());
    }
}
