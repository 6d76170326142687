//! How fast one MCP server may talk. Every message it sends counts (notifications,
//! its own requests, answers): in a second where it sends more than
//! [`MESSAGES_PER_SECOND`], herald reads nothing more from it until the second is over
//! (the pipe or socket fills and the server waits), so a flood costs herald about that
//! many messages a second. After [`FLOOD_SECONDS`] such seconds in a row the connection
//! is closed and marked flooded, and the server is told apart from one that failed.

use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// Messages a server may send in one second before herald stops reading for the rest
/// of it. A server's progress and log notifications come a few a second; a burst of
/// answers to parallel calls stays under it.
pub const MESSAGES_PER_SECOND: u32 = 100;
/// Seconds over [`MESSAGES_PER_SECOND`] in a row after which the server is
/// disconnected.
pub const FLOOD_SECONDS: u32 = 10;

const SECOND: Duration = Duration::from_secs(1);

/// Why a server was disconnected for flooding, in words for the user.
pub fn why_disconnected() -> String {
    format!(
        "disconnected: it sent more than {MESSAGES_PER_SECOND} messages a second for {FLOOD_SECONDS} s in a row"
    )
}

/// Set once a connection was closed for flooding.
#[derive(Debug, Default)]
pub struct Flooded(AtomicBool);

impl Flooded {
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    fn set(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// What to do after a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pace {
    Go,
    /// Read nothing more until then.
    PauseUntil(Instant),
    /// Close the connection.
    Disconnect,
}

/// The count of the current one-second window and the run of windows over the limit.
#[derive(Debug, Default)]
struct Rate {
    window: Option<Instant>,
    count: u32,
    hot_in_a_row: u32,
}

impl Rate {
    fn message(&mut self, now: Instant) -> Pace {
        let start = match self.window {
            Some(start) if now < start + SECOND => start,
            Some(start) => {
                // The run goes on only through a window over the limit followed at once
                // by the next.
                let was_hot = self.count > MESSAGES_PER_SECOND;
                if !was_hot || now >= start + 2 * SECOND {
                    self.hot_in_a_row = 0;
                }
                self.count = 0;
                now
            }
            None => now,
        };
        self.window = Some(start);
        self.count = self.count.saturating_add(1);
        if self.count != MESSAGES_PER_SECOND + 1 {
            return Pace::Go;
        }
        self.hot_in_a_row += 1;
        match self.hot_in_a_row >= FLOOD_SECONDS {
            true => Pace::Disconnect,
            false => Pace::PauseUntil(start + SECOND),
        }
    }
}

/// A transport whose incoming messages are paced by [`Rate`].
pub struct Metered<T> {
    inner: T,
    rate: Rate,
    paused_until: Option<Instant>,
    flooded: Arc<Flooded>,
}

impl<T> Metered<T> {
    pub fn new(inner: T, flooded: Arc<Flooded>) -> Metered<T> {
        Metered {
            inner,
            rate: Rate::default(),
            paused_until: None,
            flooded,
        }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Metered<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    /// Cancel-safe, as the SDK needs: the pause is kept on the transport, and a
    /// message is counted only once it has been taken.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        if let Some(until) = self.paused_until {
            tokio::time::sleep_until(until).await;
            self.paused_until = None;
        }
        if self.flooded.is_set() {
            return None;
        }
        let message = self.inner.receive().await?;
        match self.rate.message(Instant::now()) {
            Pace::Go => {}
            Pace::PauseUntil(until) => self.paused_until = Some(until),
            Pace::Disconnect => {
                self.flooded.set();
                return None;
            }
        }
        Some(message)
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inner.close().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` messages spread over one second from `at`: what the last one got.
    fn second(rate: &mut Rate, at: Instant, n: u32) -> Pace {
        let mut last = Pace::Go;
        for i in 0..n {
            last = rate.message(at + SECOND * i / n);
            if last != Pace::Go {
                return last;
            }
        }
        last
    }

    #[test]
    fn a_busy_second_pauses_reading_until_it_ends() {
        let mut rate = Rate::default();
        let t0 = Instant::now();
        assert_eq!(second(&mut rate, t0, MESSAGES_PER_SECOND), Pace::Go);
        assert_eq!(rate.message(t0 + SECOND / 2), Pace::PauseUntil(t0 + SECOND));
    }

    #[test]
    fn a_flood_is_disconnected_after_its_run_of_seconds_and_a_burst_is_not() {
        let mut rate = Rate::default();
        let mut at = Instant::now();
        for _ in 1..FLOOD_SECONDS {
            assert_eq!(second(&mut rate, at, 1000), Pace::PauseUntil(at + SECOND));
            at += SECOND;
        }
        assert_eq!(second(&mut rate, at, 1000), Pace::Disconnect);

        // Busy seconds with a quiet one between them start the run again.
        let mut rate = Rate::default();
        let mut at = Instant::now();
        for i in 0..3 * FLOOD_SECONDS {
            let pace = match i % 5 == 4 {
                true => second(&mut rate, at, 10),
                false => second(&mut rate, at, 1000),
            };
            assert_ne!(pace, Pace::Disconnect, "second {i}");
            at += SECOND;
        }
        // So does a gap of more than a second.
        let mut rate = Rate::default();
        let mut at = Instant::now();
        for i in 0..3 * FLOOD_SECONDS {
            assert_ne!(second(&mut rate, at, 1000), Pace::Disconnect, "second {i}");
            at += match i % 5 == 4 {
                true => 3 * SECOND,
                false => SECOND,
            };
        }
    }
}
