//! One client's outgoing queue, bounded in bytes: what the API's server-sent events, the
//! JSON-RPC gateway's connections and the dashboard's run watch write into, and their
//! writer takes from. A producer waits while the bytes queued would pass the budget (a
//! slow reader slows the producer, and through the run's flow the provider, never
//! memory); with a write timeout, a reader that frees no room for that long is taken as
//! gone. Each item's room is given back as the writer takes it.

use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

/// What an item weighs in an outbox's byte budget.
pub trait Weight {
    fn weight(&self) -> usize;
}

impl Weight for String {
    fn weight(&self) -> usize {
        self.len()
    }
}

impl Weight for bytes::Bytes {
    fn weight(&self) -> usize {
        self.len()
    }
}

/// The producers' side; cheap to clone.
#[derive(Debug)]
pub struct Outbox<T> {
    tx: mpsc::UnboundedSender<(T, OwnedSemaphorePermit)>,
    room: Arc<Semaphore>,
    budget: usize,
    write_timeout: Option<Duration>,
}

impl<T> Clone for Outbox<T> {
    fn clone(&self) -> Self {
        Outbox {
            tx: self.tx.clone(),
            room: self.room.clone(),
            budget: self.budget,
            write_timeout: self.write_timeout,
        }
    }
}

/// The writer's side.
#[derive(Debug)]
pub struct Outgoing<T>(mpsc::UnboundedReceiver<(T, OwnedSemaphorePermit)>);

/// An outbox holding at most `budget` bytes (an item bigger than the whole budget takes
/// all of it); with `write_timeout`, a send that waits that long for room fails.
pub fn outbox<T: Weight>(
    budget: usize,
    write_timeout: Option<Duration>,
) -> (Outbox<T>, Outgoing<T>) {
    let budget = budget.clamp(1, Semaphore::MAX_PERMITS.min(u32::MAX as usize));
    let (tx, rx) = mpsc::unbounded_channel();
    let outbox = Outbox {
        tx,
        room: Arc::new(Semaphore::new(budget)),
        budget,
        write_timeout,
    };
    (outbox, Outgoing(rx))
}

impl<T: Weight> Outbox<T> {
    /// Queues `item` once there is room for it; false when the writer is gone, or freed
    /// no room within the write timeout.
    pub async fn send(&self, item: T) -> bool {
        let wanted = u32::try_from(item.weight().clamp(1, self.budget)).unwrap_or(u32::MAX);
        let room = self.room.clone().acquire_many_owned(wanted);
        let permit = match self.write_timeout {
            Some(limit) => match tokio::time::timeout(limit, room).await {
                Ok(permit) => permit,
                Err(_) => return false,
            },
            None => room.await,
        };
        match permit {
            Ok(permit) => self.tx.send((item, permit)).is_ok(),
            Err(_) => false,
        }
    }
}

impl<T> Outbox<T> {
    /// Whether the writer is gone.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// Resolves once the writer is gone.
    pub async fn closed(&self) {
        self.tx.closed().await;
    }
}

impl<T> Outgoing<T> {
    /// The next item, its room given back; `None` once every producer is gone.
    pub async fn recv(&mut self) -> Option<T> {
        self.0.recv().await.map(|(item, _room)| item)
    }

    /// Nothing more waits now.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_outbox_holds_its_producer_until_the_writer_takes_or_times_out() {
        let (tx, mut rx) = outbox::<String>(10, Some(Duration::from_millis(100)));
        assert!(tx.send("0123456789".into()).await);
        // No room: the second waits, then gives up at the write timeout.
        let started = std::time::Instant::now();
        assert!(!tx.send("x".into()).await);
        assert!(started.elapsed() >= Duration::from_millis(100));
        // Taking frees the room.
        assert_eq!(rx.recv().await.as_deref(), Some("0123456789"));
        assert!(tx.send("abc".into()).await);
        // Bigger than the budget: takes all of it, alone.
        let (big_tx, mut big_rx) = outbox::<String>(4, None);
        assert!(big_tx.send("far more than four".into()).await);
        assert_eq!(big_rx.recv().await.as_deref(), Some("far more than four"));
        drop(big_rx);
        assert!(big_tx.is_closed());
        assert!(!big_tx.send("gone".into()).await);
    }
}
