//! Arbitrary bytes through `herald acp`'s line reader: each line goes to the SDK as text
//! exactly when it is UTF-8 within the bound, and every other line is answered with a
//! JSON-RPC error (-32700 not UTF-8, -32600 too long); nothing panics.
#![no_main]

use bytes::BytesMut;
use herald_acp::stdio_lines::refusal;
use herald_jsonrpc::{Line, LineCodec};
use libfuzzer_sys::fuzz_target;
use tokio_util::codec::Decoder;

const MAX: usize = 128;

fuzz_target!(|data: &[u8]| {
    let mut codec = LineCodec::new(MAX);
    let mut buf = BytesMut::from(data);
    while let Ok(Some(line)) = codec.decode(&mut buf) {
        let utf8 = match &line {
            Line::Frame(b) => std::str::from_utf8(b).ok().map(str::to_owned),
            Line::TooLong(_) => None,
        };
        let too_long = matches!(line, Line::TooLong(_));
        match refusal(line) {
            Ok(text) => assert_eq!(Some(text), utf8),
            Err(answer) => {
                assert!(utf8.is_none());
                let v: serde_json::Value = serde_json::from_str(&answer).unwrap();
                let code = v["error"]["code"].as_i64();
                assert_eq!(code, Some(if too_long { -32600 } else { -32700 }), "{v}");
                assert!(v["id"].is_null());
            }
        }
    }
});
