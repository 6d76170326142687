//! Text as Telegram shows it: the model's Markdown as Telegram HTML (herald-deliver's
//! converter), in parts within Telegram's limit counted as Telegram counts.

use herald_deliver::split::TELEGRAM_MAX_UTF16;
use herald_deliver::telegram_html::markdown_to_telegram_html;
use herald_deliver::telegram_split::split_telegram_html;

/// The parts an answer is sent as, in Telegram's HTML (none for a blank answer).
pub fn html_parts(markdown: &str) -> Vec<String> {
    split_telegram_html(&to_html(markdown), TELEGRAM_MAX_UTF16)
}

/// Markdown as Telegram HTML.
pub fn to_html(markdown: &str) -> String {
    markdown_to_telegram_html(markdown)
}
