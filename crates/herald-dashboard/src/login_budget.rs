//! Failed logins counted per client address, as nginx's `limit_req` counts requests: an
//! address may fail [`FAILURES`] logins in a row, then one more each
//! [`WINDOW`]`/`[`FAILURES`] (ten a minute); past that its logins are answered at once
//! with the time to wait, without the key being looked at. Other addresses are not
//! slowed: nothing here is shared between clients but the table, and the table holds
//! at most [`MAX_CLIENTS`] addresses (the one nearest to its full budget again goes
//! first). IPv6 clients are counted by their /64, which one host usually owns whole.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Failed logins an address may make in a row.
pub(crate) const FAILURES: u32 = 10;
/// The time in which an address's budget fills again from empty.
pub(crate) const WINDOW: Duration = Duration::from_secs(60);
/// Addresses remembered at most.
pub(crate) const MAX_CLIENTS: usize = 4096;

/// One failure's share of the window.
const SPACING: Duration = Duration::from_secs(WINDOW.as_secs() / FAILURES as u64);

/// Who is counted: an IPv4 address, or an IPv6 /64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Client {
    V4([u8; 4]),
    V6Net([u8; 8]),
}

impl From<IpAddr> for Client {
    fn from(ip: IpAddr) -> Client {
        match ip {
            IpAddr::V4(v4) => Client::V4(v4.octets()),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Client::V4(v4.octets()),
                None => {
                    let mut net = [0u8; 8];
                    net.copy_from_slice(&v6.octets()[..8]);
                    Client::V6Net(net)
                }
            },
        }
    }
}

/// The failures of each address, as the time its budget is full again (the generic
/// cell rate algorithm's "theoretical arrival time"): each failure moves it a
/// [`SPACING`] further; an address is over budget when it lies more than the window
/// less one spacing ahead.
#[derive(Default)]
pub(crate) struct LoginBudget {
    full_again: Mutex<HashMap<Client, Instant>>,
    warned_full: AtomicBool,
}

impl LoginBudget {
    /// Takes one failure's room from `client`'s budget before its key is looked at
    /// (so that logins at once can not all pass before any is counted); a right key
    /// gives it back ([`LoginBudget::give_back`]). `Err` holds how long to wait when
    /// there is no room.
    pub(crate) fn take(&self, client: IpAddr, now: Instant) -> Result<(), Duration> {
        let Ok(mut table) = self.full_again.lock() else {
            return Ok(());
        };
        let client = Client::from(client);
        let from = table.get(&client).copied().filter(|t| *t > now);
        let ahead = from.map_or(Duration::ZERO, |t| t - now);
        let allowed = WINDOW - SPACING;
        if ahead > allowed {
            return Err(ahead - allowed);
        }
        if from.is_none() && table.len() >= MAX_CLIENTS {
            make_room(&mut table, now);
            if !self.warned_full.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    addresses = MAX_CLIENTS,
                    "dashboard: failed logins come from more addresses than are counted; the ones nearest to their full budget are forgotten"
                );
            }
        }
        table.insert(client, from.unwrap_or(now) + SPACING);
        Ok(())
    }

    /// Gives back the room a login took: its key was right.
    pub(crate) fn give_back(&self, client: IpAddr) {
        if let Ok(mut table) = self.full_again.lock()
            && let Some(t) = table.get_mut(&Client::from(client))
            && let Some(earlier) = t.checked_sub(SPACING)
        {
            *t = earlier;
        }
    }
}

/// Drops the addresses whose budget is full again, or else the one nearest to it.
fn make_room(table: &mut HashMap<Client, Instant>, now: Instant) {
    table.retain(|_, t| *t > now);
    if table.len() < MAX_CLIENTS {
        return;
    }
    if let Some(nearest) = table.iter().min_by_key(|(_, t)| **t).map(|(c, _)| *c) {
        table.remove(&nearest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn ten_failures_then_one_each_six_seconds() {
        let budget = LoginBudget::default();
        let (a, b) = (ip("10.0.0.1"), ip("10.0.0.2"));
        let t0 = Instant::now();
        for n in 0..FAILURES {
            assert_eq!(budget.take(a, t0), Ok(()), "failure {n}");
        }
        assert_eq!(budget.take(a, t0), Err(SPACING));
        assert_eq!(budget.take(b, t0), Ok(()), "another address is not slowed");
        assert_eq!(budget.take(a, t0 + SPACING), Ok(()));
        assert_eq!(budget.take(a, t0 + SPACING), Err(SPACING));
        assert_eq!(budget.take(a, t0 + WINDOW * 2), Ok(()));
    }

    #[test]
    fn a_right_key_gives_its_room_back() {
        let budget = LoginBudget::default();
        let a = ip("10.0.0.1");
        let t0 = Instant::now();
        for _ in 0..FAILURES * 3 {
            assert_eq!(budget.take(a, t0), Ok(()));
            budget.give_back(a);
        }
        for _ in 0..FAILURES - 1 {
            assert_eq!(budget.take(a, t0), Ok(()));
        }
        assert_eq!(budget.take(a, t0), Ok(()));
        assert!(budget.take(a, t0).is_err());
    }

    #[test]
    fn an_ipv6_client_is_counted_by_its_slash_64_and_mapped_ipv4_as_ipv4() {
        let budget = LoginBudget::default();
        let t0 = Instant::now();
        for n in 0..FAILURES {
            assert!(budget.take(ip(&format!("2001:db8:1:2::{n:x}")), t0).is_ok());
        }
        assert!(budget.take(ip("2001:db8:1:2::ffff"), t0).is_err());
        assert!(budget.take(ip("2001:db8:1:3::1"), t0).is_ok());
        for _ in 0..FAILURES {
            assert!(budget.take(ip("::ffff:10.1.1.1"), t0).is_ok());
        }
        assert!(budget.take(ip("10.1.1.1"), t0).is_err());
    }

    #[test]
    fn the_table_is_bounded() {
        let budget = LoginBudget::default();
        let t0 = Instant::now();
        for n in 0..(MAX_CLIENTS as u32 + 100) {
            let t = t0 + Duration::from_millis(u64::from(n));
            budget.take(IpAddr::from(n.to_be_bytes()), t).unwrap();
        }
        let table = budget.full_again.lock().unwrap();
        assert_eq!(table.len(), MAX_CLIENTS);
        assert!(
            !table.contains_key(&Client::V4(0u32.to_be_bytes())),
            "the oldest went first"
        );
    }
}
