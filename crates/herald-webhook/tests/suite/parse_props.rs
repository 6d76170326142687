//! Body parsing: the allocation-free validation gives exactly the answer of the full parse.
use herald_webhook::event::{parse_body, validate_body};
use herald_webhook::pick::PayloadPaths;
use proptest::prelude::*;

fn jsonish() -> impl Strategy<Value = Vec<u8>> {
    let atoms = prop_oneof![
        Just("{".to_owned()),
        Just("}".to_owned()),
        Just("[".to_owned()),
        Just("]".to_owned()),
        Just(",".to_owned()),
        Just(":".to_owned()),
        Just("\"k\"".to_owned()),
        Just("1".to_owned()),
        Just("-0.5e3".to_owned()),
        Just("true".to_owned()),
        Just("null".to_owned()),
        Just(" ".to_owned()),
        Just("\"\\ud800\"".to_owned()),
        Just("\"\\u00e9\"".to_owned()),
        Just("\"\\x\"".to_owned()),
        Just("a=b&".to_owned()),
        Just("\u{1}".to_owned()),
        Just("é".to_owned()),
        Just("\"\n\"".to_owned()),
    ];
    prop_oneof![
        proptest::collection::vec(atoms, 0..12).prop_map(|v| v.concat().into_bytes()),
        proptest::collection::vec(any::<u8>(), 0..40),
    ]
}

proptest! {
    #[test]
    fn pick_succeeds_only_for_json_objects(body in jsonish()) {
        let picked = PayloadPaths::new().pick(&body);
        if picked.is_some() {
            let full = serde_json::from_slice::<serde_json::Value>(&body);
            prop_assert!(matches!(full, Ok(serde_json::Value::Object(_))), "{:?}", String::from_utf8_lossy(&body));
        }
    }

    #[test]
    fn validate_agrees_with_parse(body in jsonish(), json_ct in any::<bool>()) {
        let ct: Option<&[u8]> = if json_ct { Some(b"application/json") } else { None };
        prop_assert_eq!(validate_body(&body, ct), parse_body(&body, ct).map(|_| ()));
    }
}

#[test]
fn known_cases_agree() {
    for body in [
        &b"5"[..],
        b" {\"a\":1} ",
        b"{\"a\":\"\\ud800\"}",
        b"[1]",
        b"\"s\"",
        b"{",
        b"a=1",
        b"\xff",
        b"{\"a\":\"\xff\"}",
        b"",
        b"1e999999",
        format!("{{\"a\": {}{}}}", "[".repeat(200), "]".repeat(200)).as_bytes(),
    ] {
        for ct in [None, Some(&b"application/json"[..])] {
            assert_eq!(
                validate_body(body, ct),
                parse_body(body, ct).map(|_| ()),
                "{:?}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
