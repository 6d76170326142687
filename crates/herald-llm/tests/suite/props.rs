//! Any split of an SSE byte stream decodes to the same events; tool calls assemble the
//! same whatever the fragmentation of their arguments.

use herald_llm::Assembler;
use herald_llm::sse::SseDecoder;
use herald_protocol::{ChatChunk, ChunkChoice, Delta, FunctionDelta, ToolCallDelta};
use proptest::prelude::*;

fn decode_all(stream: &[u8], cuts: &[usize]) -> Vec<String> {
    let mut d = SseDecoder::new();
    let mut out = Vec::new();
    let mut last = 0;
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
    points.sort_unstable();
    for p in points {
        out.extend(d.feed(&stream[last..p]).unwrap());
        last = p;
    }
    out.extend(d.feed(&stream[last..]).unwrap());
    out.extend(d.finish());
    out
}

fn event_text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9{}\":, é😀]{0,40}"
}

proptest! {
    #[test]
    fn any_split_decodes_the_same(events in proptest::collection::vec(event_text(), 0..8), eol in 0usize..3, cuts in proptest::collection::vec(any::<usize>(), 0..12)) {
        let nl = ["\n", "\r\n", "\r"][eol];
        let mut stream = String::from(": comment");
        stream.push_str(nl);
        for e in &events {
            stream.push_str(&format!("data: {e}{nl}{nl}"));
        }
        let whole = decode_all(stream.as_bytes(), &[]);
        prop_assert_eq!(&whole, &events);
        prop_assert_eq!(decode_all(stream.as_bytes(), &cuts), events);
    }

    #[test]
    fn tool_call_arguments_assemble_whatever_the_fragments(args in "[a-z0-9\":{}, ]{0,60}", cuts in proptest::collection::vec(any::<usize>(), 0..8), second in any::<bool>()) {
        let mut points: Vec<usize> = cuts.iter().map(|c| c % (args.len() + 1)).collect();
        points.push(0);
        points.push(args.len());
        points.sort_unstable();
        points.dedup();
        let mut a = Assembler::new();
        let call = |index: u32, id: Option<&str>, name: Option<&str>, frag: Option<&str>| ChatChunk {
            choices: vec![ChunkChoice {
                index: 0,
                delta: Delta {
                    tool_calls: vec![ToolCallDelta {
                        index,
                        id: id.map(str::to_owned),
                        function: Some(FunctionDelta { name: name.map(str::to_owned), arguments: frag.map(str::to_owned) }),
                    }],
                    ..Default::default()
                },
                finish_reason: None,
            }],
            ..Default::default()
        };
        a.push(call(0, Some("call_a"), Some("terminal"), None));
        if second {
            a.push(call(1, Some("call_b"), Some("read_file"), Some("{}")));
        }
        for w in points.windows(2) {
            a.push(call(0, None, None, Some(&args[w[0]..w[1]])));
        }
        let done = a.finish("m");
        let calls = &done.choices[0].message.tool_calls;
        prop_assert_eq!(calls.len(), if second { 2 } else { 1 });
        prop_assert_eq!(&calls[0].id, "call_a");
        prop_assert_eq!(&calls[0].function.name, "terminal");
        let want = if args.is_empty() { "{}".to_owned() } else { args.clone() };
        prop_assert_eq!(&calls[0].function.arguments, &want);
        if second {
            prop_assert_eq!(&calls[1].function.name, "read_file");
        }
    }
}
