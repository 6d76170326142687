//! When a job fires, as Hermes's `cron/jobs.py` says it: a schedule is a one-shot time,
//! an interval in minutes or a five-field cron expression (in the job's timezone), written
//! as Hermes accepts it (`30m`, `every 2h`, `0 9 * * *`, `2026-02-03T14:00`). A tick
//! missed while nothing ran is caught up once when it is at most the grace late (half
//! the period, between 2 minutes and 2 hours), else skipped to the next one; a job's
//! `catch_up` says `always` or `skip` instead. Never a burst.

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};
use std::str::FromStr;

/// A job's schedule, as Hermes stores it in `jobs.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Schedule {
    Once {
        run_at: String,
        #[serde(default)]
        display: String,
    },
    Interval {
        minutes: u64,
        #[serde(default)]
        display: String,
    },
    Cron {
        expr: String,
        #[serde(default)]
        display: String,
    },
}

/// What a job does about ticks missed while nothing ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CatchUp {
    /// Hermes's rule: once when at most the grace late, else skip.
    #[default]
    Grace,
    /// Once, however late.
    Always,
    /// Never: only a tick that is on time (within a minute) fires.
    Skip,
}

/// The longest interval or relative time accepted, in minutes (ten years).
pub const MAX_MINUTES: u64 = 5_256_000;

/// `minutes` as a duration, when it is one herald accepts.
fn minutes(minutes: u64) -> Option<SignedDuration> {
    (minutes > 0 && minutes <= MAX_MINUTES).then(|| SignedDuration::from_secs(minutes as i64 * 60))
}

/// Hermes's grace bounds, in seconds.
const MIN_GRACE: i64 = 120;
const MAX_GRACE: i64 = 7_200;
/// How late a tick may fire and still be on time (the scheduler looks every second).
const ON_TIME: i64 = 60;

/// `30m`, `2h`, `1d` (and Hermes's longer unit names) in minutes.
pub fn parse_duration(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    let digits: String = t.chars().take_while(char::is_ascii_digit).collect();
    let unit = t[digits.len()..].trim();
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("Invalid duration: '{t}'. Use format like '30m', '2h', or '1d'"))?;
    let per = match unit {
        "m" | "min" | "mins" | "minute" | "minutes" => 1,
        "h" | "hr" | "hrs" | "hour" | "hours" => 60,
        "d" | "day" | "days" => 1_440,
        _ => {
            return Err(format!(
                "Invalid duration: '{t}'. Use format like '30m', '2h', or '1d'"
            ));
        }
    };
    n.checked_mul(per)
        .filter(|m| *m > 0 && *m <= MAX_MINUTES)
        .ok_or_else(|| format!("Invalid duration: '{t}' (at most ten years)"))
}

/// Parses a schedule as Hermes's `parse_schedule` does, `now` anchoring a relative
/// one-shot and `tz` a time without an offset.
pub fn parse(text: &str, now: Timestamp, tz: &TimeZone) -> Result<Schedule, String> {
    let text = text.trim();
    if let Some(rest) = text
        .get(..6)
        .filter(|p| p.eq_ignore_ascii_case("every "))
        .and_then(|_| text.get(6..))
    {
        let minutes = parse_duration(rest)?;
        return Ok(Schedule::Interval {
            minutes,
            display: format!("every {minutes}m"),
        });
    }
    let fields: Vec<&str> = text.split_whitespace().collect();
    if fields.len() == 5
        && fields
            .iter()
            .all(|f| f.chars().all(|c| c.is_ascii_digit() || "*-,/".contains(c)))
    {
        cron(text)?;
        return Ok(Schedule::Cron {
            expr: text.to_owned(),
            display: text.to_owned(),
        });
    }
    if text.contains('T') || looks_like_date(text) {
        let at = instant(text, tz)?;
        return Ok(Schedule::Once {
            run_at: iso(at, tz),
            display: format!(
                "once at {}",
                at.to_zoned(tz.clone()).strftime("%Y-%m-%d %H:%M")
            ),
        });
    }
    if let Ok(m) = parse_duration(text) {
        let at = minutes(m)
            .and_then(|d| now.checked_add(d).ok())
            .ok_or_else(|| format!("Invalid duration: '{text}'"))?;
        return Ok(Schedule::Once {
            run_at: iso(at, tz),
            display: format!("once in {text}"),
        });
    }
    Err(format!(
        "Invalid schedule '{text}'. Use:\n  - Duration: '30m', '2h', '1d' (one-shot)\n  - Interval: 'every 30m', 'every 2h' (recurring)\n  - Cron: '0 9 * * *' (cron expression)\n  - Timestamp: '2026-02-03T14:00:00' (one-shot at time)"
    ))
}

fn looks_like_date(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() >= 10
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[5..7].iter().all(u8::is_ascii_digit)
        && b[7] == b'-'
}

fn cron(expr: &str) -> Result<croner::Cron, String> {
    croner::Cron::from_str(expr).map_err(|e| format!("Invalid cron expression '{expr}': {e}"))
}

/// An ISO time: with an offset as it says, without one in `tz`.
pub fn instant(text: &str, tz: &TimeZone) -> Result<Timestamp, String> {
    let text = text.trim().replace('Z', "+00:00");
    if let Ok(at) = text.parse::<Timestamp>() {
        return Ok(at);
    }
    let civil: jiff::civil::DateTime = text
        .parse()
        .map_err(|e| format!("Invalid timestamp '{text}': {e}"))?;
    tz.to_ambiguous_zoned(civil)
        .compatible()
        .map(|z| z.timestamp())
        .map_err(|e| format!("Invalid timestamp '{text}': {e}"))
}

/// `at` as Hermes writes times: ISO 8601 with the zone's offset.
pub fn iso(at: Timestamp, tz: &TimeZone) -> String {
    at.to_zoned(tz.clone())
        .strftime("%Y-%m-%dT%H:%M:%S%:z")
        .to_string()
}

impl Schedule {
    /// The first tick strictly after `after` (`None`: a one-shot's is not after it).
    pub fn next_after(&self, after: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        match self {
            Schedule::Once { run_at, .. } => instant(run_at, tz).ok().filter(|at| *at > after),
            Schedule::Interval { minutes: m, .. } => {
                minutes(*m).and_then(|d| after.checked_add(d).ok())
            }
            Schedule::Cron { expr, .. } => next_cron(expr, after, tz),
        }
    }

    /// The seconds a missed tick may be late and still fire (Hermes's grace).
    pub fn grace(&self, tz: &TimeZone) -> i64 {
        let period = match self {
            Schedule::Once { .. } => return MIN_GRACE,
            Schedule::Interval { minutes, .. } => i64::try_from(*minutes)
                .unwrap_or(i64::MAX)
                .saturating_mul(60),
            Schedule::Cron { expr, .. } => {
                let now = Timestamp::now();
                let first = next_cron(expr, now, tz);
                let second = first.and_then(|f| next_cron(expr, f, tz));
                match (first, second) {
                    (Some(a), Some(b)) => (b - a).get_seconds(),
                    _ => return MIN_GRACE,
                }
            }
        };
        (period / 2).clamp(MIN_GRACE, MAX_GRACE)
    }

    /// What the text of the schedule shows.
    pub fn display(&self) -> &str {
        match self {
            Schedule::Once { display, .. }
            | Schedule::Interval { display, .. }
            | Schedule::Cron { display, .. } => display,
        }
    }
}

/// The next matching minute of `expr` after `after`, in `tz`'s wall clock.
fn next_cron(expr: &str, after: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
    let cron = cron(expr).ok()?;
    let mut from = after.to_zoned(tz.clone()).datetime();
    // A wall-clock time a clock change repeats can come out at or before `after`.
    for _ in 0..4 {
        let naive = chrono::NaiveDate::from_ymd_opt(
            i32::from(from.year()),
            from.month() as u32,
            from.day() as u32,
        )?
        .and_hms_opt(
            from.hour() as u32,
            from.minute() as u32,
            from.second() as u32,
        )?;
        let wall = chrono::DateTime::<chrono::Utc>::from_naive_utc_and_offset(naive, chrono::Utc);
        let next = cron.find_next_occurrence(&wall, false).ok()?.naive_utc();
        let civil = jiff::civil::DateTime::new(
            i16::try_from(chrono::Datelike::year(&next)).ok()?,
            i8::try_from(chrono::Datelike::month(&next)).ok()?,
            i8::try_from(chrono::Datelike::day(&next)).ok()?,
            i8::try_from(chrono::Timelike::hour(&next)).ok()?,
            i8::try_from(chrono::Timelike::minute(&next)).ok()?,
            0,
            0,
        )
        .ok()?;
        let at = tz.to_ambiguous_zoned(civil).compatible().ok()?.timestamp();
        if at > after {
            return Some(at);
        }
        from = civil;
    }
    None
}

/// What the scheduler does with a job whose next tick is `next` at `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// Not yet.
    Wait,
    /// Fire the tick `next`.
    Fire,
    /// It was missed past the job's rule: skip it.
    Skip,
}

/// Whether the tick `next` fires now.
pub fn due(next: Timestamp, now: Timestamp, grace: i64, catch_up: CatchUp) -> Due {
    if next > now {
        return Due::Wait;
    }
    let late = (now - next).get_seconds();
    let allowed = match catch_up {
        CatchUp::Grace => grace,
        CatchUp::Always => i64::MAX,
        CatchUp::Skip => ON_TIME,
    };
    if late <= allowed {
        Due::Fire
    } else {
        Due::Skip
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc() -> TimeZone {
        TimeZone::UTC
    }

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn schedules_parse_as_hermes_writes_them() {
        let now = at("2026-12-07T10:00:00Z");
        let tz = utc();
        assert_eq!(
            parse("every 2h", now, &tz).unwrap(),
            Schedule::Interval {
                minutes: 120,
                display: "every 120m".into()
            }
        );
        assert!(matches!(
            parse("0 9 * * *", now, &tz).unwrap(),
            Schedule::Cron { .. }
        ));
        match parse("30m", now, &tz).unwrap() {
            Schedule::Once { run_at, display } => {
                assert_eq!(run_at, "2026-12-07T10:30:00+00:00");
                assert_eq!(display, "once in 30m");
            }
            other => panic!("{other:?}"),
        }
        let paris = TimeZone::get("Europe/Paris").unwrap();
        match parse("2026-12-24T18:00", now, &paris).unwrap() {
            Schedule::Once { run_at, .. } => assert_eq!(run_at, "2026-12-24T18:00:00+01:00"),
            other => panic!("{other:?}"),
        }
        for bad in [
            "every 0m",
            "soon",
            "61 * * * *",
            "5x",
            "",
            "5分後",
            "every 153722867280912931m",
            "153722867280912931m",
            "every 9999999999999999999999m",
        ] {
            assert!(parse(bad, now, &tz).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_interval_no_clock_can_hold_has_no_next_tick() {
        let huge = Schedule::Interval {
            minutes: u64::MAX,
            display: String::new(),
        };
        assert_eq!(huge.next_after(at("2026-12-07T10:00:00Z"), &utc()), None);
        assert_eq!(huge.grace(&utc()), 7_200);
    }

    #[test]
    fn cron_ticks_follow_the_wall_clock_of_the_zone() {
        let paris = TimeZone::get("Europe/Paris").unwrap();
        let cron = Schedule::Cron {
            expr: "0 9 * * *".into(),
            display: String::new(),
        };
        // 09:00 in Paris is 08:00 UTC in winter, 07:00 in summer.
        assert_eq!(
            cron.next_after(at("2026-12-07T10:00:00Z"), &paris),
            Some(at("2026-12-08T08:00:00Z"))
        );
        assert_eq!(
            cron.next_after(at("2026-07-01T00:00:00Z"), &paris),
            Some(at("2026-07-01T07:00:00Z"))
        );
        let every = Schedule::Cron {
            expr: "*/15 * * * *".into(),
            display: String::new(),
        };
        assert_eq!(
            every.next_after(at("2026-12-07T10:15:00Z"), &utc()),
            Some(at("2026-12-07T10:30:00Z"))
        );
    }

    #[test]
    fn grace_is_half_the_period_between_two_minutes_and_two_hours() {
        let tz = utc();
        let daily = Schedule::Cron {
            expr: "0 9 * * *".into(),
            display: String::new(),
        };
        assert_eq!(daily.grace(&tz), 7_200);
        let hourly = Schedule::Interval {
            minutes: 60,
            display: String::new(),
        };
        assert_eq!(hourly.grace(&tz), 1_800);
        let often = Schedule::Interval {
            minutes: 1,
            display: String::new(),
        };
        assert_eq!(often.grace(&tz), 120);
        let next = at("2026-12-07T09:00:00Z");
        assert_eq!(
            due(next, at("2026-12-07T08:59:59Z"), 7_200, CatchUp::Grace),
            Due::Wait
        );
        assert_eq!(
            due(next, at("2026-12-07T10:59:00Z"), 7_200, CatchUp::Grace),
            Due::Fire
        );
        assert_eq!(
            due(next, at("2026-12-07T11:01:00Z"), 7_200, CatchUp::Grace),
            Due::Skip
        );
        assert_eq!(
            due(next, at("2026-12-09T11:01:00Z"), 7_200, CatchUp::Always),
            Due::Fire
        );
        assert_eq!(
            due(next, at("2026-12-07T09:02:00Z"), 7_200, CatchUp::Skip),
            Due::Skip
        );
    }
}
