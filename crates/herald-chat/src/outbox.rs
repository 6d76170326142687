//! Everything sent to a chat goes through here: one governor per bot applies
//! Telegram's limits once (about a message a second per chat, twenty a minute per
//! group, thirty a second per bot), and a 429's `retry_after` pauses the chat it came
//! from.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// Spacing of messages to one private chat.
const PER_CHAT: Duration = Duration::from_secs(1);
/// Spacing of messages to one group (20 a minute).
const PER_GROUP: Duration = Duration::from_secs(3);
/// Messages a bot sends in any second.
const PER_BOT: usize = 30;

/// Telegram's limits for one bot, applied to every send.
#[derive(Default)]
pub struct Governor {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The earliest next send per chat.
    next: HashMap<i64, Instant>,
    /// When the last [`PER_BOT`] sends left.
    recent: VecDeque<Instant>,
    /// A bot-wide pause (several chats flooded at once).
    paused_until: Option<Instant>,
    /// Flood answers in the last second, to see a bot-wide limit.
    floods: VecDeque<Instant>,
}

impl Governor {
    /// Waits for this chat's next slot and takes it.
    pub async fn slot(&self, chat: i64, group: bool) {
        loop {
            let wait = self.take(chat, group, Instant::now());
            match wait {
                None => return,
                Some(at) => tokio::time::sleep_until(at).await,
            }
        }
    }

    /// Takes the slot when it is free now; else when to look again.
    fn take(&self, chat: i64, group: bool, now: Instant) -> Option<Instant> {
        let mut s = match self.state.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        while s
            .recent
            .front()
            .is_some_and(|t| now.duration_since(*t) >= Duration::from_secs(1))
        {
            s.recent.pop_front();
        }
        let mut ready = now;
        if let Some(p) = s.paused_until.filter(|p| *p > now) {
            ready = ready.max(p);
        }
        if let Some(n) = s.next.get(&chat).filter(|n| **n > now) {
            ready = ready.max(*n);
        }
        if s.recent.len() >= PER_BOT
            && let Some(first) = s.recent.front()
        {
            ready = ready.max(*first + Duration::from_secs(1));
        }
        if ready > now {
            return Some(ready);
        }
        let spacing = if group { PER_GROUP } else { PER_CHAT };
        s.next.insert(chat, now + spacing);
        s.recent.push_back(now);
        if s.next.len() > 10_000 {
            s.next.retain(|_, n| *n > now);
        }
        None
    }

    /// A 429 for `chat`: the chat waits `wait`; when three chats flood within a second
    /// the whole bot does (the global bucket).
    pub fn flooded(&self, chat: i64, wait: Duration) {
        let now = Instant::now();
        let mut s = match self.state.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        s.next.insert(chat, now + wait);
        while s
            .floods
            .front()
            .is_some_and(|t| now.duration_since(*t) >= Duration::from_secs(1))
        {
            s.floods.pop_front();
        }
        s.floods.push_back(now);
        if s.floods.len() >= 3 {
            s.paused_until = Some(now + wait);
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
            g.slot(1, false).await;
        }
        assert_eq!(start.elapsed(), Duration::from_secs(2));
        let start = Instant::now();
        for _ in 0..3 {
            g.slot(-5, true).await;
        }
        assert_eq!(start.elapsed(), Duration::from_secs(6));
    }

    #[tokio::test(start_paused = true)]
    async fn the_bot_sends_thirty_a_second_and_a_flood_pauses_its_chat() {
        let g = Governor::default();
        let start = Instant::now();
        for chat in 0..31 {
            g.slot(chat, false).await;
        }
        assert_eq!(start.elapsed(), Duration::from_secs(1));
        g.flooded(100, Duration::from_secs(7));
        let start = Instant::now();
        g.slot(100, false).await;
        assert_eq!(start.elapsed(), Duration::from_secs(7));
    }
}
