//! Pure webhook logic: signature schemes, event type and delivery id, body parsing,
//! declarative filters and prompt templates.
//!
//! No sockets, no async runtime: every function here is a plain function of its inputs
//! (time comes in through [`verify::Clock`]), so it can be unit-tested, property-tested,
//! fuzzed and benchmarked on its own. The only file access is the mtime-cached `in_file`
//! list loader.

pub mod event;
pub mod filter;
pub mod json_text;
pub mod pick;
pub mod pyjson;
pub mod quoted;
pub mod raw_render;
pub mod sender;
pub mod template;
pub mod verify;

pub use event::{ParseError, delivery_id, event_allowed, event_type, parse_body};
pub use filter::{CompiledFilter, FileListCache, FilterInput, FilterIssue, ListLoader};
pub use template::{RenderContext, Template};
pub use verify::{Clock, FixedClock, SignatureScheme, SystemClock, VerifyError, verify};
