//! Arbitrary bodies and path lists: picking never panics; when it gives a payload, the
//! full parse gives an object too, a template over the named paths renders the same
//! text on both, and the payload shown whole, written from the text, is the tree's
//! rendering when it holds only numbers a tree holds (the properties the ingress relies
//! on).
#![no_main]

use herald_webhook::json_text::{self, JsonRead};
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
    let full: Map<String, Value> = match json_text::read(body) {
        JsonRead::Object { map, .. } => map,
        other => panic!("picked a body the full parse refuses: {other:?}"),
    };
    let event = Value::String("push".into());
    // Numbers a tree cannot hold are shown from the text, on both.
    let text = picked.exotic.then_some(&*picked.text);
    let a = template.render(&RenderContext { payload: &full, event_type: &event, raw: None, text });
    let b = template.render(&RenderContext { payload: &picked.payload, event_type: &event, raw: None, text });
    assert_eq!(a, b);
    if picked.exotic {
        return;
    }
    // `None` only for a repeated key; otherwise exactly what the tree shows.
    if let Some(raw) = herald_webhook::raw_render::indented_cut(&picked.text, 4000) {
        assert_eq!(raw, herald_webhook::pyjson::indented_object_cut(&full, 4000));
    }
});
