//! Turning a verified request into an event: body parsing (spec §6), event type
//! (spec §7) and delivery id (spec §11.1).

use crate::json_text::{self, JsonRead};
use http::HeaderMap;
use serde_json::{Map, Value};

/// The body could not become a payload (answered 400 `Cannot parse body`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("body is JSON but its top-level value is not an object")]
    NotAnObject,
    #[error("body is not valid JSON although the content type says JSON")]
    InvalidJson,
    #[error("body is neither JSON nor UTF-8 form data")]
    NotUtf8,
    #[error(
        "body is JSON nested deeper than {} levels",
        crate::json_text::MAX_DEPTH
    )]
    TooDeep,
}

/// How a body became a payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// The body is a JSON object: it can be stored as received.
    Json,
    /// Form-encoded (or plain text giving `{}`): the payload must be serialised.
    Form,
    /// JSON whose text had to be changed to be parsed (a byte-order mark, a lone
    /// surrogate): the payload must be serialised.
    RewrittenJson,
}

/// Parses a body into a payload object: JSON first, then the form-encoded fallback.
pub fn parse_body(
    body: &[u8],
    content_type: Option<&[u8]>,
) -> Result<Map<String, Value>, ParseError> {
    parse_body_kind(body, content_type).map(|(map, _)| map)
}

/// [`parse_body`], also saying whether the body was JSON.
pub fn parse_body_kind(
    body: &[u8],
    content_type: Option<&[u8]>,
) -> Result<(Map<String, Value>, BodyKind), ParseError> {
    match json_text::read(body) {
        JsonRead::Object {
            map,
            rewritten: false,
        } => return Ok((map, BodyKind::Json)),
        JsonRead::Object {
            map,
            rewritten: true,
        } => return Ok((map, BodyKind::RewrittenJson)),
        JsonRead::NotObject => return Err(ParseError::NotAnObject),
        JsonRead::TooDeep => return Err(ParseError::TooDeep),
        JsonRead::NotJson => {}
    }
    if content_type.is_some_and(is_json_media_type) {
        return Err(ParseError::InvalidJson);
    }
    let text = std::str::from_utf8(body).map_err(|_| ParseError::NotUtf8)?;
    let mut map = Map::new();
    for (name, value) in form_urlencoded::parse(text.as_bytes()) {
        if value.is_empty() {
            continue;
        }
        map.insert(name.into_owned(), Value::String(value.into_owned()));
    }
    Ok((form_payload_field(map), BodyKind::Form))
}

/// GitHub's `application/x-www-form-urlencoded` content type sends `payload=<json>`:
/// when that is the only field and it holds a JSON object, the object is the payload
/// (spec §6 rule 7).
fn form_payload_field(map: Map<String, Value>) -> Map<String, Value> {
    if map.len() == 1
        && let Some(Value::String(text)) = map.get("payload")
        && let JsonRead::Object { map: inner, .. } = json_text::read(text.as_bytes())
    {
        return inner;
    }
    map
}

/// Checks that a body would parse (the same answer as [`parse_body`]) without building
/// the payload: the fast path for requests whose event type the headers already rule
/// out. Bodies with `\u` escapes take the full parse, so the answer is always exact.
pub fn validate_body(body: &[u8], content_type: Option<&[u8]>) -> Result<(), ParseError> {
    // Skipping a value has no nesting limit, the full parse has one (128): bodies that
    // could nest that deep take the full parse too.
    let plain = crate::pick::plain_json_text(body) && !json_text::has_bom(body);
    if !plain && std::str::from_utf8(body).is_ok() {
        return parse_body(body, content_type).map(|_| ());
    }
    if plain && serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok() {
        let first = body
            .iter()
            .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
        return if first == Some(&b'{') {
            Ok(())
        } else {
            Err(ParseError::NotAnObject)
        };
    }
    if content_type.is_some_and(is_json_media_type) {
        return Err(ParseError::InvalidJson);
    }
    // Form data: any UTF-8 text is a (possibly empty) payload.
    std::str::from_utf8(body)
        .map(|_| ())
        .map_err(|_| ParseError::NotUtf8)
}

/// The event type when a header names it (spec §7.1 rules 1–3), without the payload.
pub fn header_event_type(headers: &HeaderMap) -> Option<&[u8]> {
    EVENT_HEADERS.iter().find_map(|name| {
        headers
            .get(*name)
            .filter(|v| !v.is_empty())
            .map(|v| v.as_bytes())
    })
}

/// `application/json` or any `+json` media type, parameters ignored.
fn is_json_media_type(content_type: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(content_type) else {
        return false;
    };
    let media = text
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    media == "application/json" || media.ends_with("+json")
}

/// Header names that can carry the event type, in order of preference.
pub const EVENT_HEADERS: [&str; 3] = ["x-github-event", "x-gitlab-event", "webhook-event-type"];

/// Resolves the event type: headers, then payload `event_type`, `type`, else `unknown`.
pub fn event_type(headers: &HeaderMap, payload: &Map<String, Value>) -> Value {
    for name in EVENT_HEADERS {
        if let Some(v) = headers.get(name).filter(|v| !v.is_empty()) {
            return Value::String(String::from_utf8_lossy(v.as_bytes()).into_owned());
        }
    }
    for key in ["event_type", "type"] {
        if let Some(v) = payload.get(key).filter(|v| !is_empty_value(v)) {
            return v.clone();
        }
    }
    Value::String("unknown".to_owned())
}

/// Python's "first non-empty value": `None`, `""`, `0`, `false`, `[]` and `{}` are empty.
fn is_empty_value(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Number(n) => n.as_f64().is_some_and(|f| f == 0.0),
    }
}

/// Whether an event type is admitted by a route's `events` list (empty admits all).
pub fn event_allowed(events: &[String], event_type: &Value) -> bool {
    if events.is_empty() {
        return true;
    }
    let text = match event_type {
        Value::String(s) => s.clone(),
        other => crate::pyjson::text_form(other),
    };
    events.contains(&text)
}

/// [`event_allowed`], and for GitLab (an `X-Gitlab-Event` header) an entry equal to the
/// payload's `object_kind` also admits the event, so `merge_request` matches GitLab's
/// `Merge Request Hook` (spec §7.2).
pub fn event_admitted(
    events: &[String],
    event_type: &Value,
    headers: &HeaderMap,
    payload: &Map<String, Value>,
) -> bool {
    event_allowed(events, event_type)
        || (is_gitlab(headers)
            && matches!(payload.get("object_kind"), Some(Value::String(kind)) if events.contains(kind)))
}

/// Whether the request carries GitLab's `X-Gitlab-Event` header.
pub fn is_gitlab(headers: &HeaderMap) -> bool {
    headers.get("x-gitlab-event").is_some()
}

/// Headers kept with every inbox entry (never secrets such as `X-Gitlab-Token`); a
/// route with `source:` also keeps its sender's ([`crate::sender::kept_headers`]).
pub const KEPT_HEADERS: &[&str] = &[
    "content-type",
    "user-agent",
    "x-github-event",
    "x-github-delivery",
    "x-github-hook-id",
    "x-gitlab-event",
    "x-gitlab-event-uuid",
    "idempotency-key",
    "webhook-id",
    "webhook-timestamp",
    "webhook-event-type",
    "svix-id",
    "svix-timestamp",
    "x-request-id",
    "x-webhook-timestamp",
    "traceparent",
    "tracestate",
];

/// Header names that carry the sender's delivery id, in order of preference.
pub const DELIVERY_ID_HEADERS: [&str; 6] = [
    "x-github-delivery",
    "svix-id",
    "webhook-id",
    "x-request-id",
    "x-gitlab-event-uuid",
    "idempotency-key",
];

/// The sender's delivery id, if it sent one (an empty header counts as absent).
pub fn sender_delivery_id(headers: &HeaderMap) -> Option<String> {
    DELIVERY_ID_HEADERS.iter().find_map(|name| {
        headers
            .get(*name)
            .filter(|v| !v.is_empty())
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    })
}

/// The delivery id: the sender's, else a fresh unique one that never matches a later request.
pub fn delivery_id(headers: &HeaderMap) -> String {
    sender_delivery_id(headers).unwrap_or_else(|| format!("herald-{}", uuid::Uuid::now_v7()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use serde_json::json;

    #[test]
    fn json_object_and_fallbacks() {
        assert_eq!(
            parse_body(br#"{"a":1,"a":2}"#, None).unwrap(),
            json!({"a":2}).as_object().cloned().unwrap()
        );
        assert_eq!(parse_body(b"[1]", None), Err(ParseError::NotAnObject));
        assert_eq!(
            parse_body(b"{bad", Some(b"application/json; charset=utf-8")),
            Err(ParseError::InvalidJson)
        );
        assert_eq!(
            parse_body(b"{bad", Some(b"application/vnd.x+json")),
            Err(ParseError::InvalidJson)
        );
        let form = parse_body(
            b"a=1&b=&c&a=x+y%21",
            Some(b"application/x-www-form-urlencoded"),
        )
        .unwrap();
        assert_eq!(Value::Object(form), json!({"a": "x y!"}));
        assert_eq!(parse_body(b"just words", None).unwrap(), Map::new());
        assert_eq!(parse_body(b"", None).unwrap(), Map::new());
        assert_eq!(parse_body(b"\xff\xfe", None), Err(ParseError::NotUtf8));
    }

    #[test]
    fn python_json_and_github_form_bodies() {
        let (map, kind) =
            parse_body_kind(b"\xEF\xBB\xBF{\"a\": 1}", Some(b"application/json")).unwrap();
        assert_eq!(
            (Value::Object(map), kind),
            (json!({"a": 1}), BodyKind::RewrittenJson)
        );
        let (map, kind) = parse_body_kind(br#"{"a": "\ud800"}"#, Some(b"text/plain")).unwrap();
        assert_eq!(
            (Value::Object(map), kind),
            (json!({"a": "\u{FFFD}"}), BodyKind::RewrittenJson)
        );
        let deep = format!("{{\"a\": {}{}}}", "[".repeat(500), "]".repeat(500));
        assert_eq!(
            parse_body_kind(deep.as_bytes(), None).unwrap().1,
            BodyKind::Json
        );
        let too_deep = format!("{{\"a\": {}{}}}", "[".repeat(1500), "]".repeat(1500));
        assert_eq!(
            parse_body(too_deep.as_bytes(), None),
            Err(ParseError::TooDeep)
        );
        assert_eq!(
            validate_body(too_deep.as_bytes(), None),
            Err(ParseError::TooDeep)
        );
        assert_eq!(
            validate_body(b"\xEF\xBB\xBF{}", Some(b"application/json")),
            Ok(())
        );
        // GitHub's form content type: payload=<json object>.
        let form = b"payload=%7B%22action%22%3A%22opened%22%2C%22n%22%3A1%7D";
        let (map, kind) =
            parse_body_kind(form, Some(b"application/x-www-form-urlencoded")).unwrap();
        assert_eq!(
            (Value::Object(map), kind),
            (json!({"action": "opened", "n": 1}), BodyKind::Form)
        );
        // Other form bodies keep every value a string.
        for (body, want) in [
            (&b"payload=%5B1%5D"[..], json!({"payload": "[1]"})),
            (
                &b"payload=%7B%7D&x=1"[..],
                json!({"payload": "{}", "x": "1"}),
            ),
            (&b"payload=hello"[..], json!({"payload": "hello"})),
        ] {
            assert_eq!(Value::Object(parse_body(body, None).unwrap()), want);
        }
    }

    #[test]
    fn event_type_order() {
        let mut h = HeaderMap::new();
        let payload = json!({"event_type": "p", "type": "t"})
            .as_object()
            .cloned()
            .unwrap();
        assert_eq!(event_type(&h, &payload), json!("p"));
        h.insert("webhook-event-type", HeaderValue::from_static("std"));
        assert_eq!(event_type(&h, &payload), json!("std"));
        h.insert("x-github-event", HeaderValue::from_static("push"));
        assert_eq!(event_type(&HeaderMap::new(), &Map::new()), json!("unknown"));
        assert_eq!(event_type(&h, &payload), json!("push"));
        let typed = json!({"type": 5}).as_object().cloned().unwrap();
        assert_eq!(event_type(&HeaderMap::new(), &typed), json!(5));
        assert!(event_allowed(&["5".to_owned()], &json!(5)));
        assert!(!event_allowed(&["Push".to_owned()], &json!("push")));
        let mr = json!({"object_kind": "merge_request"})
            .as_object()
            .cloned()
            .unwrap();
        let events = ["merge_request".to_owned()];
        let hook = json!("Merge Request Hook");
        assert!(!event_admitted(&events, &hook, &HeaderMap::new(), &mr));
        let mut gl = HeaderMap::new();
        gl.insert(
            "x-gitlab-event",
            HeaderValue::from_static("Merge Request Hook"),
        );
        assert!(event_admitted(&events, &hook, &gl, &mr));
        assert!(!event_admitted(&["push".to_owned()], &hook, &gl, &mr));
    }

    #[test]
    fn delivery_ids() {
        let mut h = HeaderMap::new();
        h.insert("x-request-id", HeaderValue::from_static("r"));
        h.insert("webhook-id", HeaderValue::from_static(""));
        assert_eq!(delivery_id(&h), "r");
        h.insert("svix-id", HeaderValue::from_static("s"));
        assert_eq!(delivery_id(&h), "s");
        let mut gitlab = HeaderMap::new();
        gitlab.insert("idempotency-key", HeaderValue::from_static("k"));
        assert_eq!(delivery_id(&gitlab), "k");
        gitlab.insert("x-gitlab-event-uuid", HeaderValue::from_static("u"));
        assert_eq!(delivery_id(&gitlab), "u");
        let a = delivery_id(&HeaderMap::new());
        let b = delivery_id(&HeaderMap::new());
        assert_ne!(a, b);
    }
}
