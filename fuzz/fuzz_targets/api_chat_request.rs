//! Arbitrary bodies through the chat completions request reader: it never panics, a
//! refusal is a 4xx in the OpenAI envelope, and a `messages` list over the cap is
//! refused before it is parsed.
#![no_main]

use herald_api::readers::check_chat_completion;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte sets the cap, so small bodies reach it too.
    let Some((&cap, body)) = data.split_first() else { return };
    let cap = usize::from(cap % 8);
    if let Err(e) = check_chat_completion(body, cap) {
        assert!(e.status.is_client_error(), "{e:?}");
        assert!(!e.message.is_empty());
        let envelope = e.body();
        assert!(envelope["error"]["type"].is_string(), "{envelope}");
    }
});
