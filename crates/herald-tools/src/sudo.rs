//! sudo in a terminal command, as Hermes's terminal tool handles it: each real `sudo`
//! (in command position, not quoted, not a comment) becomes `sudo -S -p ''`, and the
//! password is written to the command's input once per sudo. The password is
//! `SUDO_PASSWORD`, else the one the session's user gave before, else asked through the
//! front door's prompter (Hermes's TUI gateway alone has one). When sudo needs no
//! password here (`sudo -n true` works), nothing is asked.

use herald_agent::ToolContext;
use std::time::Duration;

/// The command with each real `sudo` reading its password from standard input, and how
/// many there are (0: the command unchanged).
pub fn rewrite(command: &str) -> (String, usize) {
    let mut out = String::with_capacity(command.len() + 16);
    let mut count = 0;
    let (mut quote, mut at_start) = (None::<char>, true);
    let mut chars = command.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if let Some(q) = quote {
            out.push(c);
            if c == q {
                quote = None;
            } else if c == '\\' && q == '"' {
                out.extend(chars.next().map(|(_, c)| c));
            }
            continue;
        }
        match c {
            '\'' | '"' => {
                quote = Some(c);
                at_start = false;
                out.push(c);
            }
            '#' if at_start || out.ends_with(char::is_whitespace) => {
                // A comment, to the end of the line.
                let line = command[i..].split('\n').next().unwrap_or_default();
                out.push_str(line);
                for _ in 1..line.chars().count() {
                    chars.next();
                }
            }
            ';' | '|' | '&' | '(' | '\n' => {
                at_start = true;
                out.push(c);
            }
            ')' => {
                at_start = false;
                out.push(c);
            }
            c if c.is_whitespace() => out.push(c),
            _ => {
                let word_end = command[i..]
                    .find(|ch: char| ch.is_whitespace() || ";|&()".contains(ch))
                    .map_or(command.len(), |n| i + n);
                let word = &command[i..word_end];
                let assignment = word.contains('=') && !word.starts_with('=');
                if at_start && word == "sudo" {
                    out.push_str("sudo -S -p ''");
                    count += 1;
                } else {
                    out.push_str(word);
                }
                at_start = at_start && assignment;
                for _ in 1..word.chars().count() {
                    chars.next();
                }
            }
        }
    }
    (out, count)
}

/// Whether the command feeds sudo a password of its own (`sudo -S`, `--stdin`): with no
/// `SUDO_PASSWORD` set, that is a model guessing passwords, which Hermes refuses.
pub fn guesses_password(command: &str) -> bool {
    static STDIN: std::sync::LazyLock<Option<regex::Regex>> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(^|[;&|(\s])sudo\s+(-[A-Za-z]*S\b|--stdin\b)").ok()
    });
    let feeds = STDIN.as_ref().is_some_and(|re| re.is_match(command));
    std::env::var_os("SUDO_PASSWORD").is_none() && feeds
}

/// What sudo prints when it refused the password given.
pub fn refused(output: &str) -> bool {
    let lower = output.to_lowercase();
    [
        "sudo: authentication failed",
        "incorrect password attempt",
        "sorry, try again",
    ]
    .iter()
    .any(|m| lower.contains(m))
}

/// Whether sudo runs here without a password (at most 3 s to find out).
async fn needs_no_password() -> bool {
    let probe = herald_process::command("sudo")
        .args(["-n", "true"])
        .status();
    matches!(
        tokio::time::timeout(Duration::from_secs(3), probe).await,
        Ok(Ok(s)) if s.success()
    )
}

/// Where the password for a command's sudo comes from.
pub enum Password {
    /// `SUDO_PASSWORD` (never forgotten).
    Configured(String),
    /// The session's user gave it.
    Given(String),
    /// None: sudo needs none, or nobody gave one.
    None,
}

/// The password for the sudo of a command, as Hermes finds it.
pub async fn password(ctx: &ToolContext) -> Password {
    if let Ok(p) = std::env::var("SUDO_PASSWORD") {
        return Password::Configured(p);
    }
    if needs_no_password().await {
        return Password::None;
    }
    let asked = match &ctx.prompter {
        Some(prompter) => prompter.sudo_password().await,
        None => None,
    };
    asked
        .filter(|p| !p.is_empty())
        .map_or(Password::None, Password::Given)
}

/// The hint added when sudo wanted a password nobody gave.
pub const TIP: &str = "\n\nTip: to let herald's commands use sudo, add SUDO_PASSWORD to herald's .env on this machine.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_sudo_in_command_position_reads_the_password() {
        assert_eq!(rewrite("sudo ls"), ("sudo -S -p '' ls".into(), 1));
        assert_eq!(
            rewrite("cd /x && sudo a; FOO=1 sudo b | sudo c"),
            (
                "cd /x && sudo -S -p '' a; FOO=1 sudo -S -p '' b | sudo -S -p '' c".into(),
                3
            )
        );
        assert_eq!(rewrite("echo sudo"), ("echo sudo".into(), 0));
        assert_eq!(
            rewrite("echo 'sudo x'; \"sudo\""),
            ("echo 'sudo x'; \"sudo\"".into(), 0)
        );
        assert_eq!(rewrite("ls # sudo rm\nsudo id").1, 1);
        assert_eq!(rewrite("visudo").1, 0);
        assert_eq!(rewrite("(sudo id)"), ("(sudo -S -p '' id)".into(), 1));
        assert!(refused(
            "Sorry, try again.\nsudo: 3 incorrect password attempts"
        ));
    }
}
