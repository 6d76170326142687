//! Everything sent to a chat goes through here: one governor per bot applies its
//! platform's limits once (for Telegram about a message a second per chat, twenty a
//! minute per group, thirty a second per bot), and a 429's wait pauses the chat it
//! came from.
//!
//! Sends are given slots in the order they ask, on a grid of the bot's rate: each takes
//! the earliest free slot at or after its chat's own next turn. So sends leave evenly
//! (never a burst over the bot's rate), and a busy bot serves its chats in turn rather
//! than letting some wait while others go again.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// A platform's send limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Spacing of messages to one private chat.
    pub per_chat: Duration,
    /// Spacing of messages to one group.
    pub per_group: Duration,
    /// Slots a second for the whole bot.
    pub per_bot: u32,
}

impl Limits {
    /// Telegram: a message a second per chat (with a margin for the network's jitter:
    /// Telegram counts arrivals), 20 a minute per group, 30 a second per bot (28 used).
    pub const TELEGRAM: Limits = Limits {
        per_chat: Duration::from_millis(1050),
        per_group: Duration::from_millis(3050),
        per_bot: 28,
    };
}

/// Chats remembered at most (those whose next turn has passed are forgotten first).
const MAX_CHATS: usize = 10_000;

/// A platform's limits for one bot, applied to every send.
pub struct Governor {
    limits: Limits,
    state: Mutex<State>,
    /// Sends waiting for their slot, per chat.
    waiting: Mutex<HashMap<String, u64>>,
    /// Flood answers seen.
    floods: std::sync::atomic::AtomicU64,
}

struct State {
    /// Slot numbers count from here.
    epoch: Instant,
    /// Slots given out that have not passed yet.
    taken: BTreeSet<u64>,
    /// The earliest next send per chat.
    next: HashMap<String, Instant>,
    /// A bot-wide pause (several chats flooded at once).
    paused_until: Option<Instant>,
    /// Chats paused by a flood answer, until when.
    chat_pause: HashMap<String, Instant>,
    /// Flood answers in the last second, to see a bot-wide limit.
    floods: Vec<Instant>,
}

impl Default for Governor {
    fn default() -> Self {
        Governor::new(Limits::TELEGRAM)
    }
}

impl Governor {
    pub fn new(limits: Limits) -> Governor {
        Governor {
            limits,
            state: Mutex::new(State {
                epoch: Instant::now(),
                taken: BTreeSet::new(),
                next: HashMap::new(),
                paused_until: None,
                chat_pause: HashMap::new(),
                floods: Vec::new(),
            }),
            waiting: Mutex::default(),
            floods: Default::default(),
        }
    }
}

/// A slot's length, rounded up so that no second holds more than `per_bot`.
fn slot_len(limits: &Limits) -> Duration {
    Duration::from_nanos(1_000_000_000u64.div_ceil(u64::from(limits.per_bot.max(1))))
}

impl Governor {
    /// Waits for this chat's next slot (counted as waiting meanwhile).
    pub async fn slot(&self, chat: &str, group: bool) {
        let _waiting = Waiting::new(self, chat);
        loop {
            let at = self.reserve(chat, Some(group), Instant::now());
            tokio::time::sleep_until(at).await;
            // A flood answered meanwhile pauses this send too.
            if !self.paused(chat, Instant::now()) {
                return;
            }
        }
    }

    /// Whether the chat (or the whole bot) is paused by flood control at `now`.
    fn paused(&self, chat: &str, now: Instant) -> bool {
        let s = self.lock();
        s.paused_until.is_some_and(|p| p > now) || s.chat_pause.get(chat).is_some_and(|p| *p > now)
    }

    /// Sends waiting for their slot in all, and the `top` chats with most waiting.
    pub fn queues(&self, top: usize) -> (u64, Vec<(String, u64)>) {
        let waiting = herald_session::conversation::lock(&self.waiting);
        let total = waiting.values().sum();
        let mut chats: Vec<(String, u64)> = waiting.iter().map(|(c, n)| (c.clone(), *n)).collect();
        chats.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        chats.truncate(top);
        (total, chats)
    }

    /// Flood answers seen since the start.
    pub fn flood_count(&self) -> u64 {
        self.floods.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Waits for a slot of the bot's rate (and a bot-wide pause), neither waiting for
    /// the chat's next turn nor moving it: for calls that are no messages (a
    /// reaction).
    pub async fn side_slot(&self, chat: &str) {
        let at = self.reserve(chat, None, Instant::now());
        tokio::time::sleep_until(at).await;
    }

    /// Reserves the earliest free slot at or after the chat's next turn (and any
    /// pause): when to send. `group`: a message, which moves the chat's next turn
    /// (`None`: a call that is no message).
    fn reserve(&self, chat: &str, group: Option<bool>, now: Instant) -> Instant {
        let mut s = self.lock();
        let mut earliest = now;
        if let Some(p) = s.paused_until.filter(|p| *p > now) {
            earliest = earliest.max(p);
        }
        if let Some(p) = s.chat_pause.get(chat) {
            earliest = earliest.max(*p);
        }
        if let Some(n) = s.next.get(chat).filter(|_| group.is_some()) {
            earliest = earliest.max(*n);
        }
        let len = slot_len(&self.limits);
        let first = (earliest.duration_since(s.epoch).as_nanos()).div_ceil(len.as_nanos());
        let mut slot = u64::try_from(first).unwrap_or(u64::MAX);
        while s.taken.contains(&slot) {
            slot += 1;
        }
        s.taken.insert(slot);
        let len_ns = u64::try_from(len.as_nanos()).unwrap_or(u64::MAX);
        let at = s.epoch + Duration::from_nanos(slot.saturating_mul(len_ns));
        if let Some(group) = group {
            let spacing = match group {
                true => self.limits.per_group,
                false => self.limits.per_chat,
            };
            s.next.insert(chat.to_owned(), at + spacing);
        }
        s.forget_before(now, len);
        at
    }

    /// Takes the bot's current slot when it is free and neither the bot nor the chat
    /// is paused by flood control: for what is worth nothing late (typing). It never
    /// waits, never takes a later slot an answer could use, and neither waits for the
    /// chat's next message nor pushes it back.
    pub fn spare_slot(&self, chat: &str) -> bool {
        self.reserve_spare(chat, Instant::now()).is_some()
    }

    fn reserve_spare(&self, chat: &str, now: Instant) -> Option<Instant> {
        let mut s = self.lock();
        let paused = s.paused_until.is_some_and(|p| p > now)
            || s.chat_pause.get(chat).is_some_and(|p| *p > now);
        let slot = now.duration_since(s.epoch).as_nanos() / slot_len(&self.limits).as_nanos();
        let slot = u64::try_from(slot).unwrap_or(u64::MAX);
        if paused || s.taken.contains(&slot) {
            return None;
        }
        s.taken.insert(slot);
        Some(now)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        herald_session::conversation::lock(&self.state)
    }

    /// A 429 for `chat`: the chat waits `wait`; when three chats flood within a second
    /// the whole bot does (the global bucket).
    pub fn flooded(&self, chat: &str, wait: Duration) {
        self.floods
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let now = Instant::now();
        let until = now + wait;
        let mut s = self.lock();
        let later = |old: Option<Instant>| old.map_or(until, |o| o.max(until));
        let paused = later(s.chat_pause.get(chat).copied());
        s.chat_pause.insert(chat.to_owned(), paused);
        let next = later(s.next.get(chat).copied());
        s.next.insert(chat.to_owned(), next);
        s.floods
            .retain(|t| now.duration_since(*t) < Duration::from_secs(1));
        s.floods.push(now);
        if s.floods.len() >= 3 {
            s.paused_until = Some(later(s.paused_until));
        }
    }
}

/// A send counted as waiting for its slot until dropped (also when its task is
/// cancelled).
struct Waiting<'a> {
    governor: &'a Governor,
    chat: &'a str,
}

impl<'a> Waiting<'a> {
    fn new(governor: &'a Governor, chat: &'a str) -> Waiting<'a> {
        *herald_session::conversation::lock(&governor.waiting)
            .entry(chat.to_owned())
            .or_default() += 1;
        Waiting { governor, chat }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut waiting = herald_session::conversation::lock(&self.governor.waiting);
        if let Some(n) = waiting.get_mut(self.chat) {
            *n -= 1;
            if *n == 0 {
                waiting.remove(self.chat);
            }
        }
    }
}

impl State {
    /// Drops slots that have passed, and chats whose next turn has passed when there
    /// are many.
    fn forget_before(&mut self, now: Instant, len: Duration) {
        let passed = now.duration_since(self.epoch).as_nanos() / len.as_nanos();
        let passed = u64::try_from(passed).unwrap_or(u64::MAX);
        self.taken = self.taken.split_off(&passed);
        if self.next.len() > MAX_CHATS {
            self.next.retain(|_, n| *n > now);
        }
        if self.chat_pause.len() > 64 {
            self.chat_pause.retain(|_, p| *p > now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_chat_gets_a_message_a_second_and_a_group_one_in_three() {
        let g = Governor::default();
        let start = Instant::now();
        for _ in 0..3 {
            g.slot("1", false).await;
        }
        let took = start.elapsed();
        assert!(
            took >= Limits::TELEGRAM.per_chat * 2
                && took < Limits::TELEGRAM.per_chat * 2 + slot_len(&Limits::TELEGRAM) * 2,
            "{took:?}"
        );
        let start = Instant::now();
        for _ in 0..3 {
            g.slot("-5", true).await;
        }
        assert!(
            start.elapsed() >= Limits::TELEGRAM.per_group * 2,
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn sends_are_spread_evenly_and_in_the_order_they_asked() {
        let g = Governor::default();
        let now = Instant::now();
        // 100 chats ask at once: slots a 28th of a second apart, in order.
        let at: Vec<Instant> = (0..100)
            .map(|c| g.reserve(&c.to_string(), Some(false), now))
            .collect();
        for pair in at.windows(2) {
            assert_eq!(pair[1] - pair[0], slot_len(&Limits::TELEGRAM));
        }
        // No second holds more than the bot's rate.
        let in_first_second = at
            .iter()
            .filter(|t| **t < at[0] + Duration::from_secs(1))
            .count();
        assert!(
            in_first_second <= Limits::TELEGRAM.per_bot as usize,
            "{in_first_second}"
        );
        // Chat 0 asks again: the others asked first, so it goes after them.
        let again = g.reserve(&0.to_string(), Some(false), now);
        assert_eq!(again, at[99] + slot_len(&Limits::TELEGRAM));
        // A quiet bot: a chat's next send waits only its own spacing.
        let quiet = Governor::default();
        let first = quiet.reserve(&7.to_string(), Some(false), now);
        let second = quiet.reserve(&7.to_string(), Some(false), now);
        assert!(
            second >= first + Limits::TELEGRAM.per_chat
                && second < first + Limits::TELEGRAM.per_chat + slot_len(&Limits::TELEGRAM)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_sends_are_counted_per_chat_until_they_go() {
        let g = std::sync::Arc::new(Governor::default());
        g.slot("1", false).await;
        let tasks: Vec<_> = (0..3)
            .map(|_| {
                let g = g.clone();
                tokio::spawn(async move { g.slot("1", false).await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(g.queues(10), (3, vec![("1".to_owned(), 3)]));
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(g.queues(10), (0, vec![]));
        g.flooded("1", Duration::from_secs(1));
        assert_eq!(g.flood_count(), 1);
    }

    #[test]
    fn typing_takes_a_spare_slot_or_is_skipped() {
        let g = Governor::default();
        let now = Instant::now();
        // A chat that just got a message still gets typing (it is no message).
        g.reserve(&3.to_string(), Some(false), now);
        assert!(g.reserve_spare("3", now).is_some());
        // The bot's current slot is taken now: no spare slot.
        assert!(g.reserve_spare("4", now).is_none());
        // A chat paused by flood control gets none either.
        let h = Governor::default();
        h.flooded("5", Duration::from_secs(3));
        assert!(h.reserve_spare("5", Instant::now()).is_none());
        assert!(h.reserve_spare("6", Instant::now()).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_send_waiting_for_its_slot_waits_out_a_flood_that_came_meanwhile() {
        let g = std::sync::Arc::new(Governor::default());
        g.slot("1", false).await;
        let start = Instant::now();
        let waiting = {
            let g = g.clone();
            tokio::spawn(async move { g.slot("1", false).await })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        g.flooded("1", Duration::from_secs(5));
        // A shorter flood later does not shorten the pause.
        g.flooded("1", Duration::from_secs(1));
        waiting.await.unwrap();
        assert!(
            start.elapsed() >= Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_flood_pauses_its_chat() {
        let g = Governor::default();
        g.flooded("100", Duration::from_secs(7));
        let start = Instant::now();
        g.slot("100", false).await;
        assert!(start.elapsed() >= Duration::from_secs(7));
    }
}
