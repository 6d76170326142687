//! The JSON-RPC 2.0 envelope: what comes in (a request, a notification or an answer)
//! read from one frame under the spec's rules, and the lines that go out.

use serde::Serialize;
use serde_json::{Map, Value};

/// An error object, as answered and as received.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ErrorObject {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorObject {
    pub fn new(code: i64, message: impl Into<String>) -> ErrorObject {
        ErrorObject {
            code,
            message: message.into(),
            data: None,
        }
    }
}

/// One message read.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request (`id` set) or a notification (`id` `None`); absent or null params are
    /// an empty object.
    Request {
        id: Option<Value>,
        method: String,
        params: Map<String, Value>,
    },
    /// The answer to a request of ours: its result or its error.
    Answer {
        id: Value,
        outcome: Result<Value, ErrorObject>,
    },
}

/// Why a frame is no message; `id` is what to answer to (`null` when unknown).
#[derive(Debug, Clone, PartialEq)]
pub enum Malformed {
    /// Not JSON (or not UTF-8).
    Parse,
    /// JSON, but not an object.
    NotAnObject,
    /// No method, or one that is not a non-empty string.
    Method { id: Value },
    /// Params that are not an object.
    Params { id: Value },
}

impl Incoming {
    /// Reads one frame.
    pub fn read(frame: &[u8]) -> Result<Incoming, Malformed> {
        let value: Value = serde_json::from_slice(frame).map_err(|_| Malformed::Parse)?;
        let Value::Object(mut map) = value else {
            return Err(Malformed::NotAnObject);
        };
        let id = map.remove("id");
        let answer_to = id.clone().unwrap_or(Value::Null);
        let method = match map.remove("method") {
            Some(Value::String(m)) if !m.is_empty() => m,
            None if id.is_some() && (map.contains_key("result") || map.contains_key("error")) => {
                return Ok(Incoming::Answer {
                    id: answer_to,
                    outcome: outcome(&mut map),
                });
            }
            _ => return Err(Malformed::Method { id: answer_to }),
        };
        let params = match map.remove("params") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(p)) => p,
            Some(_) => return Err(Malformed::Params { id: answer_to }),
        };
        Ok(Incoming::Request { id, method, params })
    }
}

/// An answer's error (an error member that is no error object is read as one whose
/// message is unknown), else its result.
fn outcome(map: &mut Map<String, Value>) -> Result<Value, ErrorObject> {
    match map.remove("error") {
        Some(e) => Err(serde_json::from_value(e)
            .unwrap_or_else(|_| ErrorObject::new(-32603, "malformed error"))),
        None => Ok(map.remove("result").unwrap_or(Value::Null)),
    }
}

#[derive(Serialize)]
struct Out<'a, T: Serialize> {
    jsonrpc: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    method: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a ErrorObject>,
}

fn line(out: Out<'_, &Value>) -> String {
    // JSON values, strings and error objects always encode.
    serde_json::to_string(&out).unwrap_or_default()
}

/// A request line: `{"jsonrpc":"2.0","id":…,"method":…,"params":…}`, or why `params`
/// do not encode.
pub fn request(
    id: &Value,
    method: &str,
    params: impl Serialize,
) -> Result<String, serde_json::Error> {
    serde_json::to_string(&Out {
        jsonrpc: "2.0",
        id: Some(id),
        method: Some(method),
        params: Some(params),
        result: None,
        error: None,
    })
}

/// A notification line (no id; no params when `None`). Params are herald's own types,
/// which always encode.
pub fn notification<T: Serialize>(method: &str, params: Option<T>) -> String {
    let out = Out {
        jsonrpc: "2.0",
        id: None,
        method: Some(method),
        params,
        result: None,
        error: None,
    };
    serde_json::to_string(&out).unwrap_or_default()
}

/// A result line.
pub fn response(id: &Value, result: &Value) -> String {
    line(Out {
        jsonrpc: "2.0",
        id: Some(id),
        method: None,
        params: None,
        result: Some(result),
        error: None,
    })
}

/// An error line.
pub fn error(id: &Value, error: &ErrorObject) -> String {
    line(Out {
        jsonrpc: "2.0",
        id: Some(id),
        method: None,
        params: None,
        result: None,
        error: Some(error),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn frames_are_read_as_the_spec_says() {
        let ok = Incoming::read(br#"{"jsonrpc":"2.0","id":7,"method":"m","params":null}"#);
        assert_eq!(
            ok,
            Ok(Incoming::Request {
                id: Some(json!(7)),
                method: "m".into(),
                params: Map::new()
            })
        );
        let bad = |f: &[u8]| Incoming::read(f).unwrap_err();
        assert_eq!(bad(b"{not json"), Malformed::Parse);
        assert_eq!(bad(b"\xff\xfe"), Malformed::Parse);
        assert_eq!(bad(b"[1]"), Malformed::NotAnObject);
        assert_eq!(
            bad(br#"{"id":1,"method":""}"#),
            Malformed::Method { id: json!(1) }
        );
        assert_eq!(
            bad(br#"{"id":1,"method":5}"#),
            Malformed::Method { id: json!(1) }
        );
        assert_eq!(
            bad(br#"{"id":"x","method":"m","params":[1]}"#),
            Malformed::Params { id: json!("x") }
        );
        let answer = Incoming::read(br#"{"jsonrpc":"2.0","id":"h1","result":{"value":3}}"#);
        assert_eq!(
            answer,
            Ok(Incoming::Answer {
                id: json!("h1"),
                outcome: Ok(json!({"value": 3}))
            })
        );
        let failed = Incoming::read(
            br#"{"id":"h2","error":{"code":-32004,"message":"no","data":{"reason":"r"}}}"#,
        );
        let Ok(Incoming::Answer {
            outcome: Err(e), ..
        }) = failed
        else {
            panic!("{failed:?}");
        };
        assert_eq!((e.code, e.data), (-32004, Some(json!({"reason": "r"}))));
    }

    #[test]
    fn lines_are_written_as_the_spec_says() {
        assert_eq!(
            request(&json!("h1"), "hook.call", json!({"a": 1})).unwrap(),
            r#"{"jsonrpc":"2.0","id":"h1","method":"hook.call","params":{"a":1}}"#
        );
        assert_eq!(
            notification("exit", None::<&Value>),
            r#"{"jsonrpc":"2.0","method":"exit"}"#
        );
        assert_eq!(
            response(&json!(3), &json!({"ok": true})),
            r#"{"jsonrpc":"2.0","id":3,"result":{"ok":true}}"#
        );
        assert_eq!(
            error(&Value::Null, &ErrorObject::new(-32700, "parse error")),
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}"#
        );
    }
}
