//! Mistakes herald serves through but that change what routes do (spec §1.1, §2.2: a
//! start is never blocked by a route-level mistake), gathered in one list: the start ends
//! with it and `herald config check` prints it.

use herald_config::mcp_settings::McpSettings;
use herald_config::{Config, Route};
use herald_deliver::TargetSet;
use herald_session::toolsets;

/// Every finding: the config's own, the subscriptions file's (entries skipped or
/// misspelt), and routes whose delivery target cannot deliver.
pub fn gather(config: &Config, targets: &TargetSet) -> Vec<String> {
    let mut findings = config.findings.clone();
    let mut routes: Vec<Route> = config.routes.clone();
    match config.subscriptions() {
        Ok(subs) => {
            findings.extend(subs.findings);
            findings.extend(
                subs.skipped
                    .iter()
                    .filter(|p| p.message.ends_with("(subscription skipped)"))
                    .map(|p| {
                        format!(
                            "subscription `{}` is not served: {}",
                            p.place.key, p.message
                        )
                    }),
            );
            routes.extend(subs.routes);
        }
        Err(e) => findings.push(format!("no subscription is served: {e}")),
    }
    findings.extend(undeliverable(&routes, targets));
    findings.extend(unknown_toolsets(&routes, &config.mcp));
    findings.extend(
        crate::schedule::from_config::problems(&config.schedules, jiff::Timestamp::now())
            .into_iter()
            .map(|p| format!("{p}: this scheduled job is not run")),
    );
    findings.extend(unreachable_deliveries(config));
    if !config.schedules.is_empty() && !config.webhook.enabled {
        findings.push("`schedules:` run through herald's inbox and workers, which the webhook platform brings: set `platforms.webhook.enabled: true` (no route needed), or they do not run".into());
    }
    findings.extend(unreachable_profiles(&routes, config.multiplex_profiles));
    findings.extend(chat_platforms(config, targets));
    findings
}

/// One finding per chat platform the configuration means to receive messages from
/// (Hermes's gateway does; herald only sends), naming where each sign is.
fn chat_platforms(config: &Config, targets: &TargetSet) -> Vec<String> {
    let mut by_platform: Vec<(&str, Vec<&str>)> = Vec::new();
    for sign in &config.chat_platforms {
        match by_platform.iter_mut().find(|(p, _)| *p == sign.platform) {
            Some((_, sources)) => sources.push(&sign.source),
            None => by_platform.push((&sign.platform, vec![&sign.source])),
        }
    }
    by_platform
        .into_iter()
        .map(|(platform, sources)| {
            let sends = match targets.unavailable(platform) {
                None => format!(
                    "herald only sends to {platform} (`deliver: {platform}` on a route)"
                ),
                Some(why) if why.contains("not supported") => {
                    format!("herald does not send to {platform} either")
                }
                Some(why) => format!(
                    "herald only sends to {platform} (`deliver: {platform}`), once its target is enabled: it {why}"
                ),
            };
            format!(
                "{}: these receive {platform} messages in Hermes's gateway, but herald does not receive from {platform} (people writing to the bot get no answer from herald); {sends}. Keep Hermes's gateway running for chat (with its webhook platform off), or remove these settings to silence this",
                sources.join(", ")
            )
        })
        .collect()
}

/// Routes bound to a profile while multi-profile routing is off: no URL reaches them
/// (`/webhooks/<name>` serves only the default profile's routes).
fn unreachable_profiles(routes: &[Route], multiplex: bool) -> Vec<String> {
    if multiplex {
        return Vec::new();
    }
    routes
        .iter()
        .filter_map(|r| {
            let profile = r.profile.as_deref().filter(|p| *p != "default")?;
            Some(format!(
                "route `{}` has `profile: {profile}`, but multi-profile routing is off (`multiplex_profiles: true` or GATEWAY_MULTIPLEX_PROFILES=1 turns it on), so no URL reaches it: every request gets 404. Remove `profile:`, or turn it on and POST to /p/{profile}/webhooks/{}",
                r.name, r.name
            ))
        })
        .collect()
}

/// Every `deliver:` value herald has a target for (for the did-you-mean).
const DELIVER_NAMES: &[&str] = &[
    "telegram",
    "discord",
    "slack",
    "mattermost",
    "matrix",
    "email",
    "github_comment",
    "discord_interaction",
    "log",
];

/// Agent routes whose `toolsets` name toolsets herald does not have (nor an MCP
/// server): their runs go without them, and a list of nothing else leaves no tools.
fn unknown_toolsets(routes: &[Route], mcp: &McpSettings) -> Vec<String> {
    routes
        .iter()
        .filter(|r| r.enabled && !r.deliver_only)
        .filter_map(|r| {
            let names = r.toolsets.as_ref()?;
            let unknown: Vec<&String> = names
                .iter()
                .filter(|n| {
                    let n = n.trim();
                    !toolsets::is_toolset(n)
                        && !matches!(n, "all" | "*")
                        && !mcp.servers.iter().any(|s| s.name == n)
                })
                .collect();
            if unknown.is_empty() {
                return None;
            }
            let why: Vec<String> = unknown
                .iter()
                .map(|n| match toolsets::hermes_only(n.trim()) {
                    Some(why) => format!("`{n}` ({why})"),
                    None => format!("`{n}` (unknown; a plugin's toolset is fine if `herald plugins list` shows it)"),
                })
                .collect();
            let effect = if unknown.len() == names.len() {
                "its runs have no tools at all"
            } else {
                "its runs go without them"
            };
            Some(format!(
                "route `{}` names toolsets herald does not have: {}; {effect}",
                r.name,
                why.join(", ")
            ))
        })
        .collect()
}

/// Scheduled jobs that deliver to Hermes's `origin` or `all`, which herald cannot reach
/// yet: their answers are kept as `local`.
fn unreachable_deliveries(config: &Config) -> Vec<String> {
    let path = crate::schedule::jobs::file_of(config.home.root());
    let Ok(loaded) = crate::schedule::jobs::load(&path) else {
        return Vec::new();
    };
    loaded
        .jobs
        .iter()
        .filter(|j| j.enabled)
        .filter_map(|j| {
            let deliver = j.deliver.as_deref()?;
            let lost: Vec<&str> = deliver
                .split(',')
                .map(str::trim)
                .filter(|d| crate::schedule::unreachable_target(d))
                .collect();
            (!lost.is_empty()).then(|| {
                format!(
                    "scheduled job `{}` ({}) delivers to `{}`, which herald cannot reach yet (the chat the job was made in, every home channel): its answers go to the other targets named, else are kept in the inbox and the log as `local`; give it a target such as `telegram:CHAT_ID` (PATCH /api/jobs, the cronjob tool, or `herald schedule remove` and `add`)",
                    j.name,
                    j.id,
                    lost.join(",")
                )
            })
        })
        .collect()
}

/// MCP servers and the agent routes they are withheld from: a webhook run gets an MCP
/// server's tools only when its route names the server in `toolsets` (sender-steered
/// runs stay narrow), where Hermes offered them to every run.
pub fn webhook_mcp_note(config: &Config) -> Option<String> {
    let servers: Vec<&str> = config
        .mcp
        .servers
        .iter()
        .filter(|s| s.enabled)
        .map(|s| s.name.as_str())
        .collect();
    let routes: Vec<&str> = config
        .routes
        .iter()
        .filter(|r| r.enabled && !r.deliver_only)
        .filter(|r| {
            r.toolsets
                .as_ref()
                .is_none_or(|t| !servers.iter().any(|s| t.iter().any(|n| n == s)))
        })
        .map(|r| r.name.as_str())
        .collect();
    if servers.is_empty() || routes.is_empty() {
        return None;
    }
    Some(format!(
        "MCP servers {} are not offered to the webhook runs of routes {}: a webhook run gets an MCP server's tools only when its route names the server in `toolsets` (e.g. `toolsets: [hermes-webhook, {}]`), where Hermes offered them to every run",
        servers.join(", "),
        routes.join(", "),
        servers[0]
    ))
}

/// Enabled routes whose target is not enabled or not known.
fn undeliverable(routes: &[Route], targets: &TargetSet) -> Vec<String> {
    routes
        .iter()
        .filter(|r| r.enabled)
        .filter_map(|r| {
            let mut why = targets.unavailable(&r.deliver)?;
            let (name, target) = (&r.name, r.deliver.trim());
            if why.contains("not supported")
                && let Some(close) = herald_config::reader::suggest(target, DELIVER_NAMES)
            {
                why = format!("{why} (did you mean `deliver: {close}`?)");
            }
            Some(if r.deliver_only {
                format!(
                    "route `{name}` delivers to {target}, which {why}: every request will answer 502"
                )
            } else {
                format!(
                    "route `{name}` delivers its answers to {target}, which {why}: every answer will fail to deliver"
                )
            })
        })
        .collect()
}
