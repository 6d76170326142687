//! How deep a JSON text nests, found without building it.

/// The deepest nesting of `[`/`{` outside strings (0 when the text does not start
/// with one, so form data and JSON scalars are never counted).
pub fn nesting_depth(text: &[u8]) -> usize {
    let start = text
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
    if !matches!(start.map(|i| text[i]), Some(b'[' | b'{')) {
        return 0;
    }
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in text {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::nesting_depth;

    #[test]
    fn counts_brackets_outside_strings_only() {
        assert_eq!(nesting_depth(br#"{"a":[[1],{"b":"[[[["}]}"#), 3);
        assert_eq!(nesting_depth(br#"  [["\"[", 2]]"#), 2);
        assert_eq!(nesting_depth(b"\"[[[\""), 0);
        assert_eq!(
            nesting_depth(format!("a={}", "[".repeat(2000)).as_bytes()),
            0
        );
        assert_eq!(nesting_depth("[".repeat(400).as_bytes()), 400);
    }
}
