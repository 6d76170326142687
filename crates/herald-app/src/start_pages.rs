//! Giving back the pages of herald's own program that only starting needed.
//!
//! Starting a gateway runs code from most of the binary once (the YAML parser, the
//! command line, regex compilation, building the routers, the stores' migrations), and
//! the kernel maps it in 64 KiB windows around each first touch: an idle gateway kept
//! about 18 MiB of its program resident, of which it touches about 1 MiB while idle.
//! Once serving, [`release_once_serving`] asks the kernel to reclaim the program's
//! read-only file pages (`MADV_PAGEOUT`, Linux 5.4 and later); what the gateway runs
//! afterwards comes back on first use, as any page of a program does.
//!
//! Only mappings that hold no anonymous pages are advised: the relocated read-only data
//! (RELRO: the GOT, vtables) was copied on write at load, and paging it out would send
//! hot memory to swap. The kernel itself pages out a file's pages only for a process
//! that owns the file or may write it (and never pages shared with other processes);
//! a binary installed by root and run as another user keeps its pages, and nothing
//! changes.

use std::time::Duration;

/// How long after its start the gateway gives the pages back: by then the listeners
/// accept and their routers are built (which happens after systemd hears "ready").
const SERVING_AFTER: Duration = Duration::from_secs(2);

/// Gives back the start-only pages once the gateway has served for [`SERVING_AFTER`].
pub(crate) fn release_once_serving() {
    tokio::spawn(async {
        tokio::time::sleep(SERVING_AFTER).await;
        if let Some(bytes) = release() {
            tracing::debug!(bytes, "start-only program pages advised out");
        }
    });
}

/// One mapping of `/proc/self/smaps`: where, whether writable, which inode, and how
/// much of it is anonymous (copied on write).
#[derive(Debug, PartialEq, Eq)]
struct Mapping {
    start: usize,
    len: usize,
    writable: bool,
    inode: u64,
    anonymous_kb: u64,
}

/// The mappings `smaps` lists; lines it cannot read are skipped.
fn mappings(smaps: &str) -> Vec<Mapping> {
    let mut all: Vec<Mapping> = Vec::new();
    for line in smaps.lines() {
        if let Some(kb) = line.strip_prefix("Anonymous:") {
            if let Some(last) = all.last_mut() {
                last.anonymous_kb = kb.trim().trim_end_matches("kB").trim().parse().unwrap_or(1);
            }
            continue;
        }
        if let Some(mapping) = header(line) {
            all.push(mapping);
        }
    }
    all
}

/// A mapping's header line: `start-end perms offset dev inode [path]`.
fn header(line: &str) -> Option<Mapping> {
    let mut fields = line.split_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let perms = fields.next()?;
    let _offset = fields.next()?;
    let dev = fields.next()?;
    let inode = fields.next()?.parse().ok()?;
    if perms.len() != 4 || !dev.contains(':') {
        return None;
    }
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    Some(Mapping {
        start,
        len: end.checked_sub(start)?,
        writable: perms.contains('w'),
        inode,
        // Unknown until its `Anonymous:` line says otherwise: never advised blind.
        anonymous_kb: 1,
    })
}

/// The program's own read-only mappings that hold only file pages.
fn program_pages(smaps: &str, exe_inode: u64) -> Vec<(usize, usize)> {
    mappings(smaps)
        .into_iter()
        .filter(|m| m.inode == exe_inode && !m.writable && m.anonymous_kb == 0 && m.len > 0)
        .map(|m| (m.start, m.len))
        .collect()
}

/// Asks the kernel to reclaim the program's read-only file pages now; bytes advised, or
/// `None` where the kernel or platform cannot (nothing changes then).
fn release() -> Option<usize> {
    use std::os::unix::fs::MetadataExt;
    let exe_inode = std::fs::metadata("/proc/self/exe").ok()?.ino();
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut advised = 0;
    for (start, len) in program_pages(&smaps, exe_inode) {
        advised += advise(start, len)?;
    }
    Some(advised)
}

#[cfg(target_os = "linux")]
fn advise(start: usize, len: usize) -> Option<usize> {
    // SAFETY: the range is one of this process's own read-only file mappings with no
    // anonymous pages, as /proc/self/smaps lists it, never unmapped while the program
    // runs; MADV_PAGEOUT only reclaims its clean file pages, which the kernel reads back
    // from the file on the next touch, so no memory the program holds changes.
    let done = unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_PAGEOUT) };
    (done == 0).then_some(len)
}

#[cfg(not(target_os = "linux"))]
fn advise(_start: usize, _len: usize) -> Option<usize> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_programs_read_only_file_mappings_are_chosen() {
        let smaps = "\
55d0c0000000-55d0c0691000 r--p 00000000 fd:00 123                        /usr/bin/my herald (deleted)
Rss:                2760 kB
Anonymous:             0 kB
55d0c0691000-55d0c21c5000 r-xp 00691000 fd:00 123                        /usr/bin/my herald (deleted)
Anonymous:             0 kB
55d0c21c5000-55d0c229c000 r--p 021c5000 fd:00 123                        /usr/bin/my herald (deleted)
Anonymous:           864 kB
55d0c23c5000-55d0c23d2000 rw-p 021c5000 fd:00 123                        /usr/bin/my herald (deleted)
Anonymous:            52 kB
7f0000000000-7f0000001000 r-xp 00000000 fd:00 9                          /usr/lib/libc.so.6
Anonymous:             0 kB
7f0000002000-7f0000003000 r--p 00000000 fd:00 123                        /usr/bin/no-anonymous-line
garbage line
";
        assert_eq!(
            program_pages(smaps, 123),
            vec![(0x55d0c0000000, 0x691000), (0x55d0c0691000, 0x1b34000)]
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_running_program_gives_back_its_pages_and_runs_on() {
        use std::os::unix::fs::MetadataExt;
        // This test binary's own code and read-only data: found, advised (unless the
        // kernel has no MADV_PAGEOUT), and still there to run the assertions that follow.
        let Some(advised) = release() else {
            return;
        };
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let inode = std::fs::metadata("/proc/self/exe").unwrap().ino();
        let mine = program_pages(&smaps, inode);
        assert!(!mine.is_empty());
        assert_eq!(mine.iter().map(|(_, len)| len).sum::<usize>(), advised);
    }
}
