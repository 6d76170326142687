//! The bot's command menu (`setMyCommands`): the door's commands from the one command
//! table, then skills, named as Telegram allows (`[a-z0-9_]{1,32}`, Hermes's
//! `_sanitize_telegram_name`), at most [`MENU_MAX`].

use herald_session::commands::{Door, offered};
use serde_json::{Value, json};

/// Hermes's default menu size (Telegram allows 100).
pub const MENU_MAX: usize = 60;

/// A name as Telegram takes it: lowercase, `-` as `_`, other characters dropped,
/// runs of `_` as one, none at the ends, at most 32.
pub fn sanitize(raw: &str) -> String {
    let lowered = raw.to_lowercase().replace('-', "_");
    let mut name = String::new();
    for c in lowered
        .chars()
        .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
    {
        if c == '_' && name.ends_with('_') {
            continue;
        }
        name.push(c);
    }
    let name = name.trim_matches('_');
    name.chars()
        .take(32)
        .collect::<String>()
        .trim_end_matches('_')
        .to_owned()
}

/// The menu: commands first, then `skills` (name, description), deduplicated.
pub fn menu(skills: &[(String, String)]) -> Vec<Value> {
    let commands = offered(Door::Platform).map(|c| (c.name.to_owned(), c.what.to_owned()));
    let all = commands.chain(skills.iter().cloned());
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for (name, what) in all {
        let name = sanitize(&name);
        if name.is_empty() || !seen.insert(name.clone()) {
            continue;
        }
        let mut description: String = what.chars().take(256).collect();
        if description.chars().count() < 3 {
            description = format!("/{name}");
        }
        out.push(json!({"command": name, "description": description}));
        if out.len() == MENU_MAX {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_made_telegram_names_and_the_menu_is_bounded() {
        assert_eq!(sanitize("set-home"), "set_home");
        assert_eq!(sanitize("--Web__Research!"), "web_research");
        assert_eq!(sanitize(&"a".repeat(40)).len(), 32);
        let skills: Vec<(String, String)> = (0..100)
            .map(|i| (format!("skill-{i}"), "does x".into()))
            .collect();
        let m = menu(&skills);
        assert_eq!(m.len(), MENU_MAX);
        assert!(m.iter().any(|c| c["command"] == "new"));
        assert!(m.iter().all(|c| c["command"].as_str().unwrap().len() <= 32));
    }
}
