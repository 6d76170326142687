//! Tool arguments aligned to the tool's schema before anything else sees them
//! (middleware.md A9, as Hermes's `coerce_tool_args`): models often write `"5"` for an
//! integer, `"true"` for a boolean or a JSON string for an array. Only top-level
//! properties are aligned; a value that cannot be aligned is left as the model wrote it.

use serde_json::Value;

/// `args` with each top-level property aligned to its type in `schema` (the tool's
/// parameters).
pub fn coerce_args(args: Value, schema: &Value) -> Value {
    let Value::Object(mut args) = args else {
        return args;
    };
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Value::Object(args);
    };
    for (key, value) in args.iter_mut() {
        if let Some(property) = properties.get(key) {
            align(value, property);
        }
    }
    Value::Object(args)
}

fn align(value: &mut Value, property: &Value) {
    let expected = property.get("type");
    if expected.and_then(Value::as_str) == Some("array") && !value.is_null() && !value.is_array() {
        // A JSON string of an array (or "null" where nullable) is parsed; any other
        // bare value becomes a one-element array.
        if let Value::String(text) = value
            && let Some(aligned) = coerce_text(text, expected, property)
        {
            *value = aligned;
            return;
        }
        *value = Value::Array(vec![value.take()]);
        return;
    }
    let Value::String(text) = value else {
        return;
    };
    if expected.is_none() && !allows_null(property) {
        return;
    }
    if let Some(aligned) = coerce_text(text, expected, property) {
        *value = aligned;
    }
}

/// `text` as the type(s) `expected` names, tried in order for a union; `None` when
/// none fits.
fn coerce_text(text: &str, expected: Option<&Value>, property: &Value) -> Option<Value> {
    if allows_null(property) && text.trim().eq_ignore_ascii_case("null") {
        return Some(Value::Null);
    }
    match expected? {
        Value::Array(types) => types
            .iter()
            .find_map(|t| coerce_text(text, Some(t), property)),
        Value::String(kind) => coerce_as(text, kind),
        _ => None,
    }
}

fn coerce_as(text: &str, kind: &str) -> Option<Value> {
    match kind {
        "integer" => number(text, true),
        "number" => number(text, false),
        "boolean" => match text.trim().to_ascii_lowercase().as_str() {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ => None,
        },
        "array" => serde_json::from_str::<Value>(text)
            .ok()
            .filter(Value::is_array),
        "object" => serde_json::from_str::<Value>(text)
            .ok()
            .filter(Value::is_object),
        "null" if text.trim().eq_ignore_ascii_case("null") => Some(Value::Null),
        _ => None,
    }
}

/// A number written as text: a whole number becomes an integer (also for `number`);
/// one with decimals stays text where an integer is expected; infinities and NaN stay
/// text.
fn number(text: &str, integer_only: bool) -> Option<Value> {
    let trimmed = text.trim();
    if let Ok(whole) = trimmed.parse::<i64>() {
        return Some(Value::from(whole));
    }
    let lowered = trimmed.to_ascii_lowercase();
    if lowered.contains("inf") || lowered.contains("nan") {
        return None;
    }
    let f = trimmed.parse::<f64>().ok().filter(|f| f.is_finite())?;
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        return Some(Value::from(f as i64));
    }
    if f.fract() == 0.0 {
        return serde_json::Number::from_f64(f).map(Value::Number);
    }
    if integer_only {
        return None;
    }
    serde_json::Number::from_f64(f).map(Value::Number)
}

/// Whether a property's schema lets the value be null (`type: null` or a union holding
/// it, `nullable: true`, an `anyOf`/`oneOf` branch of type null).
fn allows_null(property: &Value) -> bool {
    match property.get("type") {
        Some(Value::String(t)) if t == "null" => return true,
        Some(Value::Array(ts)) if ts.iter().any(|t| t == "null") => return true,
        _ => {}
    }
    if property.get("nullable") == Some(&Value::Bool(true)) {
        return true;
    }
    ["anyOf", "oneOf"].iter().any(|union| {
        property
            .get(*union)
            .and_then(Value::as_array)
            .is_some_and(|branches| {
                branches
                    .iter()
                    .any(|b| b.get("type").and_then(Value::as_str) == Some("null"))
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "count": {"type": "integer"},
            "ratio": {"type": "number"},
            "force": {"type": "boolean"},
            "urls": {"type": "array", "items": {"type": "string"}},
            "options": {"type": "object"},
            "limit": {"type": ["integer", "null"]},
            "maybe": {"type": "string", "nullable": true},
            "either": {"type": ["boolean", "integer", "string"]},
            "name": {"type": "string"},
            "nested": {"type": "object", "properties": {"n": {"type": "integer"}}},
            "untyped": {"description": "no type"},
            "anyof": {"anyOf": [{"type": "string"}, {"type": "null"}]}
        }})
    }

    fn one(key: &str, value: Value) -> Value {
        coerce_args(json!({ key: value }), &schema())[key].clone()
    }

    #[test]
    fn integers_numbers_and_booleans_come_from_text() {
        assert_eq!(one("count", json!("5")), json!(5));
        assert_eq!(one("count", json!(" 42 ")), json!(42));
        assert_eq!(one("count", json!("5.0")), json!(5));
        assert_eq!(one("count", json!("1e3")), json!(1000));
        assert_eq!(one("ratio", json!("0.25")), json!(0.25));
        assert_eq!(one("ratio", json!("3")), json!(3));
        assert_eq!(one("force", json!("TRUE")), json!(true));
        assert_eq!(one("force", json!("false")), json!(false));
    }

    #[test]
    fn what_does_not_fit_stays_as_written() {
        assert_eq!(
            one("count", json!("5.5")),
            json!("5.5"),
            "decimals for an integer"
        );
        assert_eq!(one("count", json!("five")), json!("five"));
        assert_eq!(one("ratio", json!("inf")), json!("inf"));
        assert_eq!(one("ratio", json!("NaN")), json!("NaN"));
        assert_eq!(one("force", json!("yes")), json!("yes"));
        assert_eq!(one("options", json!("[1]")), json!("[1]"), "not an object");
        assert_eq!(one("options", json!("{bad")), json!("{bad"));
        assert_eq!(
            one("name", json!("5")),
            json!("5"),
            "a string stays a string"
        );
        assert_eq!(one("untyped", json!("5")), json!("5"));
        assert_eq!(one("unknown", json!("5")), json!("5"), "no such property");
        assert_eq!(one("count", json!(7)), json!(7), "already the right type");
    }

    #[test]
    fn arrays_and_objects_come_from_json_text_and_bare_values_are_wrapped() {
        assert_eq!(one("urls", json!("[\"a\", \"b\"]")), json!(["a", "b"]));
        assert_eq!(
            one("urls", json!("https://a.example")),
            json!(["https://a.example"])
        );
        assert_eq!(one("urls", json!(3)), json!([3]));
        assert_eq!(one("urls", json!({"a": 1})), json!([{"a": 1}]));
        assert_eq!(one("urls", json!("[broken")), json!(["[broken"]));
        assert_eq!(one("urls", Value::Null), Value::Null, "null is left alone");
        assert_eq!(one("options", json!("{\"a\": 1}")), json!({"a": 1}));
    }

    #[test]
    fn null_text_becomes_null_where_null_is_allowed() {
        assert_eq!(one("limit", json!("null")), Value::Null);
        assert_eq!(one("limit", json!("12")), json!(12));
        assert_eq!(one("maybe", json!("NULL")), Value::Null);
        assert_eq!(one("anyof", json!("null")), Value::Null);
        assert_eq!(one("name", json!("null")), json!("null"));
    }

    #[test]
    fn unions_are_tried_in_order() {
        assert_eq!(one("either", json!("true")), json!(true));
        assert_eq!(one("either", json!("7")), json!(7));
        assert_eq!(one("either", json!("seven")), json!("seven"));
    }

    #[test]
    fn only_top_level_properties_are_aligned() {
        assert_eq!(one("nested", json!({"n": "5"})), json!({"n": "5"}));
        assert_eq!(coerce_args(json!("text"), &schema()), json!("text"));
        assert_eq!(
            coerce_args(json!({"count": "5"}), &json!({})),
            json!({"count": "5"}),
            "a schema without properties"
        );
    }
}
