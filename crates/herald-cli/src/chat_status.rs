//! The status line of `herald chat`: while the model has not sent its first token, or a
//! tool runs, a spinner with what is awaited and for how long, on stderr only and only
//! when stderr is a terminal (never with `-Q`). Cleared before anything else is printed.

use std::io::Write;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

const FRAMES: &[char] = &['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
const TICK: Duration = Duration::from_millis(100);
/// Erases the terminal line the cursor is on.
const CLEAR: &str = "\r\x1b[2K";

#[derive(Default)]
struct State {
    /// What is awaited, since when.
    waiting: Option<(String, Instant)>,
    /// The line currently shows a status.
    shown: bool,
}

/// A handle on the status line; clones share it. A disabled one does nothing.
#[derive(Clone, Default)]
pub struct StatusLine {
    state: Option<Arc<Mutex<State>>>,
}

impl StatusLine {
    /// A status line drawn by a ticker thread, or a disabled one.
    pub fn start(enabled: bool) -> StatusLine {
        if !enabled {
            return StatusLine::default();
        }
        let state = Arc::new(Mutex::new(State::default()));
        let weak = Arc::downgrade(&state);
        let _ = std::thread::Builder::new()
            .name("herald-status".into())
            .spawn(move || tick(&weak));
        StatusLine { state: Some(state) }
    }

    /// Shows `label` with a spinner and the time since now.
    pub fn show(&self, label: impl Into<String>) {
        if let Some(mut s) = self.lock() {
            s.waiting = Some((label.into(), Instant::now()));
        }
    }

    /// Clears the line; call before printing anything.
    pub fn hide(&self) {
        if let Some(mut s) = self.lock() {
            s.waiting = None;
            if s.shown {
                s.shown = false;
                let mut err = std::io::stderr().lock();
                let _ = write!(err, "{CLEAR}");
                let _ = err.flush();
            }
        }
    }

    fn lock(&self) -> Option<std::sync::MutexGuard<'_, State>> {
        self.state.as_ref()?.lock().ok()
    }
}

/// Redraws the line every tick until every handle is gone.
fn tick(state: &Weak<Mutex<State>>) {
    let mut frame = 0usize;
    loop {
        std::thread::sleep(TICK);
        let Some(state) = state.upgrade() else {
            return;
        };
        let Ok(mut s) = state.lock() else {
            return;
        };
        if let Some((label, since)) = &s.waiting {
            frame = (frame + 1) % FRAMES.len();
            let secs = since.elapsed().as_secs_f32();
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "{CLEAR}{} {label} {secs:.1}s", FRAMES[frame]);
            let _ = err.flush();
            s.shown = true;
        }
    }
}
