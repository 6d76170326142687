//! One bounded byte-line codec: each `\n`-ended line (a `\r` before it dropped) is one
//! frame of bytes, decoded by its reader. A line longer than the bound is read to its
//! end without being kept (its first [`HEAD`] bytes are, for a log) and comes out as
//! [`Line::TooLong`]; the stream goes on. Bytes that are not UTF-8 are just bytes here.

use bytes::{Buf, BytesMut};
use tokio_util::codec::Decoder;

/// How much of a line over the bound is kept.
pub const HEAD: usize = 4096;

/// One frame read.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A line within the bound, without its line end.
    Frame(BytesMut),
    /// A line over the bound: its first bytes (up to the bound, at most [`HEAD`]).
    TooLong(BytesMut),
}

/// Frames lines of at most `max` bytes.
#[derive(Debug)]
pub struct LineCodec {
    max: usize,
    /// Where the search for `\n` goes on in the buffer.
    scanned: usize,
    /// The start of a line over the bound, whose rest is being skipped.
    skipping: Option<BytesMut>,
}

impl LineCodec {
    pub fn new(max: usize) -> LineCodec {
        LineCodec {
            max,
            scanned: 0,
            skipping: None,
        }
    }

    fn head(&self) -> usize {
        self.max.min(HEAD)
    }

    /// The line in `buf` up to `end` (its `\n`), taken off the buffer.
    fn take(&mut self, buf: &mut BytesMut, end: usize) -> Line {
        self.scanned = 0;
        if let Some(head) = self.skipping.take() {
            buf.advance(end + 1);
            return Line::TooLong(head);
        }
        if end > self.max {
            let head = buf.split_to(self.head());
            buf.advance(end + 1 - head.len());
            return Line::TooLong(head);
        }
        let mut line = buf.split_to(end + 1);
        line.truncate(end);
        if line.last() == Some(&b'\r') {
            line.truncate(end - 1);
        }
        Line::Frame(line)
    }
}

impl Decoder for LineCodec {
    type Item = Line;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Line>, std::io::Error> {
        if let Some(at) = buf[self.scanned..].iter().position(|b| *b == b'\n') {
            let end = self.scanned + at;
            return Ok(Some(self.take(buf, end)));
        }
        match &mut self.skipping {
            Some(_) => buf.clear(),
            None if buf.len() > self.max => {
                self.skipping = Some(buf.split_to(self.head()));
                buf.clear();
            }
            None => {}
        }
        self.scanned = buf.len();
        Ok(None)
    }

    /// A last line without its `\n` is a frame too.
    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Line>, std::io::Error> {
        if let Some(line) = self.decode(buf)? {
            return Ok(Some(line));
        }
        self.scanned = 0;
        if let Some(head) = self.skipping.take() {
            buf.clear();
            return Ok(Some(Line::TooLong(head)));
        }
        if buf.is_empty() {
            return Ok(None);
        }
        let end = buf.len();
        buf.extend_from_slice(b"\n");
        Ok(Some(self.take(buf, end)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(chunks: &[&[u8]], max: usize) -> Vec<Line> {
        let mut codec = LineCodec::new(max);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for chunk in chunks {
            buf.extend_from_slice(chunk);
            while let Some(line) = codec.decode(&mut buf).unwrap() {
                out.push(line);
            }
        }
        while let Some(line) = codec.decode_eof(&mut buf).unwrap() {
            out.push(line);
        }
        out
    }

    fn frame(b: &[u8]) -> Line {
        Line::Frame(BytesMut::from(b))
    }

    #[test]
    fn lines_are_framed_whatever_the_chunks_and_a_long_one_is_one_bad_frame() {
        assert_eq!(
            all(&[b"ab", b"c\r\n\xff\xfe\nlast"], 8),
            vec![frame(b"abc"), frame(b"\xff\xfe"), frame(b"last")]
        );
        let long = all(&[b"0123456789", b"abcdef", b"ghi\nok\n"], 4);
        assert_eq!(
            long,
            vec![Line::TooLong(BytesMut::from(&b"0123"[..])), frame(b"ok")]
        );
        assert_eq!(
            all(&[b"0123456789\nok\n"], 4),
            vec![Line::TooLong(BytesMut::from(&b"0123"[..])), frame(b"ok")]
        );
        assert_eq!(all(&[b"0123456789"], 4).len(), 1, "too long at the end");
        assert_eq!(
            all(&[b"1234\n"], 4),
            vec![frame(b"1234")],
            "the bound itself fits"
        );
        assert_eq!(all(&[b"\n\n"], 4), vec![frame(b""), frame(b"")]);
        assert!(all(&[b""], 4).is_empty());
    }
}
