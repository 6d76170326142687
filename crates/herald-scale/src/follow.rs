//! A run's events relayed to the instance that follows them (`/v1/runs/{id}/events`
//! asked of an instance that does not run it). The owner sends them in order over a
//! connection of its own, as notifications on one channel: several events to a
//! notification while they are short, one event over several when it is long. The
//! follower's listener hands each stream its events, and ends a stream that missed a
//! notification (its reader then waits for the run's stored status).
//!
//! A notification is `<instance>\n<stream>\n<seq>\n<flag>\n<data>`: `m` (more of
//! the data follows), `e` (the data is complete: events one to a line) or `x` (the
//! stream is over).

use crate::connect::Target;
use herald_store::StoreError;
use herald_store::sessions::{Follower, RelayedEvents};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// The channel relayed events travel on.
const CHANNEL: &str = "herald_run_events";
/// The most data one notification carries (its payload is at most 8000 bytes).
const MAX_DATA: usize = 7000;
/// The events a stream keeps for its reader; a reader further behind loses the stream.
const STREAM_BACKLOG: usize = 1024;
/// The longest event a stream takes (a run's final answer is one event).
const MAX_EVENT: usize = 16 << 20;

/// The streams this instance follows, by stream id.
#[derive(Default)]
pub(crate) struct Streams {
    open: Arc<Mutex<HashMap<String, Incoming>>>,
    listening: crate::listen::OnDemand,
}

/// One stream as it arrives.
struct Incoming {
    next: u64,
    partial: String,
    events: mpsc::Sender<String>,
}

/// One notification, parsed.
struct Notice<'a> {
    to: &'a str,
    stream: &'a str,
    seq: u64,
    flag: &'a str,
    data: &'a str,
}

impl Streams {
    /// A new stream: its id and where its events arrive, once the listener listens.
    pub(crate) async fn open(&self, target: &Arc<Target>, me: &str) -> (String, RelayedEvents) {
        let (open, me) = (self.open.clone(), me.to_owned());
        let hear = move || {
            Arc::new(move |payload: &str| {
                if let Some(n) = parse(payload).filter(|n| n.to == me)
                    && let Ok(mut open) = open.lock()
                {
                    hear(&mut open, &n);
                }
            }) as Arc<dyn Fn(&str) + Send + Sync>
        };
        self.listening.start(target, CHANNEL, hear).await;
        static OPENED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = OPENED
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .to_string();
        let (tx, rx) = mpsc::channel(STREAM_BACKLOG);
        if let Ok(mut open) = self.open.lock() {
            open.retain(|_, s| !s.events.is_closed());
            open.insert(
                id.clone(),
                Incoming {
                    next: 0,
                    partial: String::new(),
                    events: tx,
                },
            );
        }
        (id, rx)
    }

    /// Forgets a stream nothing will come on.
    pub(crate) fn close(&self, id: &str) {
        if let Ok(mut open) = self.open.lock() {
            open.remove(id);
        }
    }
}

fn parse(payload: &str) -> Option<Notice<'_>> {
    let mut parts = payload.splitn(5, '\n');
    Some(Notice {
        to: parts.next()?,
        stream: parts.next()?,
        seq: parts.next()?.parse().ok()?,
        flag: parts.next()?,
        data: parts.next()?,
    })
}

/// Hands a stream what a notification carries; a stream that missed one, whose
/// reader fell behind or is gone, or that is over, is closed.
fn hear(open: &mut HashMap<String, Incoming>, n: &Notice<'_>) {
    let Some(s) = open.get_mut(n.stream) else {
        return;
    };
    let keep = n.seq == s.next
        && match n.flag {
            "m" => append(s, n.data),
            "e" => append(s, n.data) && hand_on(s),
            _ => false,
        };
    s.next += 1;
    if !keep {
        open.remove(n.stream);
    }
}

fn append(s: &mut Incoming, data: &str) -> bool {
    s.partial.push_str(data);
    s.partial.len() <= MAX_EVENT
}

fn hand_on(s: &mut Incoming) -> bool {
    let whole = std::mem::take(&mut s.partial);
    whole
        .split('\n')
        .filter(|line| !line.is_empty())
        .all(|line| s.events.try_send(line.to_owned()).is_ok())
}

/// Sends `events` to `follower` until the channel closes, then says the stream is
/// over; on a connection of its own, so that they arrive in order.
pub(crate) fn forward(target: Arc<Target>, follower: Follower, mut events: RelayedEvents) {
    tokio::spawn(async move {
        let client = match connect(&target).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "store: a run's events could not be relayed to the instance that follows them");
                return;
            }
        };
        let mut seq = 0u64;
        while let Some(first) = events.recv().await {
            let batch = gather(first, &mut events);
            let pieces = pieces(&batch);
            let last = pieces.len() - 1;
            for (i, piece) in pieces.into_iter().enumerate() {
                let flag = if i == last { "e" } else { "m" };
                if send(&client, &follower, seq, flag, piece).await.is_err() {
                    return;
                }
                seq += 1;
            }
        }
        let _ = send(&client, &follower, seq, "x", "").await;
    });
}

async fn connect(target: &Target) -> Result<tokio_postgres::Client, StoreError> {
    let (client, conn) = target
        .config
        .connect(target.tls.clone())
        .await
        .map_err(|e| StoreError::Database(e.to_string()))?;
    tokio::spawn(conn);
    Ok(client)
}

/// `first` and the events queued behind it, one to a line, while short enough for
/// one notification.
fn gather(first: String, events: &mut RelayedEvents) -> String {
    let mut batch = first;
    while batch.len() < MAX_DATA {
        match events.try_recv() {
            Ok(e) => {
                batch.push('\n');
                batch.push_str(&e);
            }
            Err(_) => break,
        }
    }
    batch
}

/// `s` cut at character boundaries into pieces of at most [`MAX_DATA`] bytes.
fn pieces(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = s;
    while rest.len() > MAX_DATA {
        let mut cut = MAX_DATA;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        out.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    out.push(rest);
    out
}

async fn send(
    client: &tokio_postgres::Client,
    to: &Follower,
    seq: u64,
    flag: &str,
    data: &str,
) -> Result<(), tokio_postgres::Error> {
    let payload = format!("{}\n{}\n{seq}\n{flag}\n{data}", to.instance, to.stream);
    client
        .execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &payload])
        .await
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_cut_at_character_boundaries() {
        let s = "é".repeat(MAX_DATA);
        let p = pieces(&s);
        assert!(p.iter().all(|x| x.len() <= MAX_DATA));
        assert_eq!(p.concat(), s);
        assert_eq!(pieces(""), vec![""]);
    }

    fn stream() -> (HashMap<String, Incoming>, mpsc::Receiver<String>) {
        let (tx, rx) = mpsc::channel(STREAM_BACKLOG);
        let incoming = Incoming {
            next: 0,
            partial: String::new(),
            events: tx,
        };
        (HashMap::from([("7".to_owned(), incoming)]), rx)
    }

    fn notice(open: &mut HashMap<String, Incoming>, seq: u64, flag: &str, data: &str) {
        let payload = format!("me\n7\n{seq}\n{flag}\n{data}");
        hear(open, &parse(&payload).unwrap());
    }

    #[test]
    fn a_long_event_is_put_together_and_short_ones_come_apart() {
        let (mut open, mut rx) = stream();
        let long = "x".repeat(3 * MAX_DATA + 5);
        let mut seq = 0;
        for (i, piece) in pieces(&long).iter().enumerate() {
            let flag = if i == 3 { "e" } else { "m" };
            notice(&mut open, seq, flag, piece);
            seq += 1;
        }
        notice(&mut open, seq, "e", "{\"a\":1}\n{\"b\":2}");
        notice(&mut open, seq + 1, "x", "");
        assert_eq!(rx.try_recv().unwrap(), long);
        assert_eq!(rx.try_recv().unwrap(), "{\"a\":1}");
        assert_eq!(rx.try_recv().unwrap(), "{\"b\":2}");
        assert!(open.is_empty(), "the stream is over");
    }

    #[test]
    fn a_missed_notification_ends_the_stream() {
        let (mut open, mut rx) = stream();
        notice(&mut open, 0, "e", "one");
        notice(&mut open, 2, "e", "three");
        assert_eq!(rx.try_recv().unwrap(), "one");
        assert!(rx.try_recv().is_err());
        assert!(
            open.is_empty(),
            "closed, its reader falls back to the status"
        );
    }
}
