//! Templates: text without braces renders to itself; rendering never panics and leaves
//! unresolvable placeholders as written.

use herald_webhook::template::{RenderContext, Template, lookup};
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
        let out = Template::compile(&text).render(&RenderContext { payload: &payload, event_type: &ev, raw: None, text: None });
        prop_assert_eq!(out, text);
    }

    #[test]
    fn rendering_never_panics(text in ".{0,200}", payload in arb_payload()) {
        let ev = json!("push");
        let _ = Template::compile(&text).render(&RenderContext { payload: &payload, event_type: &ev, raw: None, text: None });
    }

    #[test]
    fn unknown_placeholders_stay(names in proptest::collection::vec("[A-Z][A-Za-z0-9_.]{0,10}", 1..10)) {
        let text: String = names.iter().map(|n| format!("{{{n}}} ")).collect();
        let ev = json!("push");
        let payload = Map::new();
        let out = Template::compile(&text).render(&RenderContext { payload: &payload, event_type: &ev, raw: None, text: None });
        prop_assert_eq!(out, text);
    }

    #[test]
    fn string_values_are_substituted_verbatim(key in "[a-z_]{1,10}", value in ".{0,50}") {
        prop_assume!(key != "event_type");
        let mut payload = Map::new();
        payload.insert(key.clone(), Value::String(value.clone()));
        let ev = json!("push");
        let out = Template::compile(&format!("<{{{key}}}>")).render(&RenderContext { payload: &payload, event_type: &ev, raw: None, text: None });
        prop_assert_eq!(out, format!("<{value}>"));
    }
}

/// A path into `payload`: mostly keys that exist, sometimes ones that do not.
fn paths_of(payload: &Map<String, Value>, picks: &[(usize, usize, bool)]) -> Vec<Vec<String>> {
    let keys: Vec<&String> = payload.keys().collect();
    picks
        .iter()
        .map(|(i, depth, missing)| {
            let mut path = Vec::new();
            let mut current: Option<&Value> = None;
            if let Some(k) = keys.get(i % keys.len().max(1)) {
                path.push((*k).clone());
                current = payload.get(*k);
            }
            for _ in 0..*depth {
                match current.and_then(Value::as_object) {
                    Some(obj) if !obj.is_empty() => {
                        let (k, v) = obj.iter().nth(i % obj.len()).unwrap();
                        path.push(k.clone());
                        current = Some(v);
                    }
                    _ => break,
                }
            }
            if *missing || path.is_empty() {
                path.push("zz".to_owned());
            }
            path
        })
        .collect()
}

proptest! {
    #[test]
    fn picked_payload_agrees_with_the_full_one_on_every_named_path(
        payload in arb_payload(),
        picks in proptest::collection::vec((0usize..50, 0usize..4, any::<bool>()), 0..6),
    ) {
        use herald_webhook::pick::PayloadPaths;
        let body = serde_json::to_vec(&payload).unwrap();
        let full: Map<String, Value> = serde_json::from_slice(&body).unwrap();
        let paths = paths_of(&full, &picks);
        let mut set = PayloadPaths::new();
        for p in &paths {
            set.add(p);
        }
        // Every JSON object body within herald's nesting limit can be picked.
        let picked = set.pick(&body).map(|p| p.payload);
        prop_assert!(picked.is_some(), "picker refused a JSON object body");
        let picked = picked.unwrap_or_default();
        for p in &paths {
            for len in 1..=p.len() {
                let prefix = &p[..len];
                if len < p.len() {
                    // A prefix is an object whose named children agree; compare those.
                    let (a, b) = (lookup(&full, prefix), lookup(&picked, prefix));
                    prop_assert_eq!(a.is_some(), b.is_some(), "{:?}", prefix);
                } else {
                    prop_assert_eq!(lookup(&full, prefix), lookup(&picked, prefix), "{:?}", prefix);
                }
            }
        }
        for key in ["event_type", "type", "object_kind"] {
            prop_assert_eq!(full.get(key), picked.get(key));
        }
    }

    #[test]
    fn the_payload_shown_whole_from_its_text_is_the_trees_rendering(
        payload in arb_payload(),
        cut in 0usize..3000,
    ) {
        let body = serde_json::to_vec_pretty(&payload).unwrap();
        let full: Map<String, Value> = serde_json::from_slice(&body).unwrap();
        let want = herald_webhook::pyjson::indented_object_cut(&full, cut);
        prop_assert_eq!(herald_webhook::raw_render::indented_cut(&body, cut), Some(want));
    }
}
