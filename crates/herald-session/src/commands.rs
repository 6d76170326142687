//! The slash commands of an interactive session (`herald chat`, the JSON-RPC gateway,
//! ACP's nine): the built-ins, one per installed skill (`/<slug> TEXT` runs TEXT with
//! that skill), and a refusal with the list for any other `/word`. A line whose first
//! word is a path (`/etc/hosts is broken`) is a prompt.

use herald_agent::skills::{self, Skill};

/// What one input line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum ChatCommand {
    Prompt(String),
    Help,
    Quit,
    New,
    Resume(String),
    /// `/model` alone shows the model; with a spec it switches.
    Model(String),
    /// The tools the session offers.
    Tools,
    /// How much conversation the session holds.
    Context,
    /// Summarize the conversation so far (`/compress` too, as Hermes names it).
    Compact,
    /// Guidance for the running turn.
    Steer(String),
    /// A prompt to run after the current turn.
    Queue(String),
    Version,
    /// Switches the session's yolo (every approval given unasked) on or off.
    Yolo,
    /// A skill's slash command: the skill's name and the text after the command.
    Skill {
        name: String,
        text: String,
    },
    Unknown(String),
}

/// The built-in commands with their help lines.
pub const BUILT_INS: &[(&str, &str)] = &[
    ("/help", "this list"),
    ("/new", "start a new session (also /reset)"),
    ("/resume ID", "continue a stored session"),
    (
        "/model [NAME]",
        "show the model, or switch it for this session (provider:model too)",
    ),
    ("/tools", "list the tools this session offers"),
    ("/context", "how much conversation the session holds"),
    (
        "/compact",
        "summarize the conversation so far to free context (also /compress)",
    ),
    ("/steer TEXT", "add guidance to the running turn"),
    ("/queue TEXT", "run TEXT after the current turn"),
    ("/version", "herald's version"),
    (
        "/yolo",
        "approve every command and plugin request unasked in this session, or stop",
    ),
    (
        "/quit",
        "leave (also /exit, Ctrl-D, or Ctrl-C twice at an empty prompt)",
    ),
];

/// Reads one (trimmed, non-empty) input line.
pub fn parse(line: &str, installed: &[Skill]) -> ChatCommand {
    let Some(rest) = line.strip_prefix('/') else {
        return ChatCommand::Prompt(line.to_owned());
    };
    let (word, arg) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let arg = arg.trim().to_owned();
    if word.is_empty() || word.contains('/') {
        return ChatCommand::Prompt(line.to_owned());
    }
    match word {
        "help" | "?" => ChatCommand::Help,
        "quit" | "exit" => ChatCommand::Quit,
        "new" | "reset" => ChatCommand::New,
        "resume" => ChatCommand::Resume(arg),
        "model" => ChatCommand::Model(arg),
        "tools" => ChatCommand::Tools,
        "context" => ChatCommand::Context,
        "compact" | "compress" => ChatCommand::Compact,
        "steer" => ChatCommand::Steer(arg),
        "queue" => ChatCommand::Queue(arg),
        "version" => ChatCommand::Version,
        "yolo" => ChatCommand::Yolo,
        _ => match installed.iter().find(|s| skills::slug(&s.name) == word) {
            Some(skill) => ChatCommand::Skill {
                name: skill.name.clone(),
                text: arg,
            },
            None => ChatCommand::Unknown(word.to_owned()),
        },
    }
}

/// The command list `/help` prints (and an unknown command is answered with).
pub fn help_text(installed: &[Skill]) -> String {
    let mut lines = vec!["Commands:".to_owned()];
    for (command, what) in BUILT_INS {
        lines.push(format!("  {command:<16} {what}"));
    }
    if !installed.is_empty() {
        lines.push("Skills (run TEXT with the skill):".to_owned());
        for skill in installed {
            let command = format!("/{} TEXT", skills::slug(&skill.name));
            lines.push(format!("  {command:<16} {}", skill.description));
        }
    }
    lines.push("Anything else is sent to the model.".to_owned());
    lines.join("\n")
}
