//! The slash commands `herald rpc` serves, in Hermes's command-registry form (name,
//! aliases, argument hint, category): `commands.catalog`, `command.resolve` and
//! `complete.slash` all read this one table. A command is here when its work is served
//! (by `slash.exec`, or by the method Hermes's TUI calls for it); Hermes's commands for
//! features herald does not have are not listed, as Hermes leaves out its
//! `gateway_only` ones.

/// One command, as Hermes's `CommandDef` gives it.
pub struct CommandDef {
    /// Without the `/`.
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    /// Shown as `(usage: /name HINT)`; its first `a|b|c` run lists the subcommands.
    pub args: &'static str,
    pub category: &'static str,
    pub what: &'static str,
}

const fn def(
    name: &'static str,
    aliases: &'static [&'static str],
    args: &'static str,
    category: &'static str,
    what: &'static str,
) -> CommandDef {
    CommandDef {
        name,
        aliases,
        args,
        category,
        what,
    }
}

const SESSION: &str = "Session";
const CONFIGURATION: &str = "Configuration";
const TOOLS: &str = "Tools & Skills";
const INFO: &str = "Info";
const EXIT: &str = "Exit";

/// In Hermes's registry order (categories in order of first appearance).
pub const COMMANDS: &[CommandDef] = &[
    def(
        "new",
        &["reset"],
        "[name]",
        SESSION,
        "Start a new session (fresh session ID + history)",
    ),
    def(
        "clear",
        &[],
        "",
        SESSION,
        "Clear screen and start a new session",
    ),
    def("history", &[], "", SESSION, "Show conversation history"),
    def("save", &[], "", SESSION, "Save the current conversation"),
    def("undo", &[], "", SESSION, "Back up one user turn"),
    def(
        "title",
        &[],
        "[name]",
        SESSION,
        "Set a title for the current session",
    ),
    def(
        "branch",
        &["fork"],
        "[name]",
        SESSION,
        "Branch the current session (explore a different path)",
    ),
    def(
        "compress",
        &["compact"],
        "",
        SESSION,
        "Summarize the conversation so far to free context",
    ),
    def(
        "rollback",
        &[],
        "[number]",
        SESSION,
        "List or restore filesystem checkpoints",
    ),
    def(
        "stop",
        &[],
        "",
        SESSION,
        "Kill all running background processes",
    ),
    def(
        "background",
        &["bg", "btw"],
        "<prompt>",
        SESSION,
        "Run a prompt in the background",
    ),
    def(
        "queue",
        &["q"],
        "<prompt>",
        SESSION,
        "Queue a prompt for the next turn (doesn't interrupt)",
    ),
    def(
        "steer",
        &[],
        "<prompt>",
        SESSION,
        "Inject a message after the next tool call without interrupting",
    ),
    def(
        "resume",
        &[],
        "[name]",
        SESSION,
        "Resume a previously-named session",
    ),
    def(
        "sessions",
        &[],
        "",
        SESSION,
        "Browse and resume previous sessions",
    ),
    def(
        "status",
        &[],
        "",
        SESSION,
        "Show session, model, token, and context info",
    ),
    def(
        "model",
        &[],
        "[model] [--provider name]",
        CONFIGURATION,
        "Switch model for this session",
    ),
    def(
        "busy",
        &[],
        "[queue|steer|interrupt|status]",
        CONFIGURATION,
        "Control what Enter does while herald is working",
    ),
    def(
        "tools",
        &[],
        "",
        TOOLS,
        "List the tools this session offers",
    ),
    def("skills", &[], "", TOOLS, "List installed skills"),
    def(
        "reload",
        &[],
        "",
        TOOLS,
        "Reload .env variables into the running session",
    ),
    def(
        "reload-skills",
        &["reload_skills"],
        "",
        TOOLS,
        "Re-scan skills/ for newly installed or removed skills",
    ),
    def(
        "plugins",
        &[],
        "",
        TOOLS,
        "List installed plugins and their status",
    ),
    def("help", &[], "", INFO, "Show available commands"),
    def("usage", &[], "", INFO, "Show token usage"),
    def(
        "context",
        &[],
        "",
        INFO,
        "How much conversation the session holds",
    ),
    def(
        "image",
        &[],
        "<path>",
        INFO,
        "Attach a local image file for your next prompt",
    ),
    def(
        "paste",
        &[],
        "",
        INFO,
        "Attach clipboard image from your clipboard",
    ),
    def("version", &["v"], "", INFO, "Show herald's version"),
    def("quit", &["exit"], "", EXIT, "Exit the TUI"),
];

/// The commands Hermes's TUI handles itself and its gateway lists under "TUI".
pub const TUI_EXTRA: &[(&str, &str)] = &[
    ("/compact", "Toggle compact display mode"),
    ("/details", "Control agent detail visibility"),
    ("/logs", "Show recent gateway log lines"),
    (
        "/mouse",
        "Set mouse tracking preset [on|off|toggle|wheel|buttons|all]",
    ),
];

impl CommandDef {
    /// The description with its usage, as Hermes's `_build_description` writes it.
    pub fn described(&self) -> String {
        match self.args {
            "" => self.what.to_owned(),
            args => format!("{} (usage: /{} {args})", self.what, self.name),
        }
    }

    /// The subcommands: the first `a|b|c` run of the argument hint.
    pub fn subcommands(&self) -> Vec<&'static str> {
        let words = self
            .args
            .split(|c: char| !(c.is_ascii_lowercase() || c == '|'));
        words
            .filter(|w| w.contains('|'))
            .map(|w| w.split('|').filter(|s| !s.is_empty()).collect())
            .next()
            .unwrap_or_default()
    }
}

/// The command `/word` stands for (a name or an alias, any case).
pub fn canonical(word: &str) -> Option<&'static CommandDef> {
    let word = word.trim_start_matches('/').to_ascii_lowercase();
    COMMANDS
        .iter()
        .find(|c| c.name == word || c.aliases.contains(&word.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subcommands_come_from_the_hint_and_aliases_resolve() {
        let busy = canonical("/BUSY").unwrap();
        assert_eq!(
            busy.subcommands(),
            ["queue", "steer", "interrupt", "status"]
        );
        assert!(canonical("model").unwrap().subcommands().is_empty());
        assert_eq!(canonical("/reset").unwrap().name, "new");
        assert_eq!(canonical("compact").unwrap().name, "compress");
        assert!(canonical("/pet").is_none());
        assert_eq!(
            canonical("title").unwrap().described(),
            "Set a title for the current session (usage: /title [name])"
        );
    }
}
