//! JSON-RPC 2.0 frames (rpc-gateway.md §1): one JSON object per line or WebSocket
//! message; requests in, results, errors and `event` notifications out.

use crate::errors::RpcError;
use herald_jsonrpc::envelope::{self, ErrorObject, Incoming, Malformed};
use serde::Serialize;
use serde_json::{Map, Value};

/// A request as received: its id (`None` for a notification), method and params.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub id: Option<Value>,
    pub method: String,
    pub params: Map<String, Value>,
}

/// Reads one frame; a frame that is not a request is the error to answer with and the
/// id to answer to (`null` when it has none). A client sends no answers: one is a
/// request without a method.
pub fn parse(frame: &[u8]) -> Result<Request, Box<(Value, RpcError)>> {
    let refused = |id: Value, code, message: &str| Box::new((id, RpcError::new(code, message)));
    let method_needed = "invalid request: method must be a non-empty string";
    match Incoming::read(frame) {
        Ok(Incoming::Request { id, method, params }) => Ok(Request { id, method, params }),
        Ok(Incoming::Answer { id, .. }) | Err(Malformed::Method { id }) => {
            Err(refused(id, RpcError::INVALID_REQUEST, method_needed))
        }
        Err(Malformed::Parse) => Err(refused(Value::Null, RpcError::PARSE, "parse error")),
        Err(Malformed::NotAnObject) => Err(refused(
            Value::Null,
            RpcError::INVALID_REQUEST,
            "invalid request",
        )),
        Err(Malformed::Params { id }) => Err(refused(
            id,
            RpcError::INVALID_PARAMS,
            "invalid params: params must be an object",
        )),
    }
}

pub fn result(id: &Value, result: Value) -> String {
    envelope::response(id, &result)
}

pub fn error(id: &Value, e: &RpcError) -> String {
    let object = ErrorObject {
        code: e.code,
        message: e.message.clone(),
        data: e.data.clone(),
    };
    envelope::error(id, &object)
}

/// The params of an `event` notification.
#[derive(Serialize)]
struct EventParams<'a, P> {
    #[serde(rename = "type")]
    kind: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    session_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    payload: Option<P>,
}

/// An `event` notification; `session_id` and `payload` are left out when absent.
pub fn event<P: Serialize>(kind: &str, session_id: Option<&str>, payload: Option<P>) -> String {
    let params = EventParams {
        kind,
        session_id,
        payload,
    };
    envelope::notification("event", Some(params))
}

/// An `event` notification without a payload.
pub fn bare_event(kind: &str, session_id: Option<&str>) -> String {
    event(kind, session_id, None::<()>)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn frames_are_read_as_the_spec_says() {
        let ok = parse(br#"{"jsonrpc":"2.0","id":7,"method":"m","params":null}"#).unwrap();
        assert_eq!(
            (ok.id, ok.method.as_str(), ok.params.len()),
            (Some(json!(7)), "m", 0)
        );
        let code = |f: &[u8]| parse(f).unwrap_err().1.code;
        assert_eq!(code(b"{not json"), RpcError::PARSE);
        assert_eq!(code(b"\xff\xfe"), RpcError::PARSE);
        assert_eq!(code(b"[1]"), RpcError::INVALID_REQUEST);
        assert_eq!(code(br#"{"id":1,"method":""}"#), RpcError::INVALID_REQUEST);
        assert_eq!(code(br#"{"id":1,"method":5}"#), RpcError::INVALID_REQUEST);
        assert_eq!(
            code(br#"{"id":1,"method":"m","params":[1]}"#),
            RpcError::INVALID_PARAMS
        );
        assert_eq!(
            parse(br#"{"id":"x","method":"m","params":[1]}"#)
                .unwrap_err()
                .0,
            json!("x")
        );
        let e = bare_event("message.start", Some("ab"));
        assert_eq!(
            e,
            r#"{"jsonrpc":"2.0","method":"event","params":{"type":"message.start","session_id":"ab"}}"#
        );
    }
}
