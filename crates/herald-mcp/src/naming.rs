//! How MCP tools are named to the model, as Hermes names them: `mcp__<server>__<tool>`,
//! every character outside `[A-Za-z0-9_]` turned into `_`, in toolset `mcp-<server>`.

/// The prefix of every MCP tool's name.
pub const TOOL_PREFIX: &str = "mcp__";

/// `value` with every character outside `[A-Za-z0-9_]` replaced by `_` (case kept).
pub fn sanitize(value: &str) -> String {
    value
        .chars()
        .map(|c| match c.is_ascii_alphanumeric() || c == '_' {
            true => c,
            false => '_',
        })
        .collect()
}

/// The name the model sees for `tool` of `server`.
pub fn tool_name(server: &str, tool: &str) -> String {
    format!("{TOOL_PREFIX}{}__{}", sanitize(server), sanitize(tool))
}

/// The toolset of `server`'s tools (the server's name as written).
pub fn toolset_name(server: &str) -> String {
    format!("mcp-{server}")
}

/// Whether a toolsets list entry names `server` (`mcp-<server>` or the bare name, as
/// Hermes accepts both). A bare name that is one of herald's toolsets (`web`,
/// `terminal`, `hermes-webhook`, `all` …) names that toolset, never a server of that
/// name: built-ins win, as in Hermes.
pub fn names_server(entry: &str, server: &str) -> bool {
    let entry = entry.trim();
    if entry.strip_prefix("mcp-") == Some(server) {
        return true;
    }
    let builtin = herald_agent::toolsets::is_toolset(entry) || matches!(entry, "all" | "*");
    entry == server && !builtin
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_hermes_makes_them() {
        assert_eq!(tool_name("my-srv", "get.file"), "mcp__my_srv__get_file");
        assert_eq!(tool_name("Git Hub", "Ünï"), "mcp__Git_Hub___n_");
        assert_eq!(toolset_name("my-srv"), "mcp-my-srv");
        assert!(names_server("mcp-gh", "gh") && names_server(" gh ", "gh"));
        assert!(!names_server("mcp-ghx", "gh"));
        assert!(!names_server("web", "web") && names_server("mcp-web", "web"));
    }
}
