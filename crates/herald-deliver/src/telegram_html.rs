//! Markdown, as an LLM writes it, turned into Telegram's HTML parse mode
//! (<https://core.telegram.org/bots/api#html-style>).
//!
//! The output only ever uses `<b>`, `<i>`, `<s>`, `<code>`, `<pre>`,
//! `<pre><code class="language-x">`, `<a href="...">` and `<blockquote>`, every tag is
//! closed and properly nested, a link never contains a link and a block quote never
//! contains a block quote. Text escapes exactly `&`, `<` and `>` (`&amp;`, `&lt;`,
//! `&gt;`), an `href` additionally escapes `"` (`&quot;`). Raw HTML in the input is shown
//! literally, never passed through.
//!
//! The Markdown dialect is CommonMark-like with one deliberate difference: emphasis
//! markers never open or close right next to an ASCII letter or digit (any letter or digit
//! for `_`), so `2*3*4`, `a*b` and `snake_case_name` stay literal, while `**粗体**` in CJK
//! text still works. The conversion is a pure function and never panics.

use crate::telegram_split::html_to_plain;
use std::collections::{HashMap, HashSet};

/// URL prefixes a link may use (compared case-insensitively); anything else is shown as
/// plain text.
const LINK_SCHEMES: [&str; 4] = ["http://", "https://", "tg://", "mailto:"];
/// Deepest nesting of emphasis and links; deeper markers are shown literally.
const MAX_INLINE_DEPTH: usize = 16;
/// Deepest nesting of `>` quotes that is still recognised as a quote.
const MAX_QUOTE_DEPTH: usize = 8;
/// Longest link destination considered, in characters.
const MAX_URL_CHARS: usize = 2048;
/// Longest link title considered, in characters.
const MAX_TITLE_CHARS: usize = 512;
/// Longest language name kept on a code fence.
const MAX_LANG_CHARS: usize = 32;
/// What a thematic break (`---`) becomes.
const RULE: &str = "──────────";

/// Bit of an inline tag in the mask of tags already open around a span.
const TAG_B: u8 = 1;
const TAG_I: u8 = 2;
const TAG_S: u8 = 4;
const TAG_A: u8 = 8;

/// Converts an LLM's Markdown answer into Telegram HTML (see the module docs for the
/// guarantees). Leading and trailing blank lines are dropped; runs of blank lines become
/// one.
pub fn markdown_to_telegram_html(md: &str) -> String {
    let text = md.replace("\r\n", "\n").replace('\r', "\n");
    let lines: Vec<&str> = text.split('\n').collect();
    render_blocks(&lines, 0).trim_matches('\n').to_owned()
}

/// Renders a sequence of lines as blocks; `quote_depth` is how many `>` levels surround
/// them.
fn render_blocks(lines: &[&str], quote_depth: usize) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        i = render_block(lines, i, quote_depth, &mut out);
    }
    out.join("\n")
}

/// Renders the block starting at `lines[i]` into `out` (one entry per output line or
/// block) and returns the index of the first line after it.
fn render_block(lines: &[&str], i: usize, quote_depth: usize, out: &mut Vec<String>) -> usize {
    let Some(line) = lines.get(i) else {
        return lines.len();
    };
    if line.trim().is_empty() {
        if out.last().is_some_and(|l| !l.is_empty()) {
            out.push(String::new());
        }
        return i + 1;
    }
    if let Some(fence) = Fence::open(line) {
        return render_fence(lines, i, &fence, out);
    }
    if quote_depth < MAX_QUOTE_DEPTH && quote_body(line).is_some() {
        return render_quote(lines, i, quote_depth, out);
    }
    if let Some(text) = atx_heading(line) {
        push_heading(text, out);
        return i + 1;
    }
    if is_rule(line) {
        out.push(RULE.to_owned());
        return i + 1;
    }
    if is_table_start(lines, i) {
        return render_table(lines, i, out);
    }
    if let Some(item) = ListItem::parse(line) {
        return render_list_item(lines, i, &item, quote_depth, out);
    }
    render_paragraph(lines, i, quote_depth, out)
}

/// Whether `lines[j]` ends a paragraph or list item: a blank line or the start of another
/// block.
fn starts_block(lines: &[&str], j: usize, quote_depth: usize) -> bool {
    let Some(line) = lines.get(j) else {
        return true;
    };
    line.trim().is_empty()
        || Fence::open(line).is_some()
        || (quote_depth < MAX_QUOTE_DEPTH && quote_body(line).is_some())
        || atx_heading(line).is_some()
        || is_rule(line)
        || is_table_start(lines, j)
        || ListItem::parse(line).is_some()
}

/// An opening code fence: ```` ```lang ```` or `~~~lang`.
struct Fence {
    /// Bytes of leading whitespace before the fence, removed from the content lines.
    indent: usize,
    ch: char,
    len: usize,
    lang: Option<String>,
}

impl Fence {
    /// Recognises an opening fence line (any indentation).
    fn open(line: &str) -> Option<Fence> {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let ch = trimmed.chars().next().filter(|c| *c == '`' || *c == '~')?;
        let len = trimmed.chars().take_while(|c| *c == ch).count();
        if len < 3 {
            return None;
        }
        // The fence characters are ASCII, so `len` is also a byte offset.
        let info = trimmed.get(len..).unwrap_or("").trim();
        if ch == '`' && info.contains('`') {
            return None;
        }
        let lang = info.split_whitespace().next().and_then(fence_language);
        Some(Fence {
            indent,
            ch,
            len,
            lang,
        })
    }

    /// Whether `line` closes this fence.
    fn closes(&self, line: &str) -> bool {
        let t = line.trim();
        t.chars().count() >= self.len && t.chars().all(|c| c == self.ch)
    }
}

/// The language of an info string (`rust,ignore` gives `rust`), if it is a safe name.
fn fence_language(info: &str) -> Option<String> {
    let lang: String = info
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '+' | '#' | '.' | '-'))
        .collect();
    (!lang.is_empty() && lang.len() <= MAX_LANG_CHARS).then_some(lang)
}

/// Renders a fenced code block (to the end of the input when it is never closed).
fn render_fence(lines: &[&str], i: usize, fence: &Fence, out: &mut Vec<String>) -> usize {
    let mut body: Vec<&str> = Vec::new();
    let mut j = i + 1;
    let mut next = lines.len();
    while let Some(line) = lines.get(j) {
        if fence.closes(line) {
            next = j + 1;
            break;
        }
        body.push(strip_indent(line, fence.indent));
        j += 1;
    }
    let code = body.join("\n");
    if code.trim().is_empty() {
        return next;
    }
    let mut html = String::from("<pre><code");
    if let Some(lang) = &fence.lang {
        html.push_str(" class=\"language-");
        push_attr(&mut html, lang);
        html.push('"');
    }
    html.push('>');
    push_escaped_str(&mut html, &code);
    html.push_str("</code></pre>");
    out.push(html);
    next
}

/// `line` without up to `indent` bytes of leading whitespace.
fn strip_indent(line: &str, indent: usize) -> &str {
    let ws = line.len() - line.trim_start().len();
    line.get(ws.min(indent)..).unwrap_or(line)
}

/// The text of a `>` quote line after the marker (and one optional space).
fn quote_body(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix('>')?;
    Some(rest.strip_prefix(' ').unwrap_or(rest))
}

/// Renders consecutive `>` lines as one `<blockquote>`; nested quotes are flattened into
/// it because Telegram does not nest block quotes.
fn render_quote(lines: &[&str], i: usize, quote_depth: usize, out: &mut Vec<String>) -> usize {
    let mut inner: Vec<&str> = Vec::new();
    let mut j = i;
    while let Some(body) = lines.get(j).and_then(|l| quote_body(l)) {
        inner.push(body);
        j += 1;
    }
    let html = render_blocks(&inner, quote_depth + 1);
    let html = html.trim_matches('\n');
    if !html.is_empty() {
        if quote_depth == 0 {
            out.push(format!("<blockquote>{html}</blockquote>"));
        } else {
            out.push(html.to_owned());
        }
    }
    j
}

/// The text of an ATX heading (`## Title ##`), if `line` is one.
fn atx_heading(line: &str) -> Option<&str> {
    let t = line.trim_start();
    let hashes = t.chars().take_while(|c| *c == '#').count();
    if hashes == 0 || hashes > 6 {
        return None;
    }
    let rest = t.get(hashes..)?;
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    let rest = rest.trim();
    let stripped = rest.trim_end_matches('#');
    if stripped.is_empty() || stripped.ends_with([' ', '\t']) {
        Some(stripped.trim_end())
    } else {
        Some(rest)
    }
}

/// Pushes a heading as a bold line (nothing for an empty heading).
fn push_heading(text: &str, out: &mut Vec<String>) {
    let inner = render_inline(text, TAG_B);
    if !inner.is_empty() {
        out.push(format!("<b>{inner}</b>"));
    }
}

/// Whether `line` is a thematic break: three or more `-`, `*` or `_` (spaces allowed).
fn is_rule(line: &str) -> bool {
    let marks: Vec<char> = line.chars().filter(|c| !c.is_whitespace()).collect();
    marks.len() >= 3 && ['-', '*', '_'].iter().any(|m| marks.iter().all(|c| c == m))
}

/// Whether `line` underlines the paragraph above it as a (setext) heading.
fn is_setext_underline(line: &str) -> bool {
    let t = line.trim();
    !t.is_empty() && (t.chars().all(|c| c == '=') || t.chars().all(|c| c == '-'))
}

/// Renders a paragraph (or a setext heading) starting at `lines[i]`.
fn render_paragraph(lines: &[&str], i: usize, quote_depth: usize, out: &mut Vec<String>) -> usize {
    let mut parts: Vec<&str> = lines.get(i).map(|l| l.trim()).into_iter().collect();
    let mut j = i + 1;
    while let Some(line) = lines.get(j) {
        if is_setext_underline(line) {
            push_heading(&parts.join("\n"), out);
            return j + 1;
        }
        if starts_block(lines, j, quote_depth) {
            break;
        }
        parts.push(line.trim());
        j += 1;
    }
    let html = render_inline(&parts.join("\n"), 0);
    if !html.is_empty() {
        out.push(html);
    }
    j
}

/// A list item line: `- text`, `* text`, `+ text`, `3. text` or `3) text`.
struct ListItem<'a> {
    /// Leading whitespace, in columns (a tab counts 4).
    indent: usize,
    /// What the item starts with in the output: `•`, `◦` (nested) or `3.`.
    marker: String,
    text: &'a str,
}

impl<'a> ListItem<'a> {
    /// Recognises a list item line.
    fn parse(line: &'a str) -> Option<ListItem<'a>> {
        let t = line.trim_start();
        let indent = line
            .chars()
            .take_while(|c| c.is_whitespace())
            .map(|c| if c == '\t' { 4 } else { 1 })
            .sum();
        let (marker, rest) = if let Some(rest) = t.strip_prefix(['-', '*', '+']) {
            let bullet = if indent >= 2 { "◦" } else { "•" };
            (bullet.to_owned(), rest)
        } else {
            let digits = t.chars().take_while(char::is_ascii_digit).count();
            if digits == 0 || digits > 9 {
                return None;
            }
            let rest = t.get(digits..)?.strip_prefix(['.', ')'])?;
            (format!("{}.", t.get(..digits)?), rest)
        };
        if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
            return None;
        }
        Some(ListItem {
            indent,
            marker,
            text: rest.trim(),
        })
    }
}

/// Renders a list item (with its continuation lines) as text lines: `• text` or `1. text`,
/// nested items keep their indentation, task boxes become ☐ / ☑.
fn render_list_item(
    lines: &[&str],
    i: usize,
    item: &ListItem<'_>,
    quote_depth: usize,
    out: &mut Vec<String>,
) -> usize {
    let mut parts = vec![task_box(item.text)];
    let mut j = i + 1;
    while lines.get(j).is_some() && !starts_block(lines, j, quote_depth) {
        parts.push(lines.get(j).map_or("", |l| l.trim()).to_owned());
        j += 1;
    }
    let indent = " ".repeat(item.indent.min(16));
    let hang = " ".repeat(item.indent.min(16) + item.marker.chars().count() + 1);
    let body = render_inline(&parts.join("\n"), 0).replace('\n', &format!("\n{hang}"));
    out.push(
        format!("{indent}{} {body}", item.marker)
            .trim_end()
            .to_owned(),
    );
    j
}

/// Replaces a leading `[ ]` / `[x]` task box by ☐ / ☑.
fn task_box(text: &str) -> String {
    if let Some(rest) = text.strip_prefix("[ ] ") {
        format!("☐ {rest}")
    } else if let Some(rest) = text
        .strip_prefix("[x] ")
        .or_else(|| text.strip_prefix("[X] "))
    {
        format!("☑ {rest}")
    } else {
        text.to_owned()
    }
}

/// Whether a table (header row, then a `|---|---|` row) starts at `lines[i]`.
fn is_table_start(lines: &[&str], i: usize) -> bool {
    let (Some(header), Some(sep)) = (lines.get(i), lines.get(i + 1)) else {
        return false;
    };
    header.contains('|')
        && sep.contains('|')
        && sep.contains('-')
        && is_table_separator(sep)
        && split_cells(sep).len() == split_cells(header).len()
}

/// Whether every cell of `line` is `---`, `:--`, `--:` or `:-:`.
fn is_table_separator(line: &str) -> bool {
    let cells = split_cells(line);
    !cells.is_empty()
        && cells.iter().all(|cell| {
            let c = cell.trim();
            let c = c.strip_prefix(':').unwrap_or(c);
            let c = c.strip_suffix(':').unwrap_or(c);
            !c.is_empty() && c.chars().all(|ch| ch == '-')
        })
}

/// The cells of a table row: split at `|` outside code spans, `\|` kept as `|`, the outer
/// pipes dropped.
fn split_cells(line: &str) -> Vec<String> {
    let t = line.trim();
    let t = t.strip_prefix('|').unwrap_or(t);
    let t = if t.ends_with('|') && !t.ends_with("\\|") {
        t.get(..t.len() - 1).unwrap_or(t)
    } else {
        t
    };
    let mut cells = vec![String::new()];
    let mut in_code = false;
    let mut chars = t.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                chars.next();
                push_cell_char(&mut cells, '|');
            }
            '`' => {
                in_code = !in_code;
                push_cell_char(&mut cells, c);
            }
            '|' if !in_code => cells.push(String::new()),
            _ => push_cell_char(&mut cells, c),
        }
    }
    cells
}

/// Appends `c` to the last cell.
fn push_cell_char(cells: &mut [String], c: char) {
    if let Some(cell) = cells.last_mut() {
        cell.push(c);
    }
}

/// Renders a table as aligned plain text inside `<pre>` (Telegram has no tables); cell
/// formatting is reduced to its visible text.
fn render_table(lines: &[&str], i: usize, out: &mut Vec<String>) -> usize {
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut j = i;
    while let Some(line) = lines.get(j) {
        if line.trim().is_empty() || !line.contains('|') {
            break;
        }
        if j != i + 1 {
            let cells = split_cells(line)
                .iter()
                .map(|c| html_to_plain(&render_inline(c.trim(), 0)).replace('\n', " "))
                .collect();
            rows.push(cells);
        }
        j += 1;
    }
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut text: Vec<String> = rows.iter().map(|row| table_row(row, &widths)).collect();
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat((*w).max(1))).collect();
    text.insert(1.min(text.len()), rule.join("-+-"));
    let mut html = String::from("<pre>");
    push_escaped_str(&mut html, &text.join("\n"));
    html.push_str("</pre>");
    out.push(html);
    j
}

/// One table row, cells padded to `widths` and joined by ` | `.
fn table_row(row: &[String], widths: &[usize]) -> String {
    let cells: Vec<String> = widths
        .iter()
        .enumerate()
        .map(|(c, w)| {
            let cell = row.get(c).map_or("", String::as_str);
            let pad = w.saturating_sub(cell.chars().count());
            format!("{cell}{}", " ".repeat(pad))
        })
        .collect();
    cells.join(" | ").trim_end().to_owned()
}

/// Renders inline Markdown; `open` holds the tags already open around it (they are not
/// opened again, e.g. no `<b>` inside a heading's `<b>`).
fn render_inline(text: &str, open: u8) -> String {
    let inline = Inline::new(text);
    let mut out = String::new();
    inline.render(0, inline.chars.len(), 0, open, &mut out);
    out
}

/// A run of `*`, `_` or `~` that may open or close emphasis.
#[derive(Debug, Clone, Copy)]
struct Run {
    ch: char,
    len: usize,
    can_open: bool,
}

/// A paragraph's text, analysed once so that rendering does no quadratic scans.
struct Inline {
    chars: Vec<char>,
    /// A backslash that escapes the next character (not shown).
    backslash: Vec<bool>,
    /// A character escaped by a backslash (shown literally).
    escaped: Vec<bool>,
    /// At a code span's opening backticks: (start of the closing backticks, end).
    code: Vec<Option<(usize, usize)>>,
    in_code: Vec<bool>,
    /// At the start of each delimiter run.
    runs: Vec<Option<Run>>,
    /// Starts of the runs that can close, by (character, length), ascending.
    closers: HashMap<(char, usize), Vec<usize>>,
    /// At each `[`: its matching `]`.
    brackets: Vec<Option<usize>>,
}

impl Inline {
    /// Analyses `text`: escapes, code spans, delimiter runs and brackets.
    fn new(text: &str) -> Inline {
        let chars: Vec<char> = text.chars().collect();
        let n = chars.len();
        let mut inline = Inline {
            chars,
            backslash: vec![false; n],
            escaped: vec![false; n],
            code: vec![None; n],
            in_code: vec![false; n],
            runs: vec![None; n],
            closers: HashMap::new(),
            brackets: vec![None; n],
        };
        inline.scan_escapes_and_code();
        inline.scan_runs();
        inline.scan_brackets();
        inline
    }

    /// The character at `i` (NUL past the end).
    fn at(&self, i: usize) -> char {
        self.chars.get(i).copied().unwrap_or('\0')
    }

    /// How many copies of the character at `i` follow from `i`.
    fn run_len(&self, i: usize) -> usize {
        let c = self.at(i);
        self.chars
            .get(i..)
            .map_or(0, |s| s.iter().take_while(|d| **d == c).count())
    }

    /// Marks backslash escapes and code spans, left to right as CommonMark does.
    fn scan_escapes_and_code(&mut self) {
        let n = self.chars.len();
        let mut failed: HashSet<usize> = HashSet::new();
        let mut i = 0;
        while i < n {
            let c = self.at(i);
            if c == '\\' && self.at(i + 1).is_ascii_punctuation() && i + 1 < n {
                self.backslash[i] = true;
                self.escaped[i + 1] = true;
                i += 2;
            } else if c == '`' {
                let len = self.run_len(i);
                match self.find_backticks(i + len, len, &mut failed) {
                    Some(close) => {
                        self.code[i] = Some((close, close + len));
                        self.in_code[i..close + len].fill(true);
                        i = close + len;
                    }
                    None => i += len,
                }
            } else {
                i += 1;
            }
        }
    }

    /// The next run of exactly `len` backticks from `from`; a length once not found is
    /// not searched again.
    fn find_backticks(
        &self,
        from: usize,
        len: usize,
        failed: &mut HashSet<usize>,
    ) -> Option<usize> {
        if failed.contains(&len) {
            return None;
        }
        let mut k = from;
        while k < self.chars.len() {
            if self.at(k) == '`' {
                let l = self.run_len(k);
                if l == len {
                    return Some(k);
                }
                k += l;
            } else {
                k += 1;
            }
        }
        failed.insert(len);
        None
    }

    /// Finds the `*`, `_` and `~` runs outside code and escapes, and whether they can open
    /// or close emphasis.
    fn scan_runs(&mut self) {
        let n = self.chars.len();
        let mut i = 0;
        while i < n {
            let c = self.at(i);
            if !matches!(c, '*' | '_' | '~') || self.escaped[i] || self.in_code[i] {
                i += 1;
                continue;
            }
            let mut len = 1;
            while i + len < n
                && self.at(i + len) == c
                && !self.escaped[i + len]
                && !self.in_code[i + len]
            {
                len += 1;
            }
            let prev = i.checked_sub(1).map(|p| self.at(p));
            let next = self.chars.get(i + len).copied();
            let word = |d: char| {
                if c == '_' {
                    d.is_alphanumeric()
                } else {
                    d.is_ascii_alphanumeric()
                }
            };
            let can_open = next.is_some_and(|d| !d.is_whitespace()) && !prev.is_some_and(word);
            let can_close = prev.is_some_and(|d| !d.is_whitespace()) && !next.is_some_and(word);
            self.runs[i] = Some(Run {
                ch: c,
                len,
                can_open,
            });
            if can_close {
                self.closers.entry((c, len)).or_default().push(i);
            }
            i += len;
        }
    }

    /// Pairs `[` with `]` (outside code and escapes).
    fn scan_brackets(&mut self) {
        let mut stack = Vec::new();
        for i in 0..self.chars.len() {
            if self.escaped[i] || self.in_code[i] {
                continue;
            }
            match self.at(i) {
                '[' => stack.push(i),
                ']' => {
                    if let Some(open) = stack.pop() {
                        self.brackets[open] = Some(i);
                    }
                }
                _ => {}
            }
        }
    }

    /// Renders `chars[start..end]` into `out`.
    fn render(&self, start: usize, end: usize, depth: usize, open: u8, out: &mut String) {
        let mut i = start;
        while i < end {
            i = self.render_at(i, end, depth, open, out).max(i + 1);
        }
    }

    /// Renders whatever starts at `i` and returns the index after it.
    fn render_at(&self, i: usize, end: usize, depth: usize, open: u8, out: &mut String) -> usize {
        let c = self.at(i);
        if self.backslash[i] || (c == '\\' && self.at(i + 1) == '\n') {
            return i + 1;
        }
        if let Some((close, after)) = self.code[i].filter(|(_, after)| *after <= end) {
            self.render_code(i + (after - close), close, out);
            return after;
        }
        if let Some(run) = self.runs[i] {
            return self.render_run(i, run, end, depth, open, out);
        }
        if !self.escaped[i] {
            let attempt = match c {
                '!' if self.at(i + 1) == '[' => self.render_link(i + 1, end, depth, open, out),
                '[' => self.render_link(i, end, depth, open, out),
                '<' => self.render_autolink(i, end, open, out),
                _ => None,
            };
            if let Some(next) = attempt {
                return next;
            }
        }
        push_escaped(out, c);
        i + 1
    }

    /// Renders a code span's content `chars[start..end]`: newlines become spaces, one
    /// surrounding space is stripped.
    fn render_code(&self, start: usize, end: usize, out: &mut String) {
        let mut content: String = self
            .chars
            .get(start..end)
            .unwrap_or(&[])
            .iter()
            .map(|c| if *c == '\n' { ' ' } else { *c })
            .collect();
        if content.len() >= 2
            && content.starts_with(' ')
            && content.ends_with(' ')
            && !content.trim().is_empty()
        {
            content = content
                .get(1..content.len() - 1)
                .unwrap_or(&content)
                .to_owned();
        }
        out.push_str("<code>");
        push_escaped_str(out, &content);
        out.push_str("</code>");
    }

    /// Renders emphasis for the run at `i` when it has a closer before `end`, else the
    /// run's characters literally.
    fn render_run(
        &self,
        i: usize,
        run: Run,
        end: usize,
        depth: usize,
        open: u8,
        out: &mut String,
    ) -> usize {
        if run.can_open && depth < MAX_INLINE_DEPTH {
            let closer = emphasis_tags(run.ch, run.len).zip(self.find_closer(i, run, end));
            if let Some((tags, close)) = closer {
                let tags: Vec<(&str, u8)> = tags
                    .iter()
                    .copied()
                    .filter(|(_, bit)| open & bit == 0)
                    .collect();
                let mask = tags.iter().fold(open, |m, (_, bit)| m | bit);
                wrap(out, &tags, |out| {
                    self.render(i + run.len, close, depth + 1, mask, out)
                });
                return close + run.len;
            }
        }
        let stop = (i + run.len).min(end);
        for k in i..stop {
            push_escaped(out, self.at(k));
        }
        stop
    }

    /// The first run after the opener at `i` that closes it, ending by `end`.
    fn find_closer(&self, i: usize, run: Run, end: usize) -> Option<usize> {
        let list = self.closers.get(&(run.ch, run.len))?;
        let from = i + run.len + 1;
        let close = *list.get(list.partition_point(|p| *p < from))?;
        (close + run.len <= end).then_some(close)
    }

    /// Renders `[text](url)` whose `[` is at `b` (an image `![alt](url)` is rendered the
    /// same way, as a link on its alt text); `None` when it is not a link.
    fn render_link(
        &self,
        b: usize,
        end: usize,
        depth: usize,
        open: u8,
        out: &mut String,
    ) -> Option<usize> {
        if open & TAG_A != 0 || depth >= MAX_INLINE_DEPTH {
            return None;
        }
        let close = self.brackets.get(b).copied().flatten()?;
        if close + 1 >= end || self.at(close + 1) != '(' {
            return None;
        }
        let (url, after) = self.link_destination(close + 2, end)?;
        if is_allowed_url(&url) {
            out.push_str("<a href=\"");
            push_attr(out, &url);
            out.push_str("\">");
            let before = out.len();
            self.render(b + 1, close, depth + 1, open | TAG_A, out);
            if html_to_plain(&out[before..]).trim().is_empty() {
                out.truncate(before);
                push_escaped_str(out, &url);
            }
            out.push_str("</a>");
        } else {
            self.render(b + 1, close, depth + 1, open, out);
        }
        Some(after)
    }

    /// Parses `url)` or `url "title")` from `k`; returns the URL and the index after `)`.
    fn link_destination(&self, k: usize, end: usize) -> Option<(String, usize)> {
        let mut i = self.skip_spaces(k, end);
        let mut url = String::new();
        if self.at(i) == '<' {
            i += 1;
            while i < end && self.at(i) != '>' {
                if matches!(self.at(i), '\n' | '<') || url.len() > MAX_URL_CHARS {
                    return None;
                }
                url.push(self.at(i));
                i += 1;
            }
            if i >= end {
                return None;
            }
            i += 1;
        } else {
            let mut parens = 0usize;
            while i < end {
                let c = self.at(i);
                if c.is_whitespace() || c.is_control() || url.len() > MAX_URL_CHARS {
                    break;
                }
                if c == '(' {
                    parens += 1;
                } else if c == ')' {
                    if parens == 0 {
                        break;
                    }
                    parens -= 1;
                }
                if !self.backslash[i] {
                    url.push(c);
                }
                i += 1;
            }
        }
        i = self.skip_title(self.skip_spaces(i, end), end)?;
        (i < end && self.at(i) == ')').then_some((url, i + 1))
    }

    /// Skips whitespace from `i` (at most one URL's length).
    fn skip_spaces(&self, mut i: usize, end: usize) -> usize {
        let limit = i + MAX_URL_CHARS;
        while i < end && i < limit && self.at(i).is_whitespace() {
            i += 1;
        }
        i
    }

    /// Skips an optional `"title"` / `'title'` and the whitespace after it; `None` when a
    /// title is opened and not closed.
    fn skip_title(&self, i: usize, end: usize) -> Option<usize> {
        let quote = self.at(i);
        if i >= end || !matches!(quote, '"' | '\'') {
            return Some(i);
        }
        let mut j = i + 1;
        while j < end && self.at(j) != quote {
            if j - i > MAX_TITLE_CHARS {
                return None;
            }
            j += 1;
        }
        (j < end).then(|| self.skip_spaces(j + 1, end))
    }

    /// Renders `<https://...>` as a link; `None` when it is not one (the `<` is then shown).
    fn render_autolink(&self, i: usize, end: usize, open: u8, out: &mut String) -> Option<usize> {
        if open & TAG_A != 0 {
            return None;
        }
        let mut j = i + 1;
        while j < end && j - i <= MAX_URL_CHARS {
            match self.at(j) {
                '>' => break,
                c if c.is_whitespace() || c == '<' => return None,
                _ => j += 1,
            }
        }
        if j >= end || self.at(j) != '>' {
            return None;
        }
        let url: String = self.chars.get(i + 1..j)?.iter().collect();
        if !is_allowed_url(&url) {
            return None;
        }
        out.push_str("<a href=\"");
        push_attr(out, &url);
        out.push_str("\">");
        push_escaped_str(out, &url);
        out.push_str("</a>");
        Some(j + 1)
    }
}

/// The tags a delimiter run of `len` copies of `ch` stands for.
fn emphasis_tags(ch: char, len: usize) -> Option<&'static [(&'static str, u8)]> {
    match (ch, len) {
        ('*' | '_', 1) => Some(&[("i", TAG_I)]),
        ('*' | '_', 2) => Some(&[("b", TAG_B)]),
        ('*' | '_', 3) => Some(&[("b", TAG_B), ("i", TAG_I)]),
        ('~', 2) => Some(&[("s", TAG_S)]),
        _ => None,
    }
}

/// Writes `tags` around what `body` writes; drops the tags when the body shows nothing.
fn wrap(out: &mut String, tags: &[(&str, u8)], body: impl FnOnce(&mut String)) {
    let start = out.len();
    for (tag, _) in tags {
        out.push_str(&format!("<{tag}>"));
    }
    let inner = out.len();
    body(out);
    if out.len() == inner {
        out.truncate(start);
        return;
    }
    for (tag, _) in tags.iter().rev() {
        out.push_str(&format!("</{tag}>"));
    }
}

/// Whether a link to `url` may be sent: http, https, tg or mailto, with something after
/// the scheme and no whitespace or control characters.
fn is_allowed_url(url: &str) -> bool {
    let lower = url.to_ascii_lowercase();
    LINK_SCHEMES
        .iter()
        .any(|s| lower.starts_with(s) && lower.len() > s.len())
        && !url.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// Appends `c` escaped for Telegram HTML text.
fn push_escaped(out: &mut String, c: char) {
    match c {
        '&' => out.push_str("&amp;"),
        '<' => out.push_str("&lt;"),
        '>' => out.push_str("&gt;"),
        _ => out.push(c),
    }
}

/// Appends `s` escaped for Telegram HTML text.
fn push_escaped_str(out: &mut String, s: &str) {
    for c in s.chars() {
        push_escaped(out, c);
    }
}

/// Appends `s` escaped for a double-quoted attribute value.
fn push_attr(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '"' => out.push_str("&quot;"),
            _ => push_escaped(out, c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telegram_split::tests::{Rng, check_telegram_html};

    /// Converts and checks that the result is valid Telegram HTML.
    fn md(input: &str) -> String {
        let html = markdown_to_telegram_html(input);
        check_telegram_html(&html).unwrap_or_else(|e| panic!("{input:?}: {e}"));
        html
    }

    #[test]
    fn emphasis_strike_and_code() {
        assert_eq!(md("**bold** and __bold__"), "<b>bold</b> and <b>bold</b>");
        assert_eq!(md("*it* and _it_"), "<i>it</i> and <i>it</i>");
        assert_eq!(md("~~gone~~ ~approx~"), "<s>gone</s> ~approx~");
        assert_eq!(
            md("use `x < y && z`"),
            "use <code>x &lt; y &amp;&amp; z</code>"
        );
        assert_eq!(md("`` a ` b ``"), "<code>a ` b</code>");
        assert_eq!(md("`**not bold**`"), "<code>**not bold**</code>");
    }

    #[test]
    fn nested_emphasis() {
        assert_eq!(
            md("**bold and *italic* inside**"),
            "<b>bold and <i>italic</i> inside</b>"
        );
        assert_eq!(md("***both***"), "<b><i>both</i></b>");
        assert_eq!(md("*a **b** c*"), "<i>a <b>b</b> c</i>");
        assert_eq!(
            md("**[link](https://a.b)**"),
            "<b><a href=\"https://a.b\">link</a></b>"
        );
    }

    #[test]
    fn snake_case_and_arithmetic_stay_literal() {
        assert_eq!(
            md("call snake_case_identifier now"),
            "call snake_case_identifier now"
        );
        assert_eq!(md("my_var and other_var_name"), "my_var and other_var_name");
        assert_eq!(md("2*3*4 = 24"), "2*3*4 = 24");
        assert_eq!(md("a * b * c"), "a * b * c");
        assert_eq!(md("glob *.rs and 5*x"), "glob *.rs and 5*x");
        assert_eq!(md("这是**重点**内容"), "这是<b>重点</b>内容");
    }

    #[test]
    fn unbalanced_markers_stay_literal() {
        assert_eq!(md("**open only"), "**open only");
        assert_eq!(md("close only**"), "close only**");
        assert_eq!(md("*a **b"), "*a **b");
        assert_eq!(md("`unclosed code"), "`unclosed code");
        assert_eq!(md("\\*not italic\\*"), "*not italic*");
    }

    #[test]
    fn raw_html_and_entities_are_escaped() {
        assert_eq!(
            md("<script>alert(\"x\")</script> & <b>bold</b>"),
            "&lt;script&gt;alert(\"x\")&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;"
        );
        assert_eq!(
            md("AT&T &amp; 1 < 2 > 0"),
            "AT&amp;T &amp;amp; 1 &lt; 2 &gt; 0"
        );
        assert_eq!(md("a<br>b"), "a&lt;br&gt;b");
    }

    #[test]
    fn links_and_images() {
        assert_eq!(
            md("see [the docs](https://e.x/a_b?q=1&r=\"2\") now"),
            "see <a href=\"https://e.x/a_b?q=1&amp;r=&quot;2&quot;\">the docs</a> now"
        );
        assert_eq!(
            md("[mail](mailto:a@b.c)"),
            "<a href=\"mailto:a@b.c\">mail</a>"
        );
        assert_eq!(
            md("[user](tg://user?id=1)"),
            "<a href=\"tg://user?id=1\">user</a>"
        );
        assert_eq!(md("[x](javascript:alert(1))"), "x");
        assert_eq!(md("[rel](/docs/a)"), "rel");
        assert_eq!(
            md("[t](https://a.b \"Title\")"),
            "<a href=\"https://a.b\">t</a>"
        );
        assert_eq!(
            md("[](https://a.b)"),
            "<a href=\"https://a.b\">https://a.b</a>"
        );
        assert_eq!(
            md("![a cat](https://c.at/x.png)"),
            "<a href=\"https://c.at/x.png\">a cat</a>"
        );
        assert_eq!(
            md("<https://a.b/c>"),
            "<a href=\"https://a.b/c\">https://a.b/c</a>"
        );
        assert_eq!(
            md("[a [b](https://x.y)](https://z.w)"),
            "<a href=\"https://z.w\">a [b](https://x.y)</a>"
        );
        assert_eq!(md("[not a link] (x)"), "[not a link] (x)");
    }

    #[test]
    fn fences_with_and_without_language() {
        assert_eq!(
            md("```rust\nfn main() { a < b && **c** }\n```"),
            "<pre><code class=\"language-rust\">fn main() { a &lt; b &amp;&amp; **c** }</code></pre>"
        );
        assert_eq!(md("~~~\nplain\n~~~"), "<pre><code>plain</code></pre>");
        assert_eq!(
            md("```rust,ignore\nx\n```"),
            "<pre><code class=\"language-rust\">x</code></pre>"
        );
        assert_eq!(md("```\"><x\nx\n```"), "<pre><code>x</code></pre>");
        assert_eq!(
            md("text\n```py\n  indented\n```\nafter"),
            "text\n<pre><code class=\"language-py\">  indented</code></pre>\nafter"
        );
    }

    #[test]
    fn unclosed_fence_is_code_to_the_end() {
        assert_eq!(
            md("before\n```python\nx = 1\n\n**y** = 2"),
            "before\n<pre><code class=\"language-python\">x = 1\n\n**y** = 2</code></pre>"
        );
    }

    #[test]
    fn headings_are_bold_lines() {
        assert_eq!(md("# Title\ntext"), "<b>Title</b>\ntext");
        assert_eq!(md("### Sub **bold** ###"), "<b>Sub bold</b>");
        assert_eq!(md("Setext\n======\n\nnext"), "<b>Setext</b>\n\nnext");
        assert_eq!(md("#hashtag"), "#hashtag");
    }

    #[test]
    fn block_quotes() {
        assert_eq!(
            md("> quoted **text**\n> more\n\nafter"),
            "<blockquote>quoted <b>text</b>\nmore</blockquote>\n\nafter"
        );
        assert_eq!(md("> a\n>> b"), "<blockquote>a\nb</blockquote>");
        assert_eq!(
            md("> ```sh\n> ls\n> ```"),
            "<blockquote><pre><code class=\"language-sh\">ls</code></pre></blockquote>"
        );
    }

    #[test]
    fn lists_are_text_lines() {
        assert_eq!(
            md("- one\n- **two**\n  - nested"),
            "• one\n• <b>two</b>\n  ◦ nested"
        );
        assert_eq!(md("1. first\n2) second"), "1. first\n2. second");
        assert_eq!(md("- [ ] todo\n- [x] done"), "• ☐ todo\n• ☑ done");
        assert_eq!(md("* item\ncontinued"), "• item\n  continued");
        assert_eq!(md("---"), RULE);
    }

    #[test]
    fn tables_become_preformatted_text() {
        let table = "| Name | Value |\n|:-----|------:|\n| **a** | 1 < 2 |\n| long name | `x` |";
        assert_eq!(
            md(table),
            "<pre>Name      | Value\n----------+------\na         | 1 &lt; 2\nlong name | x</pre>"
        );
        assert_eq!(md("a | b\nnot a table"), "a | b\nnot a table");
    }

    #[test]
    fn emoji_cjk_and_blank_lines() {
        assert_eq!(
            md("\n\nHi 😀 **中文**\n\n\n\nbye 👋🏽\n\n"),
            "Hi 😀 <b>中文</b>\n\nbye 👋🏽"
        );
        assert_eq!(md("line1\r\nline2"), "line1\nline2");
        assert_eq!(md(""), "");
    }

    #[test]
    fn odd_inputs_never_panic_and_stay_valid() {
        let fixed = [
            "*",
            "**",
            "***",
            "____",
            "~~~~",
            "`",
            "``",
            "```",
            "[",
            "]",
            "[]",
            "[](",
            "![",
            "<",
            ">",
            "&",
            "\\",
            "\\\n",
            "> ",
            ">>>>>>>>>>>>>>>>>>>>>>>>>x",
            "#",
            "# ",
            "######",
            "- ",
            "1.",
            "|",
            "|-|",
            "| a |\n|---|",
            "*a _b* c_",
            "**a *b** c*",
            "_a **b_ c**",
            "[*a](https://x.y)*",
            "`a*`b*",
            "<https://a.b",
            "[a](https://x.y \"t)",
            "\u{0}\u{1}\u{7f}",
            "\u{200d}👨‍👩‍👧\u{fe0f}",
            "*😀*",
            "_中_文_",
        ];
        for input in fixed {
            md(input);
        }
        let deep = "*_".repeat(500) + "x" + &"_*".repeat(500);
        md(&deep);
        md(&"[".repeat(3000));
        md(&"**a ".repeat(3000));
        let mut rng = Rng::new(42);
        for _ in 0..1000 {
            let pieces = rng.below(60);
            md(&rng.markdown(pieces));
        }
    }
}
