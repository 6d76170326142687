//! sudo in a terminal command, as Hermes's terminal tool handles it: each real `sudo`
//! (in command position, not quoted, not a comment) becomes `sudo -S -p ''`, and the
//! password is written to the command's input once per sudo. The password is
//! `SUDO_PASSWORD`, else the one the session's user gave before, else asked through the
//! front door's prompter (Hermes's TUI gateway alone has one). When sudo needs no
//! password here (`sudo -n true` works), nothing is asked.

use herald_agent::ToolContext;
use std::time::Duration;

/// The command with each real `sudo` reading its password from standard input, and how
/// many there are (0: the command unchanged). Words are read as the shell reads them:
/// quotes and `\` escapes belong to the word, so a quoted `sudo` or `;` is not one.
pub fn rewrite(command: &str) -> (String, usize) {
    let chars: Vec<char> = command.chars().collect();
    let (mut out, mut count, mut at_start, mut i) = (String::new(), 0, true, 0);
    while i < chars.len() {
        let c = chars[i];
        match c {
            '#' if i == 0 || chars[i - 1].is_whitespace() => {
                // A comment, to the end of the line.
                while i < chars.len() && chars[i] != '\n' {
                    out.push(chars[i]);
                    i += 1;
                }
            }
            ';' | '|' | '&' | '(' | '\n' | '`' => {
                at_start = true;
                out.push(c);
                i += 1;
            }
            ')' => {
                at_start = false;
                out.push(c);
                i += 1;
            }
            c if c.is_whitespace() => {
                out.push(c);
                i += 1;
            }
            _ => {
                let end = word_end(&chars, i);
                let word: String = chars[i..end].iter().collect();
                if at_start && word == "sudo" {
                    out.push_str("sudo -S -p ''");
                    count += 1;
                } else {
                    out.push_str(&word);
                }
                at_start = at_start && is_assignment(&word);
                i = end;
            }
        }
    }
    (out, count)
}

/// Where the shell word starting at `start` ends: at an unquoted blank or operator.
fn word_end(chars: &[char], start: usize) -> usize {
    let (mut i, mut quote) = (start, None::<char>);
    while i < chars.len() {
        let ch = chars[i];
        match quote {
            Some(q) if ch == q => quote = None,
            Some('"') if ch == '\\' => i += 1,
            Some(_) => {}
            None if ch == '\'' || ch == '"' => quote = Some(ch),
            None if ch == '\\' => i += 1,
            None if ch.is_whitespace() || ";|&()`".contains(ch) => break,
            None => {}
        }
        i += 1;
    }
    i.min(chars.len())
}

/// `NAME=value` before a command (it stays in command position).
fn is_assignment(word: &str) -> bool {
    word.split_once('=')
        .is_some_and(|(name, _)| herald_agent::skill_setup::is_var_name(name))
}

/// Whether the command feeds sudo a password of its own (`sudo -S`, `--stdin`): with no
/// `SUDO_PASSWORD` set, that is a model guessing passwords, which Hermes refuses.
pub fn guesses_password(command: &str) -> bool {
    static STDIN: std::sync::LazyLock<Option<regex::Regex>> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?i)(^|[;&|(`\s])sudo\s+(-[a-z]*s\b|--stdin\b)").ok()
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
        // Quotes and escapes inside a word hide what they hold.
        for hidden in [
            "echo x\"; sudo rm\"",
            "a'b; sudo c'",
            "echo \\; sudo x",
            "./a=b sudo x",
        ] {
            assert_eq!(rewrite(hidden), (hidden.to_owned(), 0), "{hidden}");
        }
        assert_eq!(rewrite("x=`sudo id`").1, 1);
        assert!(refused(
            "Sorry, try again.\nsudo: 3 incorrect password attempts"
        ));
    }
}
