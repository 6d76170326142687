//! Reading a request body within the port's bounds (its size limit, the body timeout and
//! room in the budget of body bytes in flight) and parsing it as a JSON object.

use crate::Api;
use crate::errors::ApiError;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, header};
use herald_http::body::BodyError;
use herald_http::body_budget::{Reservation, parse_cost};
use serde_json::{Map, Value};
use std::time::Duration;

/// A body read within the port's bounds, holding its room in the body budget (its
/// bytes and what parsing it costs) until the request is answered.
pub struct Admitted<'a> {
    pub bytes: Bytes,
    _room: Reservation<'a>,
}

/// Reads the body: room for its declared length (the limit when it has none) is
/// reserved first, then it is read within the limit and the body timeout, then room for
/// its parse is added. No room within a short wait is a 503 with `Retry-After`.
pub async fn admit<'a>(
    api: &'a Api,
    headers: &HeaderMap,
    body: Body,
) -> Result<Admitted<'a>, ApiError> {
    let limit = api.settings.max_body_bytes;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok())
        .filter(|n| *n <= limit);
    let mut room = api
        .budget
        .reserve(declared.unwrap_or(limit))
        .await
        .ok_or_else(ApiError::busy)?;
    let timeout = Duration::from_secs(api.settings.connections.body_timeout_secs);
    let bytes = read(body, limit, timeout).await?;
    if !api.budget.grow(&mut room, parse_cost(&bytes)).await {
        return Err(ApiError::busy());
    }
    Ok(Admitted { bytes, _room: room })
}

/// The body, at most `limit` bytes (a chunked body that overflows gets 413 too),
/// received within `timeout` (408 otherwise).
async fn read(body: Body, limit: u64, timeout: Duration) -> Result<Bytes, ApiError> {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    herald_http::body::read(body, limit, timeout)
        .await
        .map_err(|e| match e {
            BodyError::TooLarge(_) => ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("Request body too large (max {limit} bytes)"),
                Some("body_too_large"),
            ),
            BodyError::TimedOut(t) => ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                format!("Request body not received within {} s", t.as_secs()),
                Some("body_timeout"),
            ),
            BodyError::Broken(_) => ApiError::bad_request("Could not read the request body", None),
        })
}

/// Refuses a body whose top-level `param` array (`messages`, `input`) has more than
/// `max` entries. The entries are counted in one pass over the bytes that builds
/// nothing, before the body is parsed into values; a body that is not a JSON object is
/// left to the parse that follows.
pub fn at_most(bytes: &[u8], param: &'static str, max: usize) -> Result<(), ApiError> {
    let counted = serde_json::from_slice::<Counted>(bytes).ok();
    match counted.and_then(|c| c.0.into_iter().find(|(k, _)| *k == param)) {
        Some((_, n)) if n > max => Err(ApiError::bad_request(
            format!("Too many entries in '{param}' ({n}; at most {max})"),
            None,
        )
        .at(param)),
        _ => Ok(()),
    }
}

/// The lengths of a JSON object's top-level arrays named in [`COUNTED`].
struct Counted(Vec<(&'static str, usize)>);

/// The arrays whose entries are counted.
const COUNTED: &[&str] = &["messages", "input", "conversation_history"];

impl<'de> serde::Deserialize<'de> for Counted {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(CountedVisitor)
    }
}

struct CountedVisitor;

impl<'de> serde::de::Visitor<'de> for CountedVisitor {
    type Value = Counted;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Counted, A::Error> {
        let mut out = Vec::new();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match COUNTED.iter().find(|c| **c == key) {
                Some(name) => out.push((*name, map.next_value::<Entries>()?.0)),
                None => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(Counted(out))
    }
}

/// How many entries an array has (0 for anything else), built from nothing.
struct Entries(usize);

impl<'de> serde::Deserialize<'de> for Entries {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(EntriesVisitor)
    }
}

struct EntriesVisitor;

impl<'de> serde::de::Visitor<'de> for EntriesVisitor {
    type Value = Entries;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Entries, A::Error> {
        let mut n = 0;
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
            n += 1;
        }
        Ok(Entries(n))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Entries, A::Error> {
        serde::de::IgnoredAny.visit_map(map).map(|_| Entries(0))
    }

    fn visit_bool<E>(self, _: bool) -> Result<Entries, E> {
        Ok(Entries(0))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Entries, E> {
        Ok(Entries(0))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Entries, E> {
        Ok(Entries(0))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Entries, E> {
        Ok(Entries(0))
    }
    fn visit_str<E>(self, _: &str) -> Result<Entries, E> {
        Ok(Entries(0))
    }
    fn visit_unit<E>(self) -> Result<Entries, E> {
        Ok(Entries(0))
    }
}

/// The body as a JSON object; `invalid` is the 400's message otherwise.
pub fn object(bytes: &[u8], invalid: ApiError) -> Result<Map<String, Value>, ApiError> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::bad_request(
            "Request body must be a JSON object",
            None,
        )),
        Err(_) => Err(invalid),
    }
}

/// `stream`-style booleans: JSON booleans and 1/true/yes/on (any case); else false.
pub fn truthy(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => matches!(
            s.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        ),
        Some(Value::Number(n)) => n.as_i64() == Some(1),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn booleans() {
        for (v, want) in [
            (json!(true), true),
            (json!("YES"), true),
            (json!("off"), false),
            (json!("maybe"), false),
            (json!(null), false),
        ] {
            assert_eq!(truthy(Some(&v)), want, "{v}");
        }
    }

    #[test]
    fn top_level_arrays_are_counted_without_being_built() {
        let body = br#"{"model": "m", "messages": [{"a": [1, 2]}, 2, "x"], "input": "text", "conversation_history": {"k": []}}"#;
        assert!(at_most(body, "messages", 3).is_ok());
        let refused = at_most(body, "messages", 2).unwrap_err();
        assert_eq!(refused.param.as_deref(), Some("messages"));
        assert!(at_most(body, "input", 0).is_ok(), "a string is no array");
        assert!(at_most(body, "conversation_history", 0).is_ok());
        assert!(
            at_most(b"{not json", "messages", 0).is_ok(),
            "left to the parse"
        );
        assert!(at_most(b"[1,2,3]", "messages", 0).is_ok());
    }
}
