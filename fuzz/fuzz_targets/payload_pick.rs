//! Arbitrary bodies and path lists: picking never panics; when it gives a payload, the
//! full parse gives an object too, and a template over the named paths renders the same
//! text on both (the property the ingress relies on).
#![no_main]

use herald_webhook::pick::PayloadPaths;
use herald_webhook::template::{RenderContext, Template};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

fuzz_target!(|data: &[u8]| {
    // "<template>\0<body>": the template's placeholders are the paths.
    let (template_bytes, body) = match data.iter().position(|b| *b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (&b"{a} {b.c} {d.e.f}"[..], data),
    };
    let template = Template::compile(&String::from_utf8_lossy(template_bytes));
    let mut paths = PayloadPaths::new();
    template.add_paths(&mut paths);
    let Some(picked) = paths.pick(body) else {
        return;
    };
    let full: Map<String, Value> = match serde_json::from_slice(body) {
        Ok(Value::Object(m)) => m,
        other => panic!("picked a body the full parse refuses: {other:?}"),
    };
    let event = Value::String("push".into());
    let a = template.render(&RenderContext { payload: &full, event_type: &event });
    let b = template.render(&RenderContext { payload: &picked, event_type: &event });
    assert_eq!(a, b);
});
