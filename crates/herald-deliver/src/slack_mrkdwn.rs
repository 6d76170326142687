//! The model's Markdown as Slack's mrkdwn, converted as Hermes converts it: code spans
//! and blocks kept as they are, `[label](url)` as `<url|label>`, Slack's own `<@U…>`
//! `<#C…>` `<!here>` `<https://…>` kept, `&` `<` `>` escaped elsewhere, headings and
//! `**bold**` as `*bold*`, `*italic*` as `_italic_`, `~~struck~~` as `~struck~`.

use regex::Regex;
use std::sync::LazyLock;

/// Placeholder brackets for spans already converted (never in a model's text).
const OPEN: char = '\u{0}';

static FENCE: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"(?s)```.*?```"));
static INLINE: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"`[^`\n]+`"));
static LINK: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"(^|[^!])\[([^\]\n]+)\]\(<?([^()\s<>]+(?:\([^()\s]*\))?[^()\s<>]*)>?\)"));
static SLACK_TOKEN: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"<(?:[@#!][^>\s]*|https?://[^>\s]+|mailto:[^>\s]+|tel:[^>\s]+)>"));
static QUOTE: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"(?m)^>+\s"));
static HEADING: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"(?m)^#{1,6}\s+(.+?)\s*$"));
static BOLD_ITALIC: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"\*\*\*([^*\n]+?)\*\*\*"));
static BOLD: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"\*\*([^*\n]+?)\*\*"));
static ITALIC: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"(^|[^*])\*([^*\s](?:[^*\n]*[^*\s])?)\*($|[^*])"));
static STRIKE: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"~~([^~\n]+?)~~"));

/// A constant pattern (a mistake in one is caught by the tests below).
fn re(pattern: &str) -> Option<Regex> {
    Regex::new(pattern).ok()
}

/// Every match of `pattern` replaced by what `f` makes of it.
fn each(
    text: &str,
    pattern: &LazyLock<Option<Regex>>,
    f: impl FnMut(&regex::Captures<'_>) -> String,
) -> String {
    match &**pattern {
        Some(p) => p.replace_all(text, f).into_owned(),
        None => text.to_owned(),
    }
}

/// Spans taken out of the text while the rest is converted.
struct Kept(Vec<String>);

impl Kept {
    fn keep(&mut self, span: String) -> String {
        self.0.push(span);
        format!("{OPEN}SL{}{OPEN}", self.0.len() - 1)
    }
    fn stash(&mut self, text: &str, pattern: &LazyLock<Option<Regex>>) -> String {
        each(text, pattern, |c| self.keep(c[0].to_owned()))
    }
    /// Puts the spans back, the last kept first (a span may hold an earlier one).
    fn restore(&self, mut text: String) -> String {
        for (i, span) in self.0.iter().enumerate().rev() {
            text = text.replace(&format!("{OPEN}SL{i}{OPEN}"), span);
        }
        text
    }
}

/// Markdown as Slack mrkdwn.
pub fn markdown_to_mrkdwn(markdown: &str) -> String {
    let mut kept = Kept(Vec::new());
    let text = kept.stash(markdown, &FENCE);
    let text = kept.stash(&text, &INLINE);
    let text = each(&text, &LINK, |c| {
        let link = format!("<{}|{}>", &c[3], escape(&c[2]));
        format!("{}{}", &c[1], kept.keep(link))
    });
    let text = kept.stash(&text, &SLACK_TOKEN);
    let text = kept.stash(&text, &QUOTE);
    let text = escape(&unescape(&text));
    let text = each(&text, &HEADING, |c| {
        let inner = c[1].replace("**", "");
        kept.keep(format!("*{inner}*"))
    });
    let text = each(&text, &BOLD_ITALIC, |c| kept.keep(format!("*_{}_*", &c[1])));
    let text = each(&text, &BOLD, |c| kept.keep(format!("*{}*", &c[1])));
    let text = each(&text, &ITALIC, |c| format!("{}_{}_{}", &c[1], &c[2], &c[3]));
    let text = each(&text, &STRIKE, |c| format!("~{}~", &c[1]));
    kept.restore(text)
}

fn unescape(text: &str) -> String {
    text.replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
}

/// `&`, `<` and `>` as Slack wants them in text.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::markdown_to_mrkdwn as m;

    #[test]
    fn markdown_becomes_mrkdwn_as_hermes_converts_it() {
        assert_eq!(
            m("**bold** and *it* and ~~gone~~"),
            "*bold* and _it_ and ~gone~"
        );
        assert_eq!(m("## Title **x**"), "*Title x*");
        assert_eq!(m("***both***"), "*_both_*");
        assert_eq!(
            m("see [the docs](https://x.io/a_(b))"),
            "see <https://x.io/a_(b)|the docs>"
        );
        assert_eq!(
            m("![img](https://x.io/i.png)"),
            "![img](https://x.io/i.png)"
        );
        assert_eq!(m("a < b & c > d"), "a &lt; b &amp; c &gt; d");
        assert_eq!(m("already &amp; escaped"), "already &amp; escaped");
        assert_eq!(
            m("hi <@U123> in <#C1|general>, <!here>"),
            "hi <@U123> in <#C1|general>, <!here>"
        );
        assert_eq!(m("> quoted **b**"), "> quoted *b*");
        assert_eq!(
            m("`**not** <b>` and\n```\n**kept** <x>\n```"),
            "`**not** <b>` and\n```\n**kept** <x>\n```"
        );
        assert_eq!(m("2 * 3 * 4"), "2 * 3 * 4");
        for p in [
            &super::FENCE,
            &super::INLINE,
            &super::LINK,
            &super::SLACK_TOKEN,
            &super::QUOTE,
            &super::HEADING,
            &super::BOLD_ITALIC,
            &super::BOLD,
            &super::ITALIC,
            &super::STRIKE,
        ] {
            assert!(p.is_some());
        }
    }
}
