//! How an inbox entry's payload is kept: compressed (LZ4 block, its length in front)
//! when that makes it clearly smaller, as plain text otherwise.
//!
//! Payloads are most of what an accepted event writes, and webhook JSON compresses
//! well (GitHub's 2 KB `pull_request` example to 1,088 bytes), so the WAL, the
//! checkpoint and the fsync each move about half as many pages. The column's SQLite type tells the two apart: TEXT is the payload
//! as received (every row of older stores), BLOB is compressed.

use rusqlite::types::{Value, ValueRef};

/// Payloads shorter than this are stored as they are.
const MIN_COMPRESS: usize = 256;
/// The most an LZ4 block can expand (a long run of one byte), used to refuse a
/// corrupt length prefix before allocating for it.
const MAX_RATIO: usize = 255;

/// The column value for a payload, compressed when that saves at least an eighth.
pub(crate) fn encode(text: String) -> Value {
    match pack(&text) {
        Some(packed) => Value::Blob(packed),
        None => Value::Text(text),
    }
}

/// The payload compressed, when that makes it clearly smaller (else it is kept as
/// received). Every backend keeps payloads this way.
pub fn pack(text: &str) -> Option<Vec<u8>> {
    if text.len() >= MIN_COMPRESS {
        let packed = lz4_flex::block::compress_prepend_size(text.as_bytes());
        if packed.len() <= text.len() - text.len() / 8 {
            return Some(packed);
        }
    }
    None
}

/// A payload [`pack`] compressed, back as text (a damaged one is described).
pub fn unpack_text(blob: &[u8]) -> String {
    unpack(blob).unwrap_or_else(|why| format!("<unreadable payload: {why}>"))
}

/// The payload text of a stored column value. A blob that does not decompress to
/// UTF-8 (a damaged file) is described instead of failing the whole read.
pub(crate) fn decode(value: ValueRef<'_>) -> String {
    match value {
        ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
        ValueRef::Blob(b) => unpack_text(b),
        ValueRef::Null => String::new(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(r) => r.to_string(),
    }
}

fn unpack(blob: &[u8]) -> Result<String, String> {
    let claimed = blob
        .get(..4)
        .and_then(|p| <[u8; 4]>::try_from(p).ok())
        .map(u32::from_le_bytes)
        .ok_or("shorter than its length prefix")? as usize;
    if claimed > blob.len().saturating_mul(MAX_RATIO) {
        return Err(format!(
            "length prefix {claimed} is impossible for {} bytes",
            blob.len()
        ));
    }
    let bytes = lz4_flex::block::decompress_size_prepended(blob).map_err(|e| e.to_string())?;
    String::from_utf8(bytes).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(text: &str) -> String {
        match encode(text.to_owned()) {
            Value::Text(t) => decode(ValueRef::Text(t.as_bytes())),
            Value::Blob(b) => decode(ValueRef::Blob(&b)),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn payloads_come_back_as_stored() {
        let json = format!(
            "{{\"pull_request\":{{\"title\":\"héllo ✓\",\"body\":\"{}\"}}}}",
            "ab".repeat(400)
        );
        assert!(matches!(encode(json.clone()), Value::Blob(_)));
        assert_eq!(round_trip(&json), json);
        assert!(matches!(encode("{\"a\":1}".into()), Value::Text(_)));
        assert_eq!(round_trip("{\"a\":1}"), "{\"a\":1}");
        // Incompressible text stays text.
        let mut x = 0x2545_f491_u32;
        let noise: String = (0..600)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                char::from(b'!' + (x % 90) as u8)
            })
            .collect();
        assert!(matches!(encode(noise.clone()), Value::Text(_)));
        assert_eq!(round_trip(&noise), noise);
    }

    #[test]
    fn damaged_blobs_are_described_not_fatal() {
        for blob in [
            &b""[..],
            b"\x01",
            b"\xff\xff\xff\x7fabc",
            b"\x10\x00\x00\x00garbage!",
        ] {
            assert!(
                decode(ValueRef::Blob(blob)).starts_with("<unreadable payload"),
                "{blob:?}"
            );
        }
    }
}
