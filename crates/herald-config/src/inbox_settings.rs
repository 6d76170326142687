//! `inbox:`, typed: how long finished inbox entries and delivery records are kept.

use crate::node::Node;
use crate::reader::Reader;
use std::time::Duration;

/// `inbox:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxSettings {
    pub retention: Retention,
    /// `inbox.dedup_memory_mb` (256): memory for the dedup keys of the last hour on
    /// SQLite; past it the oldest are looked up on disk.
    pub dedup_memory_bytes: usize,
}

/// `inbox.retention`: `None` keeps forever (`0` in the file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retention {
    /// `delivered_days` (30): delivered entries, and the records of sends that
    /// succeeded.
    pub delivered: Option<Duration>,
    /// `dead_days` (90): dead entries, and the records of sends that failed.
    pub dead: Option<Duration>,
}

const DAY: Duration = Duration::from_secs(86_400);

impl Default for InboxSettings {
    fn default() -> Self {
        InboxSettings {
            retention: Retention {
                delivered: Some(30 * DAY),
                dead: Some(90 * DAY),
            },
            dedup_memory_bytes: 256 << 20,
        }
    }
}

const KEYS: &[&str] = &["retention", "dedup_memory_mb"];
const RETENTION_KEYS: &[&str] = &["delivered_days", "dead_days"];

/// Reads `inbox:`; problems go to `r`.
pub fn read_inbox_settings(r: &mut Reader, doc: &Node) -> InboxSettings {
    let mut out = InboxSettings::default();
    let Some(block) = doc.get("inbox").filter(|n| !n.is_null()) else {
        return out;
    };
    r.check_keys(block, "inbox", KEYS);
    if let Some(n) = block.get("dedup_memory_mb").filter(|n| !n.is_null())
        && let Some(mb) = r.int(n, "inbox.dedup_memory_mb", 1, 65_536)
    {
        out.dedup_memory_bytes = usize::try_from(mb).unwrap_or(256) << 20;
    }
    let Some(retention) = block.get("retention").filter(|n| !n.is_null()) else {
        return out;
    };
    r.check_keys(retention, "inbox.retention", RETENTION_KEYS);
    let days = |r: &mut Reader, key: &str, kept: Option<Duration>| {
        let Some(n) = retention.get(key).filter(|n| !n.is_null()) else {
            return kept;
        };
        match r.int(n, &format!("inbox.retention.{key}"), 0, 36_500) {
            Some(0) => None,
            Some(d) => Some(DAY * u32::try_from(d).unwrap_or(1)),
            None => kept,
        }
    };
    out.retention.delivered = days(r, "delivered_days", out.retention.delivered);
    out.retention.dead = days(r, "dead_days", out.retention.dead);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(yaml: &str) -> (InboxSettings, usize) {
        let doc = Node::parse_yaml(yaml).expect("yaml");
        let mut r = Reader::new(std::path::Path::new("config.yaml"));
        let s = read_inbox_settings(&mut r, &doc);
        (s, r.errors.len() + r.warnings.len())
    }

    #[test]
    fn thirty_and_ninety_days_unless_set_and_zero_keeps_forever() {
        assert_eq!(read("model: x\n").0, InboxSettings::default());
        let (s, problems) = read("inbox:\n  retention:\n    delivered_days: 7\n    dead_days: 0\n");
        assert_eq!(problems, 0);
        assert_eq!(s.retention.delivered, Some(7 * DAY));
        assert_eq!(s.retention.dead, None);
        let (s, problems) = read("inbox:\n  retention:\n    delivered_days: -1\n    dead: 3\n");
        assert_eq!(problems, 2);
        assert_eq!(
            s.retention.delivered,
            Some(30 * DAY),
            "a bad value keeps the default"
        );
        let (s, problems) = read("inbox:\n  dedup_memory_mb: 16\n");
        assert_eq!((s.dedup_memory_bytes, problems), (16 << 20, 0));
    }
}
