//! A `tools/call` result as the text the model gets, in Hermes's shapes: `{"result":
//! text}`, with `structuredContent` beside it when the server sent one, and `{"error":
//! …}` (credentials stripped) when the server marked it an error. Text parts are kept;
//! an image or audio part is named by its type and size (herald keeps no media cache); a
//! resource link names the utility tool that reads it.

use herald_llm::redact::shapes_redacted as redacted;
use serde_json::{Value, json};

/// The model's text for a result (the `CallToolResult` as JSON).
pub fn result_text(server: &str, result: &Value) -> String {
    let parts = parts_of(server, result);
    let text = parts.join("\n");
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let message = match text.is_empty() {
            true => "MCP tool returned an error".to_owned(),
            false => redacted(&text),
        };
        return json!({ "error": message }).to_string();
    }
    let out = match result.get("structuredContent").filter(|v| !v.is_null()) {
        Some(obj) if !text.is_empty() => json!({"result": text, "structuredContent": obj}),
        Some(obj) => json!({ "result": obj }),
        None => json!({ "result": text }),
    };
    out.to_string()
}

fn parts_of(server: &str, result: &Value) -> Vec<String> {
    let Some(blocks) = result.get("content").and_then(Value::as_array) else {
        return Vec::new();
    };
    blocks
        .iter()
        .filter_map(|b| part(server, b))
        .filter(|p| !p.is_empty())
        .collect()
}

fn part(server: &str, block: &Value) -> Option<String> {
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    match block.get("type").and_then(Value::as_str)? {
        "text" => text(block, "text"),
        "image" | "audio" => {
            let kind = block["type"].as_str().unwrap_or("media");
            let mime = text(block, "mimeType").unwrap_or_default();
            let bytes = text(block, "data").map_or(0, |d| d.len() / 4 * 3);
            Some(format!(
                "[MCP {kind} ({mime}, about {bytes} bytes) not shown]"
            ))
        }
        "resource_link" => Some(format!(
            "[MCP resource link: uri={}, name={} — fetch it with {}]",
            text(block, "uri").unwrap_or_default(),
            text(block, "name").unwrap_or_default(),
            crate::naming::tool_name(server, "read_resource")
        )),
        "resource" => {
            let res = block.get("resource")?;
            text(res, "text").or_else(|| {
                let mime = text(res, "mimeType").unwrap_or_default();
                Some(format!(
                    "[MCP resource {} ({mime}) is binary: not shown]",
                    text(res, "uri").unwrap_or_default()
                ))
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_in_hermess_shapes() {
        let r = json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]});
        assert_eq!(result_text("s", &r), r#"{"result":"a\nb"}"#);
        let r = json!({"content": [], "structuredContent": {"n": 1}});
        assert_eq!(result_text("s", &r), r#"{"result":{"n":1}}"#);
        let r = json!({"content": [{"type": "text", "text": "t"}], "structuredContent": {"n": 1}});
        assert_eq!(
            result_text("s", &r),
            r#"{"result":"t","structuredContent":{"n":1}}"#
        );
        let r = json!({"isError": true, "content": [{"type": "text", "text": "bad token=abc"}]});
        assert_eq!(result_text("s", &r), r#"{"error":"bad token=[REDACTED]"}"#);
        let r = json!({"isError": true, "content": []});
        assert_eq!(
            result_text("s", &r),
            r#"{"error":"MCP tool returned an error"}"#
        );
    }
}
