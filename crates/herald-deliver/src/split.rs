//! Splitting long messages into the parts a platform accepts, in order, preferring line
//! breaks, with a ` (i/n)` suffix on each part when there is more than one.

/// Telegram's limit, in UTF-16 code units.
pub const TELEGRAM_MAX_UTF16: usize = 4096;
/// Discord's limit, in characters.
pub const DISCORD_MAX_CHARS: usize = 2000;
/// Slack's recommended limit for `text`, in characters.
pub const SLACK_MAX_CHARS: usize = 4000;

/// Room kept for the ` (i/n)` suffix.
const SUFFIX_ROOM: usize = 16;

/// Splits `text` so that every part, suffix included, measures at most `max` by `len`.
pub fn split_message(text: &str, max: usize, len: fn(&str) -> usize) -> Vec<String> {
    if len(text) <= max {
        return vec![text.to_owned()];
    }
    let budget = max.saturating_sub(SUFFIX_ROOM).max(1);
    let mut parts = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        if len(rest) <= budget {
            parts.push(rest.to_owned());
            break;
        }
        // The longest prefix within budget, on a char boundary.
        let mut end = 0;
        let mut used = 0;
        for (i, c) in rest.char_indices() {
            let w = len(&rest[i..i + c.len_utf8()]);
            if used + w > budget {
                break;
            }
            used += w;
            end = i + c.len_utf8();
        }
        let end = end.max(rest.chars().next().map_or(1, char::len_utf8));
        // Prefer to break after a newline, else after a space, in the second half.
        let cut = rest[..end]
            .rfind('\n')
            .or_else(|| rest[..end].rfind(' '))
            .map(|i| i + 1)
            .filter(|i| *i > end / 2)
            .unwrap_or(end);
        parts.push(rest[..cut].to_owned());
        rest = &rest[cut..];
    }
    let n = parts.len();
    parts
        .into_iter()
        .enumerate()
        .map(|(i, p)| format!("{} ({}/{n})", p.trim_end(), i + 1))
        .collect()
}

/// Length in UTF-16 code units (Telegram counts this way).
pub fn utf16_len(s: &str) -> usize {
    s.encode_utf16().count()
}

/// Length in Unicode characters.
pub fn char_len(s: &str) -> usize {
    s.chars().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_one_part() {
        assert_eq!(split_message("hi", 10, char_len), vec!["hi"]);
    }

    #[test]
    fn long_text_splits_in_order_within_limits() {
        let text: String = (0..500).map(|i| format!("line {i}\n")).collect();
        let parts = split_message(&text, 200, char_len);
        assert!(parts.len() > 1);
        for (i, p) in parts.iter().enumerate() {
            assert!(char_len(p) <= 200, "{p}");
            assert!(p.ends_with(&format!(" ({}/{})", i + 1, parts.len())));
        }
        let joined: String = parts
            .iter()
            .map(|p| p.rsplit_once(" (").unwrap().0.to_owned())
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(
            joined.split_whitespace().collect::<Vec<_>>(),
            text.split_whitespace().collect::<Vec<_>>()
        );
    }

    #[test]
    fn utf16_counts_astral_as_two() {
        let text = "😀".repeat(3000);
        let parts = split_message(&text, TELEGRAM_MAX_UTF16, utf16_len);
        assert_eq!(parts.len(), 2);
        assert!(parts.iter().all(|p| utf16_len(p) <= TELEGRAM_MAX_UTF16));
    }
}
