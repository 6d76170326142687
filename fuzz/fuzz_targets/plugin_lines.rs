//! Arbitrary bytes, split anywhere, as the plugin host's stdout and stderr: the reader
//! holds at most the bound plus what one read brings, a line over it is skipped whole
//! (the next line still comes), stderr lines are logged lossily, and every stdout line
//! is a message or a malformed frame: never a panic, never the end of the stream.
#![no_main]

use bytes::BytesMut;
use herald_jsonrpc::{Incoming, Line, LineCodec};
use libfuzzer_sys::fuzz_target;
use tokio_util::codec::Decoder;

const MAX: usize = 200;

fuzz_target!(|data: &[u8]| {
    let Some((&step, rest)) = data.split_first() else { return };
    let step = usize::from(step % 17) + 1;
    let mut codec = LineCodec::new(MAX);
    let mut buf = BytesMut::new();
    let mut lines = 0usize;
    for piece in rest.chunks(step) {
        buf.extend_from_slice(piece);
        while let Ok(Some(line)) = codec.decode(&mut buf) {
            lines += 1;
            let (Line::Frame(b) | Line::TooLong(b)) = &line;
            assert!(b.len() <= MAX);
            let logged = String::from_utf8_lossy(b);
            assert!(logged.len() <= 3 * MAX);
            if let Line::Frame(frame) = line {
                let _ = Incoming::read(&frame);
            }
        }
        assert!(buf.len() <= MAX + 1 + step, "held {} bytes", buf.len());
    }
    let newlines = rest.iter().filter(|b| **b == b'\n').count();
    assert_eq!(lines, newlines, "one line for each newline");
});
