//! Splitting Telegram HTML (as [`crate::telegram_html`] writes it) into messages Telegram
//! accepts, and the plain-text fallback.
//!
//! Telegram limits a message to [`crate::split::TELEGRAM_MAX_UTF16`] UTF-16 code units of
//! text *after entity parsing*: tags do not count, `&amp;` counts as one character, an
//! astral character (most emoji) as two.
//!
//! The HTML is read leniently and never makes this panic: a `<` that does not start a tag
//! and a `&` that does not start one of `&lt; &gt; &amp; &quot;` or a numeric entity are
//! text (and are written back escaped); a closing tag that matches nothing is dropped; a
//! closing tag closes whatever was opened inside its element.

/// Room kept for the ` (i/n)` suffix, as in [`crate::split::split_message`].
const SUFFIX_ROOM: usize = 16;
/// Longest tag considered, in bytes; a longer `<...` is text.
const MAX_TAG_BYTES: usize = 16 * 1024;

/// Visible length of `html` as Telegram counts it: UTF-16 code units of the text after
/// entity parsing (tags count 0, an entity counts as the character it stands for).
pub fn telegram_text_len(html: &str) -> usize {
    tokenize(html).iter().map(Token::weight).sum()
}

/// The visible text of `html`: tags removed, entities decoded. For when Telegram refuses
/// the formatting: send this without `parse_mode`, split with
/// [`crate::split::split_message`] and [`crate::split::utf16_len`]. Link targets are
/// not kept (only the link text is).
pub fn html_to_plain(html: &str) -> String {
    tokenize(html)
        .iter()
        .filter_map(|t| match t {
            Token::Text { ch, .. } => Some(*ch),
            _ => None,
        })
        .collect()
}

/// Splits Telegram HTML into messages of at most `max` visible UTF-16 units each
/// (see [`telegram_text_len`]), every one well-formed on its own.
///
/// Contract:
/// - Visible text that is empty or only whitespace gives no message at all (`vec![]`).
/// - If the whole text fits in `max`, the result is one message: the input re-written
///   with tags balanced, trailing whitespace removed and nothing else changed.
/// - Otherwise every part carries a ` (i/n)` suffix after its last closing tag (outside
///   every tag), counted in `max`: the text of a part is at most `max - 16` units. (When
///   `max <= 16` there is no suffix and parts hold at most `max` units; a single character
///   wider than the budget, e.g. an emoji with a budget of 1, still makes its own part.)
/// - A part ends, in order of preference, at the last blank line (paragraph break) in the
///   second half of the budget, else the last line break in the second half, else the
///   last whitespace anywhere in the budget, else it is cut hard at the budget, between
///   two characters (never inside a character, an entity or a tag).
/// - At a cut on whitespace, the whitespace at the cut is dropped: the part ends before it
///   (trailing whitespace of a part is trimmed), and the next part starts after the last
///   line break of that whitespace (so indentation of the next line, e.g. in code, is
///   kept), or after all of it when it holds no line break. A hard cut drops nothing. So
///   the visible texts of the parts, suffixes removed, joined with whitespace-only (empty
///   at hard cuts) separators, give back the visible text of the input, except that
///   trailing whitespace at the very end is dropped.
/// - Tags open at a cut are closed at the end of the part and re-opened, with the same
///   attributes (`<pre><code class="language-rust">`, `<a href="...">`), at the start
///   of the next. An element left with no text in a part is dropped from that part. No
///   part is empty.
pub fn split_telegram_html(html: &str, max: usize) -> Vec<String> {
    let tokens = tokenize(html);
    let total: usize = tokens.iter().map(Token::weight).sum();
    let (budget, suffix) = if total <= max {
        (usize::MAX, false)
    } else if max > SUFFIX_ROOM {
        (max - SUFFIX_ROOM, true)
    } else {
        (max.max(1), false)
    };
    let mut parts = Vec::new();
    let mut stack: Vec<OpenTag<'_>> = Vec::new();
    let mut start = 0;
    while start < tokens.len() {
        let cut = next_cut(&tokens, start, budget);
        if let Some(part) = write_part(&tokens, start, cut.end, &stack) {
            parts.push(part);
        }
        for token in tokens.get(start..cut.next).unwrap_or(&[]) {
            apply_tag(&mut stack, token);
        }
        start = cut.next.max(start + 1);
    }
    let n = parts.len();
    if suffix && n > 1 {
        for (i, part) in parts.iter_mut().enumerate() {
            part.push_str(&format!(" ({}/{n})", i + 1));
        }
    }
    parts
}

/// One piece of the HTML.
#[derive(Debug, Clone, Copy)]
enum Token<'a> {
    /// `<name ...>`, written back as `raw`.
    Open { name: &'a str, raw: &'a str },
    /// `</name>`.
    Close { name: &'a str },
    /// `<name ... />`, written back as is, opens nothing.
    Void { raw: &'a str },
    /// One visible character: a literal character or an entity (`raw`) standing for `ch`.
    Text { raw: &'a str, ch: char },
}

impl Token<'_> {
    /// The UTF-16 units this token counts for.
    fn weight(&self) -> usize {
        match self {
            Token::Text { ch, .. } => ch.len_utf16(),
            _ => 0,
        }
    }

    /// Whether this is a literal whitespace character (a break opportunity).
    fn is_space(&self) -> bool {
        matches!(self, Token::Text { raw, .. } if matches!(*raw, " " | "\t" | "\n" | "\r"))
    }

    /// Whether this is visible text other than literal whitespace.
    fn is_solid(&self) -> bool {
        matches!(self, Token::Text { .. }) && !self.is_space()
    }
}

/// Splits `html` into tags, entities and characters.
fn tokenize(html: &str) -> Vec<Token<'_>> {
    let mut tokens = Vec::new();
    let mut i = 0;
    while let Some(rest) = html.get(i..) {
        let Some(first) = rest.chars().next() else {
            break;
        };
        let parsed = match first {
            '<' => parse_tag(rest),
            '&' => parse_entity(rest),
            _ => None,
        };
        let (token, len) = parsed.unwrap_or((
            Token::Text {
                raw: rest.get(..first.len_utf8()).unwrap_or(""),
                ch: first,
            },
            first.len_utf8(),
        ));
        tokens.push(token);
        i += len.max(1);
    }
    tokens
}

/// Parses a tag at the start of `rest` (which starts with `<`): `<name attr="v">`,
/// `</name>` or `<name/>`. Quoted attribute values may contain `>`.
fn parse_tag(rest: &str) -> Option<(Token<'_>, usize)> {
    let bytes = rest.as_bytes();
    let closing = bytes.get(1) == Some(&b'/');
    let name_start = if closing { 2 } else { 1 };
    let name_len = bytes
        .get(name_start..)?
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || **b == b'-')
        .count();
    if name_len == 0 || !bytes.get(name_start)?.is_ascii_alphabetic() {
        return None;
    }
    let after_name = name_start + name_len;
    if !matches!(
        bytes.get(after_name),
        Some(b' ' | b'\t' | b'\n' | b'>' | b'/')
    ) {
        return None;
    }
    let end = tag_end(bytes, after_name)?;
    let raw = rest.get(..=end)?;
    let name = rest.get(name_start..after_name)?;
    let token = if closing {
        Token::Close { name }
    } else if raw.ends_with("/>") {
        Token::Void { raw }
    } else {
        Token::Open { name, raw }
    };
    Some((token, end + 1))
}

/// The index of the `>` ending a tag whose attributes start at `from` (outside quotes).
fn tag_end(bytes: &[u8], from: usize) -> Option<usize> {
    let mut quote: Option<u8> = None;
    for (k, b) in bytes.iter().enumerate().skip(from).take(MAX_TAG_BYTES) {
        match (quote, *b) {
            (Some(q), b) if b == q => quote = None,
            (Some(_), _) => {}
            (None, b'"' | b'\'') => quote = Some(*b),
            (None, b'>') => return Some(k),
            (None, b'<') => return None,
            (None, _) => {}
        }
    }
    None
}

/// Parses an entity Telegram knows at the start of `rest` (which starts with `&`):
/// `&lt;`, `&gt;`, `&amp;`, `&quot;`, `&#123;` or `&#x1F600;`.
fn parse_entity(rest: &str) -> Option<(Token<'_>, usize)> {
    let semi = rest.bytes().take(12).position(|b| b == b';')?;
    let body = rest.get(1..semi)?;
    let ch = match body {
        "lt" => '<',
        "gt" => '>',
        "amp" => '&',
        "quot" => '"',
        _ => numeric_entity(body)?,
    };
    Some((
        Token::Text {
            raw: rest.get(..=semi)?,
            ch,
        },
        semi + 1,
    ))
}

/// The character of a numeric entity body (`#123` or `#x7B`).
fn numeric_entity(body: &str) -> Option<char> {
    let num = body.strip_prefix('#')?;
    let (digits, radix) = match num.strip_prefix(['x', 'X']) {
        Some(hex) => (hex, 16),
        None => (num, 10),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    char::from_u32(u32::from_str_radix(digits, radix).ok()?).filter(|c| *c != '\0')
}

/// An element open at some point: its name and its opening tag as written.
#[derive(Debug, Clone, Copy)]
struct OpenTag<'a> {
    name: &'a str,
    raw: &'a str,
}

/// Updates the stack of open elements for `token` (a closing tag closes its element and
/// everything opened inside it; an unmatched one changes nothing).
fn apply_tag<'a>(stack: &mut Vec<OpenTag<'a>>, token: &Token<'a>) {
    match token {
        Token::Open { name, raw } => stack.push(OpenTag { name, raw }),
        Token::Close { name } => {
            if let Some(p) = stack
                .iter()
                .rposition(|t| t.name.eq_ignore_ascii_case(name))
            {
                stack.truncate(p);
            }
        }
        _ => {}
    }
}

/// Where a part ends: it holds `tokens[start..end]`, the next starts at `next`.
#[derive(Debug, Clone, Copy)]
struct Cut {
    end: usize,
    next: usize,
}

/// Chooses where the part starting at `start` ends (see [`split_telegram_html`]).
fn next_cut(tokens: &[Token<'_>], start: usize, budget: usize) -> Cut {
    let half = budget / 2;
    let mut used = 0;
    let mut seen_solid = false;
    let mut prev_space = false;
    // Latest cut at a blank line, at a line break (both in the second half), anywhere.
    let mut best: [Option<Cut>; 3] = [None; 3];
    for (j, token) in tokens.iter().enumerate().skip(start) {
        if !matches!(token, Token::Text { .. }) {
            continue;
        }
        let space = token.is_space();
        if space && !prev_space && seen_solid {
            let (cut, newlines) = separator(tokens, j);
            if newlines >= 2 && used >= half {
                best[0] = Some(cut);
            }
            if newlines >= 1 && used >= half {
                best[1] = Some(cut);
            }
            best[2] = Some(cut);
        }
        let weight = token.weight();
        if used + weight > budget {
            let hard = if used == 0 { j + 1 } else { j };
            let fallback = Cut {
                end: hard,
                next: hard,
            };
            return best.iter().flatten().next().copied().unwrap_or(fallback);
        }
        used += weight;
        seen_solid |= !space;
        prev_space = space;
    }
    Cut {
        end: tokens.len(),
        next: tokens.len(),
    }
}

/// The cut at the whitespace starting at `j` and how many line breaks it holds: the part
/// ends at `j`; the next starts after the last line break, or after the whitespace (and
/// tags among it) when there is none.
fn separator(tokens: &[Token<'_>], j: usize) -> (Cut, usize) {
    let mut newlines = 0;
    let mut next = j + 1;
    let mut k = j;
    while let Some(token) = tokens.get(k) {
        if token.is_solid() {
            break;
        }
        if matches!(token, Token::Text { raw: "\n", .. }) {
            newlines += 1;
            next = k + 1;
        }
        k += 1;
    }
    if newlines == 0 {
        next = k;
    }
    (Cut { end: j, next }, newlines)
}

/// Writes `tokens[start..end]` as one well-formed part: `stack` re-opened first, trailing
/// whitespace dropped, elements still open closed at the end, elements with no text
/// dropped. `None` when the part would show nothing but whitespace.
fn write_part(
    tokens: &[Token<'_>],
    start: usize,
    end: usize,
    stack: &[OpenTag<'_>],
) -> Option<String> {
    let slice = tokens.get(start..end)?;
    let last_solid = slice.iter().rposition(Token::is_solid)?;
    let mut writer = PartWriter::default();
    for tag in stack {
        writer.open(*tag);
    }
    for (k, token) in slice.iter().enumerate() {
        match token {
            Token::Open { name, raw } => writer.open(OpenTag { name, raw }),
            Token::Close { name } => writer.close(name),
            Token::Void { raw } => writer.out.push_str(raw),
            Token::Text { raw, .. } => {
                if k < last_solid || !token.is_space() {
                    writer.text(raw);
                }
            }
        }
    }
    Some(writer.finish())
}

/// Builds one part, keeping its tags balanced.
#[derive(Default)]
struct PartWriter<'a> {
    out: String,
    /// Open elements: the tag, where it starts in `out`, `visible` when it was opened.
    open: Vec<(OpenTag<'a>, usize, usize)>,
    /// Text tokens written so far.
    visible: usize,
}

impl<'a> PartWriter<'a> {
    /// Opens an element.
    fn open(&mut self, tag: OpenTag<'a>) {
        self.open.push((tag, self.out.len(), self.visible));
        self.out.push_str(tag.raw);
    }

    /// Closes the innermost open element called `name` and those inside it; ignores a
    /// name that is not open.
    fn close(&mut self, name: &str) {
        if let Some(p) = self
            .open
            .iter()
            .rposition(|(t, _, _)| t.name.eq_ignore_ascii_case(name))
        {
            self.close_to(p);
        }
    }

    /// Closes open elements until `depth` remain; an element with no text is removed.
    fn close_to(&mut self, depth: usize) {
        while self.open.len() > depth {
            let Some((tag, at, visible)) = self.open.pop() else {
                break;
            };
            if visible == self.visible {
                self.out.truncate(at);
            } else {
                self.out.push_str(&format!("</{}>", tag.name));
            }
        }
    }

    /// Writes a text token (a stray `<`, `>` or `&` escaped).
    fn text(&mut self, raw: &str) {
        self.out.push_str(match raw {
            "<" => "&lt;",
            ">" => "&gt;",
            "&" => "&amp;",
            other => other,
        });
        self.visible += 1;
    }

    /// Closes everything still open and returns the part.
    fn finish(mut self) -> String {
        self.close_to(0);
        self.out
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::split::TELEGRAM_MAX_UTF16;
    use crate::telegram_html::markdown_to_telegram_html;

    /// Tags Telegram's HTML mode knows (our output uses a subset).
    const TELEGRAM_TAGS: [&str; 10] = [
        "b",
        "i",
        "u",
        "s",
        "tg-spoiler",
        "a",
        "code",
        "pre",
        "blockquote",
        "tg-emoji",
    ];

    /// Checks `html` the way Telegram's parser would: only known tags, every tag closed in
    /// order, no `<a>` in `<a>`, no `<blockquote>` in `<blockquote>`, nothing inside
    /// `<code>` and only `<code>` directly inside `<pre>`, text with no raw `<`/`>` and
    /// only known entities.
    pub(crate) fn check_telegram_html(html: &str) -> Result<(), String> {
        let mut stack: Vec<String> = Vec::new();
        let mut rest = html;
        while let Some(c) = rest.chars().next() {
            match c {
                '<' => {
                    let end = rest.find('>').ok_or(format!("unclosed tag in {html:?}"))?;
                    check_tag(&rest[1..end], &mut stack, html)?;
                    rest = &rest[end + 1..];
                }
                '&' => {
                    let known = ["&amp;", "&lt;", "&gt;", "&quot;"];
                    if !known.iter().any(|e| rest.starts_with(e)) && !rest.starts_with("&#") {
                        return Err(format!("bad entity at {rest:?}"));
                    }
                    rest = &rest[1..];
                }
                '>' => return Err(format!("raw > in {html:?}")),
                _ => rest = &rest[c.len_utf8()..],
            }
        }
        if stack.is_empty() {
            Ok(())
        } else {
            Err(format!("unclosed {stack:?} in {html:?}"))
        }
    }

    /// Checks one tag's body (between `<` and `>`) against the open `stack`.
    fn check_tag(body: &str, stack: &mut Vec<String>, html: &str) -> Result<(), String> {
        if let Some(name) = body.strip_prefix('/') {
            return match stack.pop() {
                Some(open) if open == name => Ok(()),
                other => Err(format!("</{name}> closes {other:?} in {html:?}")),
            };
        }
        let name = body.split(' ').next().unwrap_or("").to_owned();
        if !TELEGRAM_TAGS.contains(&name.as_str()) {
            return Err(format!("unknown tag <{body}> in {html:?}"));
        }
        if stack.contains(&name) && (name == "a" || name == "blockquote") {
            return Err(format!("nested <{name}> in {html:?}"));
        }
        match stack.last().map(String::as_str) {
            Some("code") => return Err(format!("<{name}> inside <code> in {html:?}")),
            Some("pre") if name != "code" => {
                return Err(format!("<{name}> inside <pre> in {html:?}"));
            }
            _ => {}
        }
        if name == "a" && !(body.starts_with("a href=\"") && body.ends_with('"')) {
            return Err(format!("bad link <{body}>"));
        }
        stack.push(name);
        Ok(())
    }

    /// The visible text of each part with its ` (i/n)` suffix removed (asserting that
    /// every part of several has the right one).
    fn bodies(parts: &[String], max: usize) -> Vec<String> {
        let n = parts.len();
        parts
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let plain = html_to_plain(p);
                if n == 1 || max <= SUFFIX_ROOM {
                    return plain;
                }
                let suffix = format!(" ({}/{n})", i + 1);
                assert!(p.ends_with(&suffix), "part {i} lacks {suffix}: {p}");
                plain
                    .strip_suffix(&suffix)
                    .map(str::to_owned)
                    .unwrap_or(plain)
            })
            .collect()
    }

    /// Asserts the documented reassembly contract: `original` is the bodies joined by
    /// whitespace-only separators, apart from trailing whitespace at the very end.
    fn assert_reassembles(original: &str, bodies: &[String]) {
        let mut pos = 0;
        for (i, body) in bodies.iter().enumerate() {
            assert!(!body.trim().is_empty(), "part {i} is empty");
            let gap = original[pos..]
                .char_indices()
                .take_while(|(_, c)| c.is_whitespace())
                .map(|(k, c)| k + c.len_utf8())
                .chain(std::iter::once(0))
                .filter(|k| original[pos + k..].starts_with(body.as_str()))
                .min();
            let Some(gap) = gap else {
                panic!("part {i} {body:?} not found at {:?}", &original[pos..]);
            };
            assert!(i > 0 || gap == 0, "text lost before the first part");
            pos += gap + body.len();
        }
        assert!(
            original[pos..].trim().is_empty(),
            "lost tail {:?}",
            &original[pos..]
        );
    }

    /// Asserts every invariant of a split of `html` with `max`.
    fn assert_valid_split(html: &str, max: usize) -> Vec<String> {
        let parts = split_telegram_html(html, max);
        for p in &parts {
            assert!(
                telegram_text_len(p) <= max,
                "part too long ({}): {p}",
                telegram_text_len(p)
            );
            check_telegram_html(p).unwrap_or_else(|e| panic!("{e}"));
        }
        assert_reassembles(&html_to_plain(html), &bodies(&parts, max));
        parts
    }

    /// A ~10,000-character answer: paragraphs with emoji, CJK, links and escapes, a rust
    /// fence longer than a message, a bold paragraph longer than a message, a list.
    fn long_answer() -> String {
        let mut md = String::from("# Report 📊\n\n");
        for i in 0..8 {
            md.push_str(&format!(
                "Paragraph {i}: 数据分析显示 results 😀 are good, see [the docs](https://example.com/a?b=1&c={i}) & <more>.\n\n"
            ));
        }
        md.push_str("```rust\n");
        for i in 0..120 {
            md.push_str(&format!(
                "    let value_{i} = compute(\"😀\", {i}); // 注释 {i}\n"
            ));
        }
        md.push_str("```\n\n**");
        for i in 0..400 {
            md.push_str(&format!("bold{i} 😀 "));
        }
        md.push_str("end**\n\n- item one\n- item two with `code`\n");
        md
    }

    #[test]
    fn text_len_counts_entities_once_astral_twice_and_tags_zero() {
        assert_eq!(telegram_text_len("<b>a&amp;b</b>"), 3);
        assert_eq!(telegram_text_len("😀"), 2);
        assert_eq!(telegram_text_len("&#128512;"), 2);
        assert_eq!(
            telegram_text_len("<a href=\"https://x.y/?a=1&amp;b=2\">x</a>"),
            1
        );
        assert_eq!(telegram_text_len("中文"), 2);
        assert_eq!(telegram_text_len(""), 0);
    }

    #[test]
    fn plain_strips_tags_and_unescapes() {
        assert_eq!(
            html_to_plain("<b>1 &lt; 2</b> &amp; <a href=\"https://a.b\">x&quot;</a>&#x1F600;"),
            "1 < 2 & x\"😀"
        );
        assert_eq!(html_to_plain("a < b & c"), "a < b & c");
        assert_eq!(html_to_plain("&nbsp;"), "&nbsp;");
    }

    #[test]
    fn short_text_is_one_part_without_suffix() {
        let html = "<b>hi</b> there";
        assert_eq!(split_telegram_html(html, 100), vec![html]);
        assert_eq!(split_telegram_html(html, 8), vec![html]);
    }

    #[test]
    fn blank_text_gives_no_part() {
        assert!(split_telegram_html("", 100).is_empty());
        assert!(split_telegram_html(" \n\n <b> </b>", 100).is_empty());
    }

    #[test]
    fn long_answer_splits_into_valid_parts() {
        let md = long_answer();
        let html = markdown_to_telegram_html(&md);
        check_telegram_html(&html).unwrap();
        let plain = html_to_plain(&html);
        assert!(plain.chars().count() >= 9000, "{}", plain.chars().count());
        let parts = assert_valid_split(&html, TELEGRAM_MAX_UTF16);
        assert!(parts.len() >= 3, "{}", parts.len());
        for p in &parts {
            assert!(telegram_text_len(p) <= TELEGRAM_MAX_UTF16);
        }
        let n = parts.len();
        let fence = "<pre><code class=\"language-rust\">";
        // Some part ends inside the fence and the next re-opens it with its language.
        let code_cut = (1..n).find(|&i| {
            parts[i - 1].ends_with(&format!("</code></pre> ({i}/{n})"))
                && parts[i].starts_with(&format!("{fence}    let value_"))
        });
        assert!(code_cut.is_some(), "code fence not re-opened: {parts:#?}");
        // Some part ends inside the bold paragraph and the next re-opens the bold.
        let bold_cut = (1..n).find(|&i| {
            parts[i - 1].contains("<b>bold")
                && parts[i - 1].ends_with(&format!("😀</b> ({i}/{n})"))
                && parts[i].starts_with("<b>bold")
        });
        assert!(bold_cut.is_some(), "bold not re-opened: {parts:#?}");
        assert!(parts[0].contains("<a href=\"https://example.com/a?b=1&amp;c=0\">the docs</a>"));
        assert!(parts[0].contains("&amp; &lt;more&gt;."));
    }

    #[test]
    fn prefers_paragraph_then_line_then_word() {
        let para = format!(
            "{}\n\n{} {}\nlast",
            "a".repeat(30),
            "b".repeat(10),
            "c".repeat(10)
        );
        let parts = assert_valid_split(&para, 50);
        assert_eq!(bodies(&parts, 50)[0], "a".repeat(30));
        let line = format!(
            "{} {}\n{} tail tail tail",
            "a".repeat(20),
            "b".repeat(5),
            "c".repeat(10)
        );
        let parts = assert_valid_split(&line, 45);
        assert_eq!(
            bodies(&parts, 45)[0],
            format!("{} {}", "a".repeat(20), "b".repeat(5))
        );
        let word = format!("{} {} {}", "a".repeat(20), "b".repeat(10), "c".repeat(20));
        let parts = assert_valid_split(&word, 50);
        assert_eq!(
            bodies(&parts, 50)[0],
            format!("{} {}", "a".repeat(20), "b".repeat(10))
        );
    }

    #[test]
    fn whitespace_at_cuts_is_dropped_and_indentation_kept() {
        let html = "<pre>    aaaa bbbb\n    cccc dddd\n    eeee ffff</pre>";
        let parts = assert_valid_split(html, 40);
        assert_eq!(
            bodies(&parts, 40),
            ["    aaaa bbbb", "    cccc dddd", "    eeee ffff"]
        );
        assert!(parts[1].starts_with("<pre>    cccc"), "{}", parts[1]);
        let parts = assert_valid_split("aaaa bbbb   \n\ncccc dddd eeee", 25);
        assert_eq!(parts, ["aaaa bbbb (1/3)", "cccc dddd (2/3)", "eeee (3/3)"]);
    }

    #[test]
    fn hard_cut_without_whitespace_loses_nothing() {
        let text = "x".repeat(100);
        let parts = assert_valid_split(&text, 30);
        assert_eq!(bodies(&parts, 30).concat(), text);
        assert!(parts.iter().all(|p| telegram_text_len(p) <= 30));
    }

    #[test]
    fn never_cuts_inside_an_entity_or_a_surrogate_pair() {
        let html = "&amp;&lt;😀".repeat(40);
        let parts = assert_valid_split(&html, 25);
        assert!(parts.len() > 1);
        assert_eq!(bodies(&parts, 25).concat(), html_to_plain(&html));
        for p in &parts {
            check_telegram_html(p).unwrap();
        }
        let emoji = "😀".repeat(50);
        let parts = assert_valid_split(&emoji, 21);
        assert!(parts.iter().all(|p| p.starts_with('😀')));
        assert_eq!(bodies(&parts, 21).concat(), emoji);
    }

    #[test]
    fn reopens_code_fence_with_its_language_and_links_with_href() {
        let code: String = (0..20).map(|i| format!("line {i}\n")).collect();
        let html = format!("<pre><code class=\"language-python\">{code}</code></pre>");
        let parts = assert_valid_split(&html, 60);
        assert!(parts.len() > 1);
        for p in &parts {
            assert!(
                p.starts_with("<pre><code class=\"language-python\">line "),
                "{p}"
            );
            assert!(p.contains("</code></pre> ("), "{p}");
        }
        let link = format!(
            "<a href=\"https://e.x/?q=&quot;1&quot;\">{}</a>",
            "word ".repeat(20)
        );
        let parts = assert_valid_split(&link, 40);
        assert!(parts.len() > 1);
        for p in &parts {
            assert!(
                p.starts_with("<a href=\"https://e.x/?q=&quot;1&quot;\">word"),
                "{p}"
            );
        }
    }

    #[test]
    fn suffix_is_outside_tags_and_counted() {
        let html = format!("<b>{}</b>", "ab ".repeat(40));
        let parts = assert_valid_split(&html, 40);
        let n = parts.len();
        for (i, p) in parts.iter().enumerate() {
            assert!(p.ends_with(&format!("</b> ({}/{n})", i + 1)), "{p}");
            assert!(telegram_text_len(p) <= 40);
        }
    }

    #[test]
    fn tiny_budget_has_no_suffix() {
        let parts = assert_valid_split("abcdefgh", 3);
        assert_eq!(parts, vec!["abc", "def", "gh"]);
        // An emoji wider than the budget still gets a part of its own.
        assert_eq!(split_telegram_html("😀😀", 1), vec!["😀", "😀"]);
    }

    #[test]
    fn empty_elements_at_cuts_are_dropped() {
        let html = format!("{} <b>{}</b>", "a".repeat(20), "b".repeat(20));
        let parts = assert_valid_split(&html, 40);
        assert!(!parts[0].contains("<b>"), "{}", parts[0]);
        assert!(parts[1].starts_with("<b>"), "{}", parts[1]);
    }

    #[test]
    fn malformed_html_still_gives_balanced_parts() {
        for html in [
            "<b>unclosed <i>tags and a stray < and & here",
            "</b>closing first<pre>x</i>y</pre>",
            "<a href=\"x\">q</a><b",
            "&#xD800; &#99999999; &#0; &amp",
        ] {
            for p in split_telegram_html(html, 10) {
                check_telegram_html(&p).unwrap_or_else(|e| panic!("{html}: {e}"));
            }
        }
    }

    /// A tiny deterministic generator for the property tests.
    pub(crate) struct Rng(u64);

    impl Rng {
        pub(crate) fn new(seed: u64) -> Rng {
            Rng(seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407))
        }

        pub(crate) fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n.max(1) as u64) as usize
        }

        /// A random Markdown-ish string built from odd pieces.
        pub(crate) fn markdown(&mut self, pieces: usize) -> String {
            const PARTS: [&str; 40] = [
                "*",
                "**",
                "***",
                "_",
                "__",
                "~~",
                "~",
                "`",
                "```",
                "```rust\n",
                "\n```\n",
                "[",
                "]",
                "(",
                ")",
                "](https://x.y/a_b)",
                "![",
                "<",
                ">",
                "&",
                "&amp;",
                "\\",
                "\n",
                "\n\n",
                "# ",
                "> ",
                "- ",
                "1. ",
                "| a | b |\n|---|---|\n",
                " ",
                "word",
                "snake_case_name",
                "2*3*4",
                "😀",
                "中文字",
                "<b>",
                "</i>",
                "\"",
                "\t",
                "é",
            ];
            (0..pieces)
                .map(|_| PARTS[self.below(PARTS.len())])
                .collect()
        }
    }

    #[test]
    fn random_markdown_splits_validly() {
        let mut rng = Rng::new(7);
        for _ in 0..400 {
            let pieces = rng.below(120);
            let md = rng.markdown(pieces);
            let html = markdown_to_telegram_html(&md);
            check_telegram_html(&html).unwrap_or_else(|e| panic!("{md:?}: {e}"));
            let max = 17 + rng.below(120);
            assert_valid_split(&html, max);
        }
    }
}
