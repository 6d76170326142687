//! Templates: text without braces renders to itself; rendering never panics and leaves
//! unresolvable placeholders as written.

use herald_webhook::template::{RenderContext, Template};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| json!(i)),
        (-1e20f64..1e20).prop_map(|f| json!(f)),
        ".{0,20}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec(("[a-z]{1,5}", inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn arb_payload() -> impl Strategy<Value = Map<String, Value>> {
    proptest::collection::vec(("[a-z]{1,5}", arb_json()), 0..8)
        .prop_map(|kv| kv.into_iter().collect())
}

proptest! {
    #[test]
    fn text_without_braces_renders_to_itself(text in "[^{}]{0,200}", payload in arb_payload()) {
        let ev = json!("push");
        let out = Template::compile(&text).render(&RenderContext { payload: &payload, event_type: &ev });
        prop_assert_eq!(out, text);
    }

    #[test]
    fn rendering_never_panics(text in ".{0,200}", payload in arb_payload()) {
        let ev = json!("push");
        let _ = Template::compile(&text).render(&RenderContext { payload: &payload, event_type: &ev });
    }

    #[test]
    fn unknown_placeholders_stay(names in proptest::collection::vec("[A-Z][A-Za-z0-9_.]{0,10}", 1..10)) {
        let text: String = names.iter().map(|n| format!("{{{n}}} ")).collect();
        let ev = json!("push");
        let payload = Map::new();
        let out = Template::compile(&text).render(&RenderContext { payload: &payload, event_type: &ev });
        prop_assert_eq!(out, text);
    }

    #[test]
    fn string_values_are_substituted_verbatim(key in "[a-z_]{1,10}", value in ".{0,50}") {
        prop_assume!(key != "event_type");
        let mut payload = Map::new();
        payload.insert(key.clone(), Value::String(value.clone()));
        let ev = json!("push");
        let out = Template::compile(&format!("<{{{key}}}>")).render(&RenderContext { payload: &payload, event_type: &ev });
        prop_assert_eq!(out, format!("<{value}>"));
    }
}
