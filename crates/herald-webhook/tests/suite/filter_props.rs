//! Filters: compiling any spec never panics; `not` inverts; `all`/`any` of one spec
//! equal that spec; equality is reflexive.

use herald_webhook::filter::{FileListCache, FilterInput, compile};
use http::HeaderMap;
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use std::path::Path;

fn arb_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-100i64..100).prop_map(|i| json!(i)),
        "[a-c]{0,3}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::vec(("[a-c]", inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn arb_spec() -> impl Strategy<Value = Value> {
    let op = prop_oneof![
        Just("exists"),
        Just("missing"),
        Just("equals"),
        Just("not_equals"),
        Just("contains"),
        Just("in"),
        Just("regex"),
    ];
    let field = prop_oneof![
        Just("a"),
        Just("a.b"),
        Just("a.0"),
        Just("event"),
        Just("headers.x-t"),
        Just("payload.a")
    ];
    let leaf = (field, op, arb_value()).prop_map(|(f, op, v)| {
        let v = match op {
            "regex" => json!(v.as_str().unwrap_or("a.*")),
            "in" => json!([v]),
            _ => v,
        };
        json!({"field": f, op: v})
    });
    leaf.prop_recursive(3, 16, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(|v| json!({"all": v})),
            proptest::collection::vec(inner.clone(), 0..3).prop_map(|v| json!({"any": v})),
            inner.prop_map(|v| json!({"not": v})),
        ]
    })
}

fn eval(spec: &Value, payload: &Map<String, Value>) -> bool {
    let (f, _) = compile(Some(spec), &|p| Path::new("/nonexistent").join(p));
    let ev = json!("push");
    let headers = HeaderMap::new();
    f.matches(
        &FilterInput {
            payload,
            event_type: &ev,
            headers: &headers,
        },
        &FileListCache::default(),
    )
}

proptest! {
    #[test]
    fn not_inverts_and_singletons_agree(spec in arb_spec(), a in arb_value()) {
        let mut payload = Map::new();
        payload.insert("a".into(), a);
        let base = eval(&spec, &payload);
        prop_assert_eq!(eval(&json!({"not": spec.clone()}), &payload), !base);
        prop_assert_eq!(eval(&json!({"all": [spec.clone()]}), &payload), base);
        prop_assert_eq!(eval(&json!({"any": [spec.clone()]}), &payload), base);
        prop_assert_eq!(eval(&json!([spec]), &payload), base);
    }

    #[test]
    fn equals_is_reflexive(a in arb_value()) {
        let mut payload = Map::new();
        payload.insert("a".into(), a.clone());
        let equals = json!({"field": "a", "equals": a.clone()});
        let within = json!({"field": "a", "in": [a.clone()]});
        let differs = json!({"field": "a", "not_equals": a});
        prop_assert!(eval(&equals, &payload));
        prop_assert!(eval(&within, &payload));
        prop_assert!(!eval(&differs, &payload));
    }

    #[test]
    fn compiling_arbitrary_json_never_panics(spec in arb_value(), a in arb_value()) {
        let mut payload = Map::new();
        payload.insert("a".into(), a);
        let _ = eval(&spec, &payload);
    }
}
