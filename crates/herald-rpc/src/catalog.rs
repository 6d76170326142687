//! The slash commands `herald rpc` serves, in Hermes's command-registry form (name,
//! aliases, argument hint, category): `commands.catalog`, `command.resolve` and
//! `complete.slash` all read the session's one command table, as the gateway door
//! offers it. A command is there when its work is served (by `slash.exec`, or by the
//! method Hermes's TUI calls for it); Hermes's commands for features herald does not
//! have are not listed, as Hermes leaves out its `gateway_only` ones.

use herald_session::commands::{self, CommandDef, Door};

/// The commands the gateway offers, in Hermes's registry order.
pub fn offered() -> impl Iterator<Item = &'static CommandDef> {
    commands::offered(Door::Rpc)
}

/// The command `/word` stands for here (a name or an alias, any case).
pub fn canonical(word: &str) -> Option<&'static CommandDef> {
    commands::canonical(word).filter(|c| c.offered_at(Door::Rpc))
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateway_resolves_only_the_commands_it_offers() {
        assert_eq!(canonical("/BUSY").map(|c| c.name), Some("busy"));
        assert_eq!(canonical("/reset").map(|c| c.name), Some("new"));
        // A chat platform's commands are not the TUI's.
        assert!(canonical("/approve").is_none() && canonical("/sethome").is_none());
        assert!(offered().any(|c| c.name == "stop"));
    }
}
