//! Arbitrary bodies through the responses request reader (the body, then its `input`):
//! it never panics, and a refusal is a 4xx in the OpenAI envelope.
#![no_main]

use herald_api::readers::check_response;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&cap, body)) = data.split_first() else { return };
    let cap = usize::from(cap % 8);
    if let Err(e) = check_response(body, cap) {
        assert!(e.status.is_client_error(), "{e:?}");
        assert!(e.body()["error"]["message"].is_string());
    }
});
