//! Arbitrary bytes, split anywhere, through `herald rpc`'s framing (the bounded line
//! codec) and its frame parser and every method's params: the frames are the same
//! whatever the split, none is over the bound, every frame is a request or the JSON-RPC
//! error to answer with (a code of the spec), every params type reads from any request's
//! params, and nothing panics.
#![no_main]

use bytes::BytesMut;
use herald_jsonrpc::{Line, LineCodec};
use herald_rpc::frame;
use herald_rpc::params;
use libfuzzer_sys::fuzz_target;
use tokio_util::codec::Decoder;

const MAX: usize = 256;

/// The lines of `data` fed `step` bytes at a time; the codec never holds much more
/// than the bound.
fn lines(data: &[u8], step: usize) -> Vec<Line> {
    let mut codec = LineCodec::new(MAX);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for piece in data.chunks(step.max(1)) {
        buf.extend_from_slice(piece);
        while let Ok(Some(line)) = codec.decode(&mut buf) {
            out.push(line);
        }
        assert!(buf.len() <= MAX + 1 + step, "held {} bytes", buf.len());
    }
    out
}

/// Every method's params read from any object: the lenient rules leave no error.
fn all_params_read(p: &serde_json::Value) {
    fn reads<T: serde::de::DeserializeOwned>(p: &serde_json::Value, name: &str) {
        if let Err(e) = params::try_read::<T>(p) {
            panic!("{name} params did not read from {p}: {e}");
        }
    }
    reads::<params::Target>(p, "target");
    reads::<params::Create>(p, "create");
    reads::<params::Resume>(p, "resume");
    reads::<params::Stored>(p, "stored");
    reads::<params::List>(p, "list");
    reads::<params::Title>(p, "title");
    reads::<params::Prompt>(p, "prompt");
    reads::<params::Branch>(p, "branch");
    reads::<params::Compress>(p, "compress");
    reads::<params::Approval>(p, "approval");
    reads::<params::Answer>(p, "answer");
    reads::<params::Command>(p, "command");
    reads::<params::Config>(p, "config");
    reads::<params::Models>(p, "models");
    reads::<params::CliExec>(p, "cli_exec");
    reads::<params::Attach>(p, "attach");
    reads::<params::Subagent>(p, "subagent");
    reads::<params::SpawnTree>(p, "spawn_tree");
    reads::<params::Resize>(p, "resize");
}

fuzz_target!(|data: &[u8]| {
    let Some((&step, rest)) = data.split_first() else { return };
    let whole = lines(rest, rest.len().max(1));
    let split = lines(rest, usize::from(step % 13) + 1);
    assert_eq!(whole, split);
    for line in whole {
        let bytes = match line {
            Line::Frame(b) => b,
            Line::TooLong(head) => {
                assert!(head.len() <= MAX);
                continue;
            }
        };
        assert!(bytes.len() <= MAX);
        match frame::parse(&bytes) {
            Ok(request) => {
                assert!(!request.method.is_empty());
                all_params_read(&serde_json::Value::Object(request.params));
            }
            Err(refused) => {
                let (_, error) = *refused;
                assert!(matches!(error.code, -32700 | -32600 | -32602), "{error:?}");
            }
        }
    }
});
