//! Writing to stdout the way `grep` does: when the reader goes away (a closed pipe,
//! `herald inbox list | head`), herald exits quietly instead of panicking.

use std::io::{ErrorKind, Write};

/// Writes `args` to stdout; a closed pipe ends the process with status 0, any other
/// write error with status 1 (stdout is gone, so there is nowhere to say more).
pub fn write(args: std::fmt::Arguments<'_>, newline: bool, flush: bool) {
    let mut stdout = std::io::stdout().lock();
    let written = stdout
        .write_fmt(args)
        .and_then(|()| {
            if newline {
                stdout.write_all(b"\n")
            } else {
                Ok(())
            }
        })
        .and_then(|()| if flush { stdout.flush() } else { Ok(()) });
    if let Err(e) = written {
        drop(stdout);
        exit_on_write_error(&e);
    }
}

/// Ends the process after stdout failed: quietly on a closed pipe.
pub fn exit_on_write_error(e: &std::io::Error) -> ! {
    if e.kind() == ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    eprintln!("herald: cannot write to stdout: {e}");
    std::process::exit(1);
}

/// `println!` that exits quietly when stdout's reader has gone away.
macro_rules! outln {
    () => { $crate::output::write(format_args!(""), true, false) };
    ($($arg:tt)*) => { $crate::output::write(format_args!($($arg)*), true, false) };
}

/// `print!` plus a flush (for streamed text), exiting quietly on a closed pipe.
macro_rules! out {
    ($($arg:tt)*) => { $crate::output::write(format_args!($($arg)*), false, true) };
}
