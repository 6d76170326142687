//! An incremental Server-Sent Events decoder: bytes in any split, events out.
//!
//! Lines end with `\n`, `\r\n` or `\r`; `data:` lines of one event are joined with `\n`;
//! a blank line ends the event; comments (`:`) and other fields are skipped. An event
//! larger than the limit is an error, never unbounded memory.

/// Largest event accepted (1 MiB).
pub const MAX_EVENT_BYTES: usize = 1 << 20;

/// The decoder could not go on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    #[error("an SSE event is larger than {0} bytes")]
    TooLarge(usize),
}

/// Decodes a byte stream into the `data` of each event.
#[derive(Debug, Default)]
pub struct SseDecoder {
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    /// The previous byte was `\r`: a following `\n` belongs to the same line end.
    after_cr: bool,
    limit: usize,
}

impl SseDecoder {
    pub fn new() -> Self {
        SseDecoder {
            limit: MAX_EVENT_BYTES,
            ..Default::default()
        }
    }

    pub fn with_limit(limit: usize) -> Self {
        SseDecoder {
            limit,
            ..Default::default()
        }
    }

    /// Feeds bytes; returns the data of every event completed by them.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<String>, SseError> {
        let mut events = Vec::new();
        for &b in bytes {
            if self.after_cr {
                self.after_cr = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\n' => self.end_line(&mut events),
                b'\r' => {
                    self.after_cr = true;
                    self.end_line(&mut events);
                }
                _ => {
                    if self.line.len() + self.data.len() >= self.limit {
                        return Err(SseError::TooLarge(self.limit));
                    }
                    self.line.push(b);
                }
            }
        }
        Ok(events)
    }

    /// Ends the stream: an event without its final blank line is still delivered.
    pub fn finish(&mut self) -> Vec<String> {
        let mut events = Vec::new();
        if !self.line.is_empty() {
            self.end_line(&mut events);
        }
        self.dispatch(&mut events);
        events
    }

    fn end_line(&mut self, events: &mut Vec<String>) {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            self.dispatch(events);
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (field, value) = match line.iter().position(|b| *b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (&line[..], &[][..]),
        };
        if field == b"data" {
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
        }
    }

    fn dispatch(&mut self, events: &mut Vec<String>) {
        if self.has_data {
            events.push(String::from_utf8_lossy(&self.data).into_owned());
        }
        self.data.clear();
        self.has_data = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_lines_and_comments() {
        let mut d = SseDecoder::new();
        let out = d
            .feed(
                b": keep-alive\n\ndata: {\"a\":1}\n\ndata: x\ndata: y\r\n\r\nevent: e\rdata:z\r\r",
            )
            .unwrap();
        assert_eq!(out, vec!["{\"a\":1}", "x\ny", "z"]);
        assert_eq!(d.feed(b"data: [DONE]").unwrap(), Vec::<String>::new());
        assert_eq!(d.finish(), vec!["[DONE]"]);
    }

    #[test]
    fn limit() {
        let mut d = SseDecoder::with_limit(10);
        assert_eq!(d.feed(b"data: 0123456789\n"), Err(SseError::TooLarge(10)));
    }
}
