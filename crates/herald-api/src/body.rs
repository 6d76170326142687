//! Reading a request body within the limit and parsing it as a JSON object.

use crate::errors::ApiError;
use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use serde_json::{Map, Value};

/// The body, at most `limit` bytes (a chunked body that overflows gets 413 too).
pub async fn read(body: Body, limit: u64) -> Result<Bytes, ApiError> {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    axum::body::to_bytes(body, limit).await.map_err(|_| {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("Request body too large (max {limit} bytes)"),
            Some("body_too_large"),
        )
    })
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
}
