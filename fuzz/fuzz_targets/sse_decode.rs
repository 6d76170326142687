//! Arbitrary bytes fed to the SSE decoder in arbitrary pieces: it never panics, and the
//! events are the same whatever the split.
#![no_main]

use herald_llm::sse::SseDecoder;
use libfuzzer_sys::fuzz_target;

fn decode(data: &[u8], step: usize) -> Result<Vec<String>, ()> {
    let mut d = SseDecoder::with_limit(4096);
    let mut out = Vec::new();
    for piece in data.chunks(step.max(1)) {
        out.extend(d.feed(piece).map_err(|_| ())?);
    }
    out.extend(d.finish());
    Ok(out)
}

fuzz_target!(|data: &[u8]| {
    let Some((&step, rest)) = data.split_first() else { return };
    let whole = decode(rest, rest.len().max(1));
    let pieces = decode(rest, step as usize % 7 + 1);
    assert_eq!(whole, pieces);
});
