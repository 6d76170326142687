//! Arbitrary filter specs (JSON) against arbitrary payloads: compiling and evaluating
//! never panics, and `not` always inverts.
#![no_main]

use herald_webhook::filter::{FileListCache, FilterInput, compile};
use http::HeaderMap;
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value, json};
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (spec_text, payload_text) = text.split_once('\u{0}').unwrap_or((&text, "{}"));
    let Ok(spec) = serde_json::from_str::<Value>(spec_text) else { return };
    let payload: Map<String, Value> = match serde_json::from_str(payload_text) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    let event = Value::String("push".into());
    let headers = HeaderMap::new();
    let lists = FileListCache::default();
    let input = FilterInput { payload: &payload, event_type: &event, headers: &headers };
    let home = |raw: &str| Path::new("/nonexistent-fuzz-home").join(raw);
    let (f, _) = compile(Some(&spec), &home);
    let base = f.matches(&input, &lists);
    if spec.is_object() {
        let (negated, _) = compile(Some(&json!({ "not": spec })), &home);
        assert_eq!(negated.matches(&input, &lists), !base);
    }
});
