//! JSON-RPC 2.0 over lines, as herald speaks it: to the Hermes TUI (`herald rpc`) and
//! to the Python plugin host. [`envelope`] reads and writes the messages; [`lines`]
//! frames them, one bounded line of bytes each, so that a line too long or not UTF-8
//! is one bad frame and never the end of the stream.

pub mod envelope;
pub mod lines;

pub use envelope::{ErrorObject, Incoming, Malformed, error, notification, request, response};
pub use lines::{Line, LineCodec};
