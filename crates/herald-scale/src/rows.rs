//! Rows of the PostgreSQL inbox as the store's types, and text made fit for `TEXT`
//! columns.

use herald_store::events::EventSummary;
use herald_store::inbox::{StoredPayload, json};
use herald_store::{Attempt, Delivery, InboxItem};
use std::borrow::Cow;
use tokio_postgres::Row;

/// The inbox columns every read selects, in [`item`]'s order, each prefixed by
/// `alias` (`"i."`, or `""`).
pub(crate) fn item_columns(alias: &str) -> String {
    [
        "id",
        "route",
        "event_type",
        "delivery_id",
        "state",
        "attempts",
        "received_at_ms",
        "updated_at_ms",
        "profile",
        "headers",
        "payload",
        "payload_packed",
        "prompt",
        "deliver",
        "deliver_extra",
        "skills",
        "toolsets",
        "last_error",
        "answer",
        "next_attempt_at_ms",
        "failures",
        "failing_since_ms",
        "delivery_attempts",
    ]
    .map(|c| format!("{alias}{c}"))
    .join(", ")
}

/// An event summary, from the columns `events` selects in this order.
pub(crate) fn summary(r: &Row) -> Result<EventSummary, tokio_postgres::Error> {
    Ok(EventSummary {
        id: r.try_get(0)?,
        route: r.try_get(1)?,
        event_type: r.try_get(2)?,
        delivery_id: r.try_get(3)?,
        state: r.try_get(4)?,
        attempts: r.try_get(5)?,
        received_at_ms: r.try_get(6)?,
        updated_at_ms: r.try_get(7)?,
        prompt: r.try_get(8)?,
        last_error: r.try_get(9)?,
    })
}

pub(crate) fn item(r: &Row) -> Result<InboxItem, tokio_postgres::Error> {
    let bytes: &[u8] = r.try_get(10)?;
    let packed: bool = r.try_get(11)?;
    let payload = if packed {
        herald_store::payload::unpack_text(bytes)
    } else {
        String::from_utf8_lossy(bytes).into_owned()
    };
    Ok(InboxItem {
        id: r.try_get(0)?,
        route: r.try_get(1)?,
        event_type: r.try_get(2)?,
        delivery_id: r.try_get(3)?,
        state: r.try_get(4)?,
        attempts: r.try_get(5)?,
        received_at_ms: r.try_get(6)?,
        updated_at_ms: r.try_get(7)?,
        profile: r.try_get(8)?,
        headers: json(r.try_get(9)?),
        payload: StoredPayload::new(payload),
        prompt: r.try_get(12)?,
        deliver: r.try_get(13)?,
        deliver_extra: json(r.try_get(14)?),
        skills: json(r.try_get(15)?),
        toolsets: r.try_get::<_, Option<String>>(16)?.map(json),
        last_error: r.try_get(17)?,
        answer: r.try_get(18)?,
        next_attempt_at_ms: r.try_get(19)?,
        failures: r.try_get(20)?,
        failing_since_ms: r.try_get(21)?,
        delivery_attempts: r.try_get(22)?,
    })
}

pub(crate) const DELIVERY_COLUMNS: &str = "id, kind, route, delivery_id, target, status, attempts, latency_ms, error, message, created_at_ms";

pub(crate) fn delivery(r: &Row) -> Result<Delivery, tokio_postgres::Error> {
    Ok(Delivery {
        id: r.try_get(0)?,
        kind: r.try_get(1)?,
        route: r.try_get(2)?,
        delivery_id: r.try_get(3)?,
        target: r.try_get(4)?,
        status: r.try_get(5)?,
        attempts: r.try_get(6)?,
        latency_ms: r.try_get(7)?,
        error: r.try_get(8)?,
        message: r.try_get(9)?,
        created_at_ms: r.try_get(10)?,
    })
}

pub(crate) fn attempt(r: &Row) -> Result<Attempt, tokio_postgres::Error> {
    Ok(Attempt {
        stage: r.try_get(0)?,
        started_at_ms: r.try_get(1)?,
        finished_at_ms: r.try_get(2)?,
        outcome: r.try_get(3)?,
        error: r.try_get(4)?,
    })
}

/// Text for a `TEXT` column: PostgreSQL refuses NUL characters, which a rendered
/// prompt can hold (a JSON `"\u0000"`); each becomes U+FFFD. Payloads are bytes and
/// keep theirs.
pub(crate) fn text(s: &str) -> Cow<'_, str> {
    if s.contains('\0') {
        Cow::Owned(s.replace('\0', "\u{FFFD}"))
    } else {
        Cow::Borrowed(s)
    }
}

pub(crate) fn opt_text(s: &Option<String>) -> Option<Cow<'_, str>> {
    s.as_deref().map(text)
}
