//! Arbitrary templates against arbitrary payloads: rendering never panics, text
//! without braces renders to itself, and placeholders that resolve to nothing stay.
#![no_main]

use herald_webhook::template::{RenderContext, Template};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (template, payload_text) = text.split_once('\u{0}').unwrap_or((&text, "{}"));
    let payload: Map<String, Value> = match serde_json::from_str(payload_text) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    let event = Value::String("push".into());
    let ctx = RenderContext { payload: &payload, event_type: &event, raw: None, text: None };
    let out = Template::compile(template).render(&ctx);
    if !template.contains('{') {
        assert_eq!(out, template);
    }
    let empty = Map::new();
    let bare = Template::compile(template).render(&RenderContext { payload: &empty, event_type: &event, raw: None, text: None });
    if !template.contains("{__raw__}") && !template.contains("{event_type}") {
        assert_eq!(bare, template, "with an empty payload nothing resolves");
    }
});
