//! The one slash-command table, in Hermes's command-registry form (name, aliases,
//! argument hint, category), with the doors that offer each command: `herald chat`'s
//! `/help`, RPC's `commands.catalog`, ACP's available commands and the chat platforms'
//! lists are all read from it. Besides the built-ins, each installed skill is a command
//! (`/<slug> TEXT` runs TEXT with that skill); any other `/word` is refused with the
//! list. A line whose first word is a path (`/etc/hosts is broken`) is a prompt.

use herald_agent::skills::{self, Skill};

/// A front door with slash commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Door {
    /// `herald chat`.
    Chat,
    /// The JSON-RPC gateway (Hermes's TUI).
    Rpc,
    Acp,
    /// A chat platform (Telegram, Slack, Discord).
    Platform,
}

impl Door {
    const fn bit(self) -> u8 {
        match self {
            Door::Chat => CHAT,
            Door::Rpc => RPC,
            Door::Acp => ACP,
            Door::Platform => PLATFORM,
        }
    }
}

const CHAT: u8 = 1;
const RPC: u8 = 2;
const ACP: u8 = 4;
const PLATFORM: u8 = 8;
const ALL: u8 = CHAT | RPC | ACP | PLATFORM;

/// One command, as Hermes's `CommandDef` gives it, and the doors that offer it.
pub struct CommandDef {
    /// Without the `/`.
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    /// Shown as `(usage: /name HINT)`; its first `a|b|c` run lists the subcommands.
    pub args: &'static str,
    pub category: &'static str,
    pub what: &'static str,
    doors: u8,
}

const fn def(
    name: &'static str,
    aliases: &'static [&'static str],
    args: &'static str,
    category: &'static str,
    what: &'static str,
    doors: u8,
) -> CommandDef {
    CommandDef {
        name,
        aliases,
        args,
        category,
        what,
        doors,
    }
}

const SESSION: &str = "Session";
const CONFIGURATION: &str = "Configuration";
const TOOLS: &str = "Tools & Skills";
const INFO: &str = "Info";
const EXIT: &str = "Exit";

/// In Hermes's registry order (categories in order of first appearance). A command
/// served by a door's own methods (RPC's `/history`, `/busy` ...) is offered by that
/// door alone.
pub const COMMANDS: &[CommandDef] = &[
    def(
        "new",
        &["reset"],
        "[name]",
        SESSION,
        "Start a new session (fresh session ID + history)",
        ALL,
    ),
    def(
        "clear",
        &[],
        "",
        SESSION,
        "Clear screen and start a new session",
        RPC,
    ),
    def(
        "history",
        &[],
        "",
        SESSION,
        "Show conversation history",
        RPC,
    ),
    def(
        "save",
        &[],
        "",
        SESSION,
        "Save the current conversation",
        RPC,
    ),
    def("undo", &[], "", SESSION, "Back up one user turn", RPC),
    def(
        "title",
        &[],
        "[name]",
        SESSION,
        "Set a title for the current session",
        RPC,
    ),
    def(
        "branch",
        &["fork"],
        "[name]",
        SESSION,
        "Branch the current session (explore a different path)",
        RPC,
    ),
    def(
        "compress",
        &["compact"],
        "",
        SESSION,
        "Summarize the conversation so far to free context",
        ALL,
    ),
    def(
        "rollback",
        &[],
        "[number]",
        SESSION,
        "List or restore filesystem checkpoints",
        RPC,
    ),
    def(
        "stop",
        &[],
        "",
        SESSION,
        "Stop the running turn and drop the queued prompts",
        RPC | ACP | PLATFORM,
    ),
    def(
        "approve",
        &[],
        "[session|always]",
        SESSION,
        "Approve a pending dangerous command",
        PLATFORM,
    ),
    def(
        "deny",
        &[],
        "[reason]",
        SESSION,
        "Deny a pending dangerous command (optionally with a reason)",
        PLATFORM,
    ),
    def(
        "background",
        &["bg", "btw"],
        "<prompt>",
        SESSION,
        "Run a prompt in the background",
        RPC,
    ),
    def(
        "queue",
        &["q"],
        "<prompt>",
        SESSION,
        "Queue a prompt for the next turn (doesn't interrupt)",
        ALL,
    ),
    def(
        "steer",
        &[],
        "<prompt>",
        SESSION,
        "Inject a message after the next tool call without interrupting",
        ALL,
    ),
    def(
        "status",
        &[],
        "",
        SESSION,
        "Show session, model, token, and context info",
        ALL,
    ),
    def(
        "sethome",
        &["set-home"],
        "",
        SESSION,
        "Set this chat as the home channel",
        PLATFORM,
    ),
    def(
        "resume",
        &[],
        "[name]",
        SESSION,
        "Resume a previously-named session",
        CHAT | RPC,
    ),
    def(
        "sessions",
        &[],
        "",
        SESSION,
        "Browse and resume previous sessions",
        RPC,
    ),
    def(
        "model",
        &[],
        "[model] [--provider name]",
        CONFIGURATION,
        "Switch model for this session",
        ALL,
    ),
    def(
        "yolo",
        &[],
        "",
        CONFIGURATION,
        "Toggle YOLO mode (skip dangerous command approvals in this session)",
        CHAT | RPC | PLATFORM,
    ),
    def(
        "busy",
        &[],
        "[queue|steer|interrupt|status]",
        CONFIGURATION,
        "Control what Enter does while herald is working",
        RPC,
    ),
    def(
        "tools",
        &[],
        "",
        TOOLS,
        "List the tools this session offers",
        ALL,
    ),
    def("skills", &[], "", TOOLS, "List installed skills", RPC),
    def(
        "reload",
        &[],
        "",
        TOOLS,
        "Reload .env variables into the running session",
        RPC,
    ),
    def(
        "reload-skills",
        &["reload_skills"],
        "",
        TOOLS,
        "Re-scan skills/ for newly installed or removed skills",
        RPC,
    ),
    def(
        "plugins",
        &[],
        "",
        TOOLS,
        "List installed plugins and their status",
        RPC,
    ),
    def("help", &[], "", INFO, "Show available commands", ALL),
    def("usage", &[], "", INFO, "Show token usage", ALL),
    def(
        "context",
        &[],
        "",
        INFO,
        "How much conversation the session holds",
        ALL,
    ),
    def(
        "image",
        &[],
        "<path>",
        INFO,
        "Attach a local image file for your next prompt",
        RPC,
    ),
    def(
        "paste",
        &[],
        "",
        INFO,
        "Attach clipboard image from your clipboard",
        RPC,
    ),
    def("version", &["v"], "", INFO, "Show herald's version", ALL),
    def("quit", &["exit"], "", EXIT, "Leave herald", CHAT | RPC),
];

impl CommandDef {
    /// Whether `door` offers it.
    pub fn offered_at(&self, door: Door) -> bool {
        self.doors & door.bit() != 0
    }

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

/// The commands `door` offers, in the table's order.
pub fn offered(door: Door) -> impl Iterator<Item = &'static CommandDef> {
    COMMANDS.iter().filter(move |c| c.offered_at(door))
}

/// The command `/word` stands for (a name or an alias, any case).
pub fn canonical(word: &str) -> Option<&'static CommandDef> {
    let word = word.trim_start_matches('/').to_ascii_lowercase();
    COMMANDS
        .iter()
        .find(|c| c.name == word || c.aliases.contains(&word.as_str()))
}

/// What one input line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum ChatCommand {
    Prompt(String),
    /// A command of the table with the text after it (trimmed).
    Builtin {
        def: &'static str,
        arg: String,
    },
    /// A skill's slash command: the skill's name and the text after the command.
    Skill {
        name: String,
        text: String,
    },
    Unknown(String),
}

/// Reads one (trimmed, non-empty) input line at `door`: a command the door does not
/// offer is unknown there.
pub fn parse(line: &str, door: Door, installed: &[Skill]) -> ChatCommand {
    let Some(rest) = line.strip_prefix('/') else {
        return ChatCommand::Prompt(line.to_owned());
    };
    let (word, arg) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let arg = arg.trim().to_owned();
    if word.is_empty() || word.contains('/') {
        return ChatCommand::Prompt(line.to_owned());
    }
    if word == "?" {
        return ChatCommand::Builtin { def: "help", arg };
    }
    if let Some(def) = canonical(word).filter(|d| d.offered_at(door)) {
        return ChatCommand::Builtin { def: def.name, arg };
    }
    match installed.iter().find(|s| skills::slug(&s.name) == word) {
        Some(skill) => ChatCommand::Skill {
            name: skill.name.clone(),
            text: arg,
        },
        None => ChatCommand::Unknown(word.to_owned()),
    }
}

/// The command list `/help` prints at `door` (and an unknown command is answered with).
pub fn help_text(door: Door, installed: &[Skill]) -> String {
    let mut lines = vec!["Commands:".to_owned()];
    for c in offered(door) {
        let command = format!("/{} {}", c.name, c.args);
        lines.push(format!("  {:<20} {}", command.trim_end(), c.what));
    }
    if !installed.is_empty() {
        lines.push("Skills (run TEXT with the skill):".to_owned());
        for skill in installed {
            let command = format!("/{} TEXT", skills::slug(&skill.name));
            lines.push(format!("  {command:<20} {}", skill.description));
        }
    }
    lines.push("Anything else is sent to the model.".to_owned());
    lines.join("\n")
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

    #[test]
    fn each_door_offers_and_parses_only_its_own_commands() {
        let names = |door| offered(door).map(|c| c.name).collect::<Vec<_>>();
        assert!(names(Door::Platform).contains(&"approve"));
        assert!(!names(Door::Chat).contains(&"approve"));
        assert!(
            !names(Door::Chat).contains(&"stop"),
            "chat reads no line mid-turn"
        );
        assert!(names(Door::Acp).contains(&"stop"));
        for door in [Door::Chat, Door::Rpc, Door::Acp, Door::Platform] {
            for shared in ["help", "new", "model", "status", "usage", "steer", "queue"] {
                assert!(names(door).contains(&shared), "{door:?} {shared}");
            }
        }
        assert_eq!(
            parse("/sethome", Door::Chat, &[]),
            ChatCommand::Unknown("sethome".into())
        );
        assert_eq!(
            parse("/set-home", Door::Platform, &[]),
            ChatCommand::Builtin {
                def: "sethome",
                arg: String::new()
            }
        );
        assert_eq!(
            parse("/etc/hosts is broken", Door::Chat, &[]),
            ChatCommand::Prompt("/etc/hosts is broken".into())
        );
        let help = help_text(Door::Acp, &[]);
        assert!(
            help.contains("/compress") && !help.contains("/busy"),
            "{help}"
        );
    }
}
