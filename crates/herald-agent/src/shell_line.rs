//! A shell line split into its simple commands, for the approval rules (agent.md §8.5
//! step 4): a deny rule must not be stepped around with `true; ` in front, a second
//! space or a subshell. The line is split at `;`, `&&`, `||`, `|`, `&` and newlines, and
//! the insides of `$(…)`, backticks and `(…)` are commands of their own. Each command's
//! words are unquoted and joined by one space. A line that does not parse (an open
//! quote or bracket, or nesting too deep) gives `None`, and the caller searches the
//! whole line instead.

/// How deeply substitutions and subshells may nest before the line counts as
/// unparseable.
const MAX_DEPTH: usize = 32;

/// Words that open or close a compound command; they are not the command itself.
const RESERVED: &[&str] = &[
    "!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until",
];

/// Words that run the rest of the line as the command (`sudo touch X` runs `touch X`).
const WRAPPERS: &[&str] = &[
    "sudo", "doas", "env", "nohup", "exec", "command", "builtin", "time", "nice",
];

/// The simple commands of `line`, each as written (words unquoted, one space apart)
/// and, when it starts with wrappers or variable assignments, also without them.
/// `None` when the line does not parse.
pub fn simple_commands(line: &str) -> Option<Vec<String>> {
    let mut splitter = Splitter {
        chars: line.chars().collect(),
        at: 0,
        commands: Vec::new(),
    };
    splitter.sequence(End::Line, 0)?;
    Some(splitter.commands)
}

/// Where a run of commands ends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    Line,
    Paren,
    Backtick,
}

struct Splitter {
    chars: Vec<char>,
    at: usize,
    commands: Vec<String>,
}

/// The command being read: its finished words and the one in progress.
#[derive(Default)]
struct Words {
    done: Vec<String>,
    word: String,
    /// The word in progress has begun (it may be empty: `''`).
    started: bool,
}

impl Words {
    fn push(&mut self, c: char) {
        self.word.push(c);
        self.started = true;
    }

    fn end_word(&mut self) {
        if self.started {
            self.done.push(std::mem::take(&mut self.word));
            self.started = false;
        }
    }
}

impl Splitter {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn next(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.at += 1;
        Some(c)
    }

    /// Reads commands until `end`; `None` when the line ends before it does.
    fn sequence(&mut self, end: End, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        let mut words = Words::default();
        loop {
            let Some(c) = self.next() else {
                self.finish(&mut words);
                return (end == End::Line).then_some(());
            };
            match c {
                ' ' | '\t' | '\r' => words.end_word(),
                '\n' | ';' => self.finish(&mut words),
                '&' if self.peek() == Some('>') || words.word.ends_with(['>', '<']) => {
                    words.push(c)
                }
                '&' | '|' => {
                    if self.peek() == Some(c) {
                        self.at += 1;
                    }
                    self.finish(&mut words);
                }
                '(' if !words.started => {
                    self.finish(&mut words);
                    self.sequence(End::Paren, depth + 1)?;
                }
                ')' => {
                    self.finish(&mut words);
                    return (end == End::Paren).then_some(());
                }
                '`' if end == End::Backtick => {
                    self.finish(&mut words);
                    return Some(());
                }
                '`' => {
                    words.started = true;
                    self.sequence(End::Backtick, depth + 1)?;
                }
                '$' if self.peek() == Some('(') => {
                    self.at += 1;
                    words.started = true;
                    self.sequence(End::Paren, depth + 1)?;
                }
                '\'' => self.single_quoted(&mut words)?,
                '"' => self.double_quoted(&mut words, depth)?,
                '\\' => match self.next() {
                    Some('\n') => {}
                    Some(escaped) => words.push(escaped),
                    None => words.push('\\'),
                },
                '#' if !words.started => self.comment(),
                _ => words.push(c),
            }
        }
    }

    fn single_quoted(&mut self, words: &mut Words) -> Option<()> {
        words.started = true;
        loop {
            match self.next()? {
                '\'' => return Some(()),
                c => words.push(c),
            }
        }
    }

    fn double_quoted(&mut self, words: &mut Words, depth: usize) -> Option<()> {
        words.started = true;
        loop {
            match self.next()? {
                '"' => return Some(()),
                '\\' => words.push(self.next()?),
                '`' => self.sequence(End::Backtick, depth + 1)?,
                '$' if self.peek() == Some('(') => {
                    self.at += 1;
                    self.sequence(End::Paren, depth + 1)?;
                }
                c => words.push(c),
            }
        }
    }

    fn comment(&mut self) {
        while self.peek().is_some_and(|c| c != '\n') {
            self.at += 1;
        }
    }

    /// Ends the command being read and keeps it (and its unwrapped form).
    fn finish(&mut self, words: &mut Words) {
        words.end_word();
        let mut all = std::mem::take(&mut words.done);
        all.retain(|w| !w.is_empty());
        let start = all
            .iter()
            .position(|w| !RESERVED.contains(&w.as_str()))
            .unwrap_or(all.len());
        let command = &all[start..];
        if command.is_empty() {
            return;
        }
        self.commands.push(command.join(" "));
        let bare = unwrapped(command);
        if !bare.is_empty() && bare.len() < command.len() {
            self.commands.push(bare.join(" "));
        }
    }
}

/// `command` without its leading variable assignments and wrappers (with their
/// options).
fn unwrapped(command: &[String]) -> &[String] {
    let mut rest = command;
    loop {
        match rest.first().map(String::as_str) {
            Some(w) if is_assignment(w) => rest = &rest[1..],
            Some(w) if WRAPPERS.contains(&w) => {
                rest = &rest[1..];
                while rest.first().is_some_and(|o| o.starts_with('-')) {
                    rest = &rest[1..];
                }
            }
            _ => return rest,
        }
    }
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit())
    })
}

#[cfg(test)]
mod tests {
    use super::simple_commands;

    fn split(line: &str) -> Vec<String> {
        simple_commands(line).unwrap_or_else(|| panic!("{line:?} did not parse"))
    }

    #[test]
    fn operators_newlines_and_whitespace_split_and_normalise() {
        assert_eq!(split("true; touch X"), ["true", "touch X"]);
        assert_eq!(split("touch  \t X"), ["touch X"]);
        assert_eq!(
            split("a && b || c | d & e\nf"),
            ["a", "b", "c", "d", "e", "f"]
        );
        assert_eq!(split("ls 2>&1 &>/dev/null"), ["ls 2>&1 &>/dev/null"]);
    }

    #[test]
    fn substitutions_and_subshells_are_commands_of_their_own() {
        assert_eq!(split("echo $(touch X)"), ["touch X", "echo"]);
        assert_eq!(split("echo `touch  X`"), ["touch X", "echo"]);
        assert_eq!(split("(cd /; touch X)"), ["cd /", "touch X"]);
        assert_eq!(split(r#"echo "a $(touch X) b""#), ["touch X", "echo a  b"]);
        assert_eq!(split("{ touch X; }"), ["touch X"]);
        assert_eq!(split("if true; then touch X; fi"), ["true", "touch X"]);
    }

    #[test]
    fn quotes_are_removed_and_wrappers_give_a_second_form() {
        assert_eq!(split(r#"touch "X" 'y z'"#), ["touch X y z"]);
        assert_eq!(split(r"tou\ch X"), ["touch X"]);
        assert_eq!(
            split("sudo -n true; FOO=1 env -i touch X"),
            ["sudo -n true", "true", "FOO=1 env -i touch X", "touch X"]
        );
        assert_eq!(split("ls # ; touch X"), ["ls"]);
    }

    #[test]
    fn unbalanced_or_too_deep_lines_do_not_parse() {
        for line in [
            "echo 'open",
            "echo \"open",
            "echo $(open",
            "(a",
            "a)",
            "echo `x",
        ] {
            assert_eq!(simple_commands(line), None, "{line}");
        }
        let deep = format!("{}x{}", "$(".repeat(40), ")".repeat(40));
        assert_eq!(simple_commands(&deep), None);
        let ok = format!("{}x{}", "$(".repeat(8), ")".repeat(8));
        assert!(simple_commands(&ok).is_some());
    }
}
