//! Reading params: strings, flags and integers, each with its method's error code.

use crate::errors::RpcError;
use serde_json::{Map, Value};

pub type Params = Map<String, Value>;

/// A non-empty trimmed string param.
pub fn text(p: &Params, key: &str) -> Option<String> {
    p.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// A string param that must be there; `code` otherwise.
pub fn required(p: &Params, key: &str, code: i64) -> Result<String, RpcError> {
    text(p, key).ok_or_else(|| RpcError::new(code, format!("{key} is required")))
}

pub fn flag(p: &Params, key: &str) -> bool {
    p.get(key).and_then(Value::as_bool).unwrap_or(false)
}

/// A non-negative integer param (`None` when absent or not one).
pub fn count(p: &Params, key: &str) -> Option<usize> {
    p.get(key)
        .and_then(Value::as_u64)
        .and_then(|n| usize::try_from(n).ok())
}
