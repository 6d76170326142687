//! Toolsets (agent spec §7): named groups of tools, resolved recursively, with the
//! narrow webhook default and the per-route replace-not-merge override.

/// Toolsets herald defines: (name, tools, included toolsets).
const TOOLSETS: &[(&str, &[&str], &[&str])] = &[
    ("web", &["web_search", "web_extract"], &[]),
    ("search", &["web_search"], &[]),
    ("vision", &["vision_analyze"], &[]),
    ("clarify", &["clarify"], &[]),
    ("terminal", &["terminal", "process"], &[]),
    (
        "file",
        &["read_file", "write_file", "patch", "search_files"],
        &[],
    ),
    (
        "skills",
        &["skills_list", "skill_view", "skill_manage"],
        &[],
    ),
    ("memory", &["memory"], &[]),
    ("cronjob", &["cronjob"], &[]),
    ("todo", &["todo"], &[]),
    ("session_search", &["session_search"], &[]),
    ("delegation", &["delegate_task"], &[]),
    ("debugging", &["terminal", "process"], &["web", "file"]),
    ("safe", &[], &["web", "vision"]),
    (
        "hermes-cli",
        &[],
        &[
            "web",
            "terminal",
            "file",
            "vision",
            "skills",
            "clarify",
            "delegation",
            "memory",
            "todo",
            "session_search",
            "cronjob",
        ],
    ),
    // Hermes gives its chat bots the CLI's core tools.
    ("hermes-telegram", &[], &["hermes-cli"]),
    ("hermes-slack", &[], &["hermes-cli"]),
    ("hermes-discord", &[], &["hermes-cli"]),
    (
        "hermes-acp",
        &[],
        &[
            "web",
            "terminal",
            "file",
            "vision",
            "skills",
            "delegation",
            "memory",
            "todo",
            "session_search",
        ],
    ),
    (
        "hermes-api-server",
        &[],
        &[
            "web",
            "terminal",
            "file",
            "vision",
            "skills",
            "delegation",
            "memory",
            "todo",
            "session_search",
            "cronjob",
        ],
    ),
    // Scheduled runs: Hermes's defaults less cronjob, messaging, clarify and memory.
    (
        "hermes-cron",
        &[],
        &[
            "web",
            "terminal",
            "file",
            "vision",
            "skills",
            "delegation",
            "todo",
        ],
    ),
    (
        "hermes-webhook",
        &["web_search", "web_extract", "vision_analyze", "clarify"],
        &[],
    ),
];

/// Hermes's toolsets that herald does not have, each with why.
const HERMES_ONLY: &[(&str, &str)] = &[
    (
        "browser",
        "the ten browser_* tools need a browser; a later release brings them",
    ),
    ("code_execution", "execute_code is not in herald yet"),
    ("x_search", "herald has no xAI search"),
    ("image_gen", "herald does not generate images"),
    ("video", "herald does not analyse video"),
    ("video_gen", "herald does not generate video"),
    ("computer_use", "herald has no computer use"),
    ("tts", "herald has no text to speech"),
    (
        "project",
        "the desktop app's project tools are not in herald",
    ),
    ("homeassistant", "herald has no Home Assistant tools"),
    ("kanban", "herald has no kanban tools"),
    ("context_engine", "herald has no context engine"),
    ("spotify", "herald has no Spotify tools"),
    (
        "coding",
        "herald has no `coding` toolset (name its parts: terminal, file, web)",
    ),
];

/// Why herald lacks `name` when it is one of Hermes's toolsets.
pub fn hermes_only(name: &str) -> Option<&'static str> {
    HERMES_ONLY
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, why)| *why)
}

/// Toolsets a scheduled run never has, whatever its job grants (Hermes's rule).
const SCHEDULE_FORBIDDEN: &[&str] = &["cronjob", "messaging", "clarify"];

/// The toolsets of a scheduled run: the job's list (default `hermes-cron`) with the
/// forbidden ones taken out, from inside composites too.
pub fn schedule_toolsets(job: Option<&[String]>) -> Vec<String> {
    let mut list: Vec<String> = match job {
        Some(list) if !list.is_empty() => list.to_vec(),
        _ => vec!["hermes-cron".to_owned()],
    };
    for name in SCHEDULE_FORBIDDEN {
        list = switched(&list, name, false);
    }
    list
}

/// Toolsets never granted to webhook runs through a per-route list.
const WEBHOOK_FORBIDDEN: &[&str] = &[];

/// The toolset a tool is shown under (the first one that lists it by name, as
/// Hermes's `get_toolset_for_tool` finds it), else `other`.
pub fn toolset_of(tool: &str) -> &'static str {
    TOOLSETS
        .iter()
        .find(|(_, tools, _)| tools.contains(&tool))
        .map_or("other", |(name, _, _)| name)
}

/// The toolsets a user turns on and off (not the platforms' composites), each with
/// the tools it resolves to.
pub fn configurable() -> Vec<(&'static str, Vec<String>)> {
    TOOLSETS
        .iter()
        .filter(|(name, _, _)| !name.starts_with("hermes-"))
        .map(|(name, _, _)| (*name, resolve(&[(*name).to_owned()]).0))
        .collect()
}

/// Whether `name` is a toolset herald defines.
pub fn is_toolset(name: &str) -> bool {
    TOOLSETS.iter().any(|(n, _, _)| *n == name)
}

/// `list` with `name` turned on or off, as Hermes's `/tools enable|disable` changes a
/// platform's list: off drops it, and a composite holding it (`hermes-cli`) is replaced
/// by its other parts.
pub fn switched(list: &[String], name: &str, on: bool) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for item in list {
        let parts = TOOLSETS.iter().find(|(n, _, _)| n == item).map(|t| t.2);
        match parts {
            Some(includes) if !on && includes.contains(&name) => {
                out.extend(
                    includes
                        .iter()
                        .filter(|i| **i != name)
                        .map(|i| (*i).to_owned()),
                );
            }
            _ if !on && item == name => {}
            _ => out.push(item.clone()),
        }
    }
    if on {
        let (before, _) = resolve(&out);
        let (after, _) = resolve(&[out.clone(), vec![name.to_owned()]].concat());
        if before != after {
            out.push(name.to_owned());
        }
    }
    out.dedup();
    out
}

/// The tools of the named toolsets; unknown names are returned separately.
pub fn resolve(names: &[String]) -> (Vec<String>, Vec<String>) {
    let mut tools: Vec<String> = Vec::new();
    let mut unknown = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for name in names {
        let name = name.trim();
        if name == "all" || name == "*" {
            for (n, _, _) in TOOLSETS {
                expand(n, &mut tools, &mut seen);
            }
        } else if TOOLSETS.iter().any(|(n, _, _)| *n == name) {
            expand(name, &mut tools, &mut seen);
        } else {
            unknown.push(name.to_owned());
        }
    }
    tools.sort();
    tools.dedup();
    (tools, unknown)
}

fn expand(name: &str, tools: &mut Vec<String>, seen: &mut Vec<String>) {
    if seen.iter().any(|s| s == name) {
        return;
    }
    seen.push(name.to_owned());
    if let Some((_, own, includes)) = TOOLSETS.iter().find(|(n, _, _)| *n == name) {
        tools.extend(own.iter().map(|t| (*t).to_owned()));
        for inc in *includes {
            expand(inc, tools, seen);
        }
    }
}

/// The toolsets of a webhook-started run: the route's list replaces the platform list,
/// which replaces the `hermes-webhook` default.
pub fn webhook_toolsets(route: Option<&[String]>, platform: Option<&[String]>) -> Vec<String> {
    match (route, platform) {
        (Some(r), _) if !r.is_empty() => r.to_vec(),
        (_, Some(p)) if !p.is_empty() => p.to_vec(),
        _ => vec!["hermes-webhook".to_owned()],
    }
}

/// The tools of a webhook-started run ([`webhook_toolsets`]); unknown and forbidden
/// names are dropped.
pub fn webhook_tools(
    route: Option<&[String]>,
    platform: Option<&[String]>,
) -> (Vec<String>, Vec<String>) {
    let chosen = webhook_toolsets(route, platform);
    let (allowed, forbidden): (Vec<String>, Vec<String>) = chosen
        .into_iter()
        .partition(|n| !WEBHOOK_FORBIDDEN.contains(&n.as_str()));
    let (tools, mut dropped) = resolve(&allowed);
    dropped.extend(forbidden);
    (tools, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn toolsets_switch_as_tools_enable_and_disable_do() {
        let cli = s(&["hermes-cli"]);
        let off = switched(&cli, "web", false);
        assert_eq!(
            off,
            s(&[
                "terminal",
                "file",
                "vision",
                "skills",
                "clarify",
                "delegation",
                "memory",
                "todo",
                "session_search",
                "cronjob"
            ])
        );
        assert_eq!(switched(&off, "web", true).last().unwrap(), "web");
        assert_eq!(switched(&cli, "web", true), cli, "already in it");
        assert!(is_toolset("file") && !is_toolset("nope"));
    }

    #[test]
    fn a_scheduled_run_never_gets_cronjob_messaging_or_clarify() {
        let (tools, _) = resolve(&schedule_toolsets(None));
        assert!(tools.contains(&"terminal".to_owned()) && tools.contains(&"web_search".to_owned()));
        assert!(!tools.contains(&"clarify".to_owned()) && !tools.contains(&"memory".to_owned()));
        let granted = schedule_toolsets(Some(&s(&["hermes-cli", "clarify"])));
        let (tools, _) = resolve(&granted);
        assert!(!tools.contains(&"clarify".to_owned()), "{granted:?}");
        assert!(tools.contains(&"memory".to_owned()), "granted: {granted:?}");
    }

    #[test]
    fn a_tool_is_shown_under_its_first_toolset() {
        assert_eq!(toolset_of("web_extract"), "web");
        assert_eq!(toolset_of("process"), "terminal");
        assert_eq!(toolset_of("patch"), "file");
        assert_eq!(toolset_of("mcp__x__y"), "other");
    }

    #[test]
    fn resolution() {
        let (t, u) = resolve(&s(&["file", "nope"]));
        assert_eq!(t, s(&["patch", "read_file", "search_files", "write_file"]));
        assert_eq!(u, s(&["nope"]));
        let (t, _) = resolve(&s(&["hermes-cli"]));
        for tool in [
            "terminal",
            "process",
            "read_file",
            "write_file",
            "patch",
            "search_files",
            "clarify",
            "vision_analyze",
            "skills_list",
            "skill_view",
            "web_search",
        ] {
            assert!(t.contains(&tool.to_owned()), "{tool}");
        }
        let (t, u) = resolve(&s(&["only-unknown"]));
        assert!(t.is_empty() && u.len() == 1);
    }

    #[test]
    fn webhook_rules() {
        let (t, _) = webhook_tools(None, None);
        assert_eq!(
            t,
            s(&["clarify", "vision_analyze", "web_extract", "web_search"])
        );
        assert!(!t.contains(&"terminal".to_owned()));
        let (t, dropped) = webhook_tools(Some(&s(&["terminal", "bogus"])), Some(&s(&["web"])));
        assert_eq!(
            t,
            s(&["process", "terminal"]),
            "the route's list replaces, not extends"
        );
        assert_eq!(dropped, s(&["bogus"]));
        let (t, _) = webhook_tools(Some(&[]), Some(&s(&["vision"])));
        assert_eq!(t, s(&["vision_analyze"]));
    }
}
