//! Input schemas as Hermes normalises them, so that providers with strict schema rules
//! accept every MCP tool: an empty schema becomes an empty object; `definitions` becomes
//! `$defs` (and its `$ref`s follow); a nullable union of one type becomes that type with
//! `nullable: true`; object shapes get `properties` and a `required` list of names that
//! exist; a `type` list becomes one type or an `anyOf`; the top level is always an
//! object, without `allOf`/`anyOf`/`oneOf`/`enum`/`not` beside it; `default` next to
//! `$ref` is dropped.

use serde_json::{Map, Value, json};

/// The schema a tool's `inputSchema` is offered to the model as.
pub fn normalized(schema: &Value) -> Value {
    let mut out = match schema {
        Value::Object(m) if !m.is_empty() => Value::Object(m.clone()),
        Value::String(t) if t != "object" => json!({"type": t}),
        _ => json!({"type": "object", "properties": {}}),
    };
    repair(&mut out, false);
    if let Value::Object(top) = &mut out {
        for key in ["allOf", "anyOf", "oneOf", "enum", "not"] {
            top.remove(key);
        }
        top.insert("type".into(), json!("object"));
        if !top.get("properties").is_some_and(Value::is_object) {
            top.insert("properties".into(), json!({}));
        }
        prune_required(top);
    }
    out
}

/// Repairs one schema node and everything under it. `in_properties`: the node is a
/// `properties` map, whose keys are names, not keywords.
fn repair(node: &mut Value, in_properties: bool) {
    match node {
        Value::Object(map) if in_properties => {
            for child in map.values_mut() {
                repair(child, false);
            }
        }
        Value::Object(map) => {
            repair_keywords(map);
            for (key, child) in map.iter_mut() {
                let names = matches!(key.as_str(), "properties" | "patternProperties" | "$defs");
                repair(child, names);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| repair(i, false)),
        _ => {}
    }
}

fn repair_keywords(map: &mut Map<String, Value>) {
    if let Some(defs) = map.remove("definitions") {
        map.entry("$defs").or_insert(defs);
    }
    if let Some(Value::String(r)) = map.get_mut("$ref") {
        if let Some(rest) = r.strip_prefix("#/definitions/") {
            *r = format!("#/$defs/{rest}");
        }
        map.remove("default");
    }
    collapse_nullable(map);
    match map.get("type").cloned() {
        Some(Value::Array(types)) => {
            let kinds: Vec<Value> = types.into_iter().filter(|t| t != "null").collect();
            let nullable = map
                .get("type")
                .and_then(Value::as_array)
                .is_some_and(|a| a.len() > kinds.len());
            match kinds.as_slice() {
                [] => {
                    map.insert("type".into(), json!("null"));
                }
                [one] => {
                    map.insert("type".into(), one.clone());
                }
                many => {
                    map.remove("type");
                    let branches: Vec<Value> = many.iter().map(|t| json!({"type": t})).collect();
                    map.insert("anyOf".into(), Value::Array(branches));
                }
            }
            if nullable {
                map.insert("nullable".into(), json!(true));
            }
        }
        None | Some(Value::Null)
            if map.contains_key("properties") || map.contains_key("required") =>
        {
            map.insert("type".into(), json!("object"));
        }
        _ => {}
    }
    if map.get("type") == Some(&json!("object")) {
        if !map.get("properties").is_some_and(Value::is_object) {
            map.insert("properties".into(), json!({}));
        }
        prune_required(map);
    }
}

/// `anyOf`/`oneOf` of one type and `null`: that type, `nullable: true`.
fn collapse_nullable(map: &mut Map<String, Value>) {
    for key in ["anyOf", "oneOf"] {
        let Some(Value::Array(branches)) = map.get(key) else {
            continue;
        };
        let is_null = |b: &Value| b.get("type") == Some(&json!("null"));
        let others: Vec<&Value> = branches.iter().filter(|b| !is_null(b)).collect();
        if others.len() != 1 || others.len() == branches.len() {
            continue;
        }
        let Value::Object(only) = others[0].clone() else {
            continue;
        };
        map.remove(key);
        for (k, v) in only {
            map.entry(k).or_insert(v);
        }
        map.insert("nullable".into(), json!(true));
        if map.contains_key("$ref") {
            map.remove("default");
        }
    }
}

fn prune_required(map: &mut Map<String, Value>) {
    let names: std::collections::HashSet<String> = map
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    let kept: Vec<Value> = map
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter(|n| n.as_str().is_some_and(|n| names.contains(n)))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    match kept.is_empty() {
        true => map.remove("required"),
        false => map.insert("required".into(), Value::Array(kept)),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_are_made_acceptable() {
        assert_eq!(
            normalized(&Value::Null),
            json!({"type": "object", "properties": {}})
        );
        let s = normalized(&json!({
            "type": "object",
            "anyOf": [{"required": ["a"]}],
            "definitions": {"X": {"type": "string"}},
            "properties": {
                "definitions": {"type": ["string", "null"]},
                "x": {"$ref": "#/definitions/X", "default": "d"},
                "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}], "description": "n"},
                "obj": {"required": ["gone"]},
                "multi": {"type": ["string", "integer"]}
            },
            "required": ["x", "ghost"]
        }));
        assert_eq!(s["$defs"]["X"]["type"], "string");
        assert!(s.get("definitions").is_none() && s.get("anyOf").is_none());
        assert_eq!(
            s["properties"]["definitions"],
            json!({"type": "string", "nullable": true})
        );
        assert_eq!(s["properties"]["x"], json!({"$ref": "#/$defs/X"}));
        assert_eq!(
            s["properties"]["maybe"],
            json!({"type": "integer", "nullable": true, "description": "n"})
        );
        assert_eq!(
            s["properties"]["obj"],
            json!({"type": "object", "properties": {}})
        );
        assert_eq!(
            s["properties"]["multi"],
            json!({"anyOf": [{"type": "string"}, {"type": "integer"}]})
        );
        assert_eq!(s["required"], json!(["x"]));
    }
}
