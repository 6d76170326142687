//! Giving back the pages of herald's own program that only starting needed.
//!
//! Starting a gateway runs code from most of the binary once (the YAML parser, the
//! command line, regex compilation, building the routers, the stores' migrations), and
//! the kernel maps it in 64 KiB windows around each first touch: an idle gateway kept
//! about 18 MiB of its program resident, of which it touches about 1 MiB while idle.
//! Once serving, [`release_once_serving`] asks the kernel to reclaim the program's read-only pages
//! (`MADV_PAGEOUT`, Linux 5.4 and later); what the gateway runs afterwards comes back on
//! first use, as any page of a program does. Pages another process maps too (a `herald`
//! command running beside it) stay where they are.

/// How long after its start the gateway gives the pages back: by then the listeners
/// accept and their routers are built (which happens after systemd hears "ready").
const SERVING_AFTER: std::time::Duration = std::time::Duration::from_secs(2);

/// Gives back the start-only pages once the gateway has served for [`SERVING_AFTER`].
pub fn release_once_serving() {
    tokio::spawn(async {
        tokio::time::sleep(SERVING_AFTER).await;
        if let Some(bytes) = release() {
            tracing::debug!(bytes, "start-only program pages given back");
        }
    });
}

/// The program's own read-only mappings: its code and read-only data.
fn program_mappings(maps: &str, exe: &str) -> Vec<(usize, usize)> {
    maps.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let range = fields.next()?;
            let perms = fields.next()?;
            let path = fields.nth(3)?;
            if path != exe || perms.contains('w') {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            let start = usize::from_str_radix(start, 16).ok()?;
            let end = usize::from_str_radix(end, 16).ok()?;
            (end > start).then_some((start, end - start))
        })
        .collect()
}

/// Asks the kernel to reclaim the program's read-only pages now; bytes advised, or
/// `None` where the kernel or platform cannot (nothing changes then).
pub fn release() -> Option<usize> {
    let exe = std::fs::read_link("/proc/self/exe").ok()?;
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let mut advised = 0;
    for (start, len) in program_mappings(&maps, &exe.to_string_lossy()) {
        advised += advise(start, len)?;
    }
    Some(advised)
}

#[cfg(target_os = "linux")]
fn advise(start: usize, len: usize) -> Option<usize> {
    // SAFETY: the range is one of this process's own file mappings as /proc/self/maps
    // lists it, read-only, never unmapped while the program runs; MADV_PAGEOUT only drops
    // clean pages, which the kernel reads back from the file on the next touch, so no
    // memory the program holds changes.
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
    fn only_the_programs_read_only_mappings_are_chosen() {
        let maps = "\
55d0c0000000-55d0c0691000 r--p 00000000 fd:00 123 /usr/bin/herald
55d0c0691000-55d0c21c5000 r-xp 00691000 fd:00 123 /usr/bin/herald
55d0c23c5000-55d0c23d2000 rw-p 021c5000 fd:00 123 /usr/bin/herald
7f0000000000-7f0000001000 r-xp 00000000 fd:00 9 /usr/lib/libc.so.6
7f0000002000-7f0000003000 rw-p 00000000 00:00 0
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
garbage line
";
        assert_eq!(
            program_mappings(maps, "/usr/bin/herald"),
            vec![(0x55d0c0000000, 0x691000), (0x55d0c0691000, 0x1b34000)]
        );
    }

    #[test]
    fn the_running_program_gives_back_its_pages_and_runs_on() {
        // This test binary's own code and read-only data: found, advised, and still
        // there to run the assertions that follow.
        let advised = release().expect("MADV_PAGEOUT on this kernel");
        assert!(advised > 0);
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let mine = program_mappings(&maps, &exe.to_string_lossy());
        assert_eq!(mine.iter().map(|(_, len)| len).sum::<usize>(), advised);
    }
}
