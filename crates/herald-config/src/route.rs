//! Routes: one named entry's keys read from a node (config.yaml or the subscriptions
//! file), compiled (filters, templates) and checked against the start-up rules.

use crate::node::{Node, NodeValue};
use crate::reader::{Reader, join_key};
use herald_webhook::filter::{self, CompiledFilter};
use herald_webhook::pick::PayloadPaths;
use herald_webhook::sender::{Sender, SenderPreset};
use herald_webhook::template::Template;
use herald_webhook::verify::INSECURE_NO_AUTH;
use serde_json::Value;
use std::path::Path;

/// Every key a route may have (spec §1.3).
pub const ROUTE_KEYS: &[&str] = &[
    "secret",
    "events",
    "filters",
    "script",
    "prompt",
    "skills",
    "deliver",
    "deliver_extra",
    "deliver_only",
    "enabled",
    "toolsets",
    "profile",
    "description",
    "created_at",
    "source",
    "public_key",
    "public_url",
    "header",
    "tolerance_seconds",
];

/// What leaving a route key out means, for a finding about a misspelt one.
fn meaning_of_absent(key: &str) -> &'static str {
    match key {
        "events" => "accepts every event",
        "filters" => "accepts every payload (no filters)",
        "secret" => "is verified with the global secret",
        "script" => "runs no script",
        "prompt" => "uses the default prompt",
        "deliver" => "delivers to the log only",
        "deliver_only" => "runs the agent instead of delivering directly",
        "deliver_extra" => "delivers to the target's home channel",
        "enabled" => "is enabled",
        "toolsets" => "gets the default toolsets",
        "skills" => "loads no skill",
        "source" => "detects the sender from its headers",
        _ => "ignores that setting",
    }
}

/// A key that looks like a misspelt route key: the route then behaves as if the real
/// key were absent, which is worth a finding (it still serves, spec §1.1).
fn note_misspelt_keys(reader: &mut Reader, name: &str, node: &Node) {
    for (key, _) in node.entries() {
        if ROUTE_KEYS.contains(&key.as_str()) {
            continue;
        }
        if let Some(meant) = crate::reader::suggest(key, ROUTE_KEYS) {
            reader.findings.push(format!(
                "route `{name}` {}: `{key}:` is not a key, did you mean `{meant}:`?",
                meaning_of_absent(meant)
            ));
        }
    }
}

/// The target a `source: discord` route delivers to unless it names another.
pub const DISCORD_INTERACTION_TARGET: &str = "discord_interaction";

/// A route's `deliver:` when it names none: a Discord interaction is answered by
/// editing its deferred response, anything else goes to the log.
pub fn default_deliver(sender: Option<Sender>) -> &'static str {
    match sender {
        Some(Sender::Discord) => DISCORD_INTERACTION_TARGET,
        _ => "log",
    }
}

/// Hosts on which `INSECURE_NO_AUTH` is allowed.
pub const LOOPBACK_HOSTS: &[&str] = &[
    "127.0.0.1",
    "localhost",
    "::1",
    "ip6-localhost",
    "ip6-loopback",
];

/// Where a route was defined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteSource {
    Config,
    Subscription,
}

/// A string value of `deliver_extra`, rendered per request; other values pass through.
#[derive(Debug, Clone)]
pub enum ExtraValue {
    Template(Template),
    Json(Value),
}

/// A checked, compiled route.
#[derive(Debug, Clone)]
pub struct Route {
    pub name: String,
    pub source: RouteSource,
    /// The effective secret (route `secret`, else the global one); empty means none.
    pub secret: String,
    pub events: Vec<String>,
    pub filter: CompiledFilter,
    pub script: Option<String>,
    /// `None` when the prompt is absent or empty: the default prompt is used.
    pub prompt: Option<Template>,
    pub skills: Vec<String>,
    pub deliver: String,
    pub deliver_extra: Vec<(String, ExtraValue)>,
    pub deliver_only: bool,
    pub enabled: bool,
    pub toolsets: Option<Vec<String>>,
    pub profile: Option<String>,
    pub description: Option<String>,
    pub created_at: Option<String>,
    /// The sender's preset (`source:`); `None` detects the scheme from the headers.
    pub sender: Option<SenderPreset>,
    /// The payload paths the route's filters and templates read (everything when it
    /// uses the default prompt, `{__raw__}` or a script).
    pub payload_paths: PayloadPaths,
}

/// What a route needs from the listener settings to be read and checked.
pub struct RouteContext<'a> {
    pub global_secret: Option<&'a str>,
    pub host: Option<&'a str>,
    pub home: &'a Path,
}

/// Whether `host` is one of the loopback names (trimmed, case-insensitive).
pub fn is_loopback_host(host: Option<&str>) -> bool {
    host.is_some_and(|h| {
        let h = h.trim().to_ascii_lowercase();
        LOOPBACK_HOSTS.contains(&h.as_str())
    })
}

/// Whether `host` (a bind address, or a `Host` header with or without its port) names
/// this machine: one of [`LOOPBACK_HOSTS`] or any loopback address (`127.0.0.2`,
/// `[::1]:8642`). Wider than [`is_loopback_host`], which keeps Hermes's list for
/// `INSECURE_NO_AUTH`.
pub fn is_loopback_name(host: &str) -> bool {
    let host = host.trim();
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None if host.parse::<std::net::IpAddr>().is_ok() => host,
        None => host.rsplit_once(':').map_or(host, |(n, _)| n),
    };
    is_loopback_host(Some(name))
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Reads and checks one route. Problems go to `reader`; `None` when any was an error.
pub fn read_route(
    reader: &mut Reader,
    name: &str,
    node: &Node,
    prefix: &str,
    source: RouteSource,
    ctx: &RouteContext<'_>,
) -> Option<Route> {
    let errors_before = reader.errors.len();
    let key = |k: &str| join_key(prefix, k);
    if !matches!(node.value, NodeValue::Map(_)) {
        reader.error(
            Some(node),
            prefix,
            format!("a route must be a mapping of keys, found {}", node.kind()),
        );
        return None;
    }
    reader.check_keys(node, prefix, ROUTE_KEYS);
    note_misspelt_keys(reader, name, node);

    let secret = match node.get("secret") {
        None => ctx.global_secret.unwrap_or("").to_owned(),
        Some(n) => reader
            .string(n, &key("secret"))
            .flatten()
            .unwrap_or_default(),
    };
    let events = opt(node, "events")
        .and_then(|n| reader.string_list(n, &key("events")))
        .unwrap_or_default();
    let filters_json = opt(node, "filters").map(Node::to_json);
    let (filter, issues) = filter::compile(filters_json.as_ref(), &|raw| {
        crate::home::resolve_home_path(raw, ctx.home)
    });
    if !issues.is_empty() {
        reader.findings.push(format!(
            "route `{name}` ignores every request: its `filters` cannot be used ({})",
            issues[0].message
        ));
    }
    // A filter the spec says never matches leaves the route serving (spec §8.1).
    for issue in issues {
        reader.warn(
            node.get("filters"),
            &format!("{}.{}", prefix, issue.at),
            issue.message,
        );
    }
    let script = opt(node, "script")
        .and_then(|n| reader.string(n, &key("script")))
        .flatten();
    let prompt_text = opt(node, "prompt")
        .and_then(|n| reader.string(n, &key("prompt")))
        .flatten()
        .unwrap_or_default();
    let prompt = (!prompt_text.is_empty()).then(|| Template::compile(&prompt_text));
    let skills = opt(node, "skills")
        .and_then(|n| reader.string_list(n, &key("skills")))
        .unwrap_or_default();
    let deliver = opt(node, "deliver")
        .and_then(|n| reader.string(n, &key("deliver")))
        .flatten();
    let deliver_extra = match opt(node, "deliver_extra") {
        None => Vec::new(),
        Some(n) => match &n.value {
            NodeValue::Map(entries) => entries
                .iter()
                .map(|(k, v)| {
                    let value = match &v.value {
                        NodeValue::Str(s) => ExtraValue::Template(Template::compile(s)),
                        _ => ExtraValue::Json(v.to_json()),
                    };
                    (k.clone(), value)
                })
                .collect(),
            _ => {
                reader.error(
                    Some(n),
                    &key("deliver_extra"),
                    format!("expected a mapping, found {}", n.kind()),
                );
                Vec::new()
            }
        },
    };
    let deliver_only = opt(node, "deliver_only")
        .and_then(|n| reader.bool(n, &key("deliver_only")))
        .unwrap_or(false);
    let enabled = match opt(node, "enabled") {
        None => true,
        Some(n) => {
            match &n.value {
                NodeValue::Bool(b) => *b,
                _ => {
                    reader.error(
                    Some(n),
                    &key("enabled"),
                    format!("expected true or false, found {}; only `enabled: false` disables a route", n.kind()),
                );
                    true
                }
            }
        }
    };
    let toolsets = opt(node, "toolsets").and_then(|n| reader.string_list(n, &key("toolsets")));
    let profile = opt(node, "profile")
        .and_then(|n| reader.string(n, &key("profile")))
        .flatten();
    let description = opt(node, "description")
        .and_then(|n| reader.string(n, &key("description")))
        .flatten();
    let created_at = opt(node, "created_at")
        .and_then(|n| reader.string(n, &key("created_at")))
        .flatten();

    let sender = crate::route_sender::read_sender(reader, name, node, prefix);
    let deliver = deliver.unwrap_or_else(|| {
        let preset = sender.as_ref().ok().and_then(|p| p.as_ref());
        default_deliver(preset.map(|p| p.sender)).to_owned()
    });
    let needs_secret = match &sender {
        Ok(Some(preset)) => preset.sender.needs_secret(),
        _ => true,
    };
    // Start-up rules (spec §2.2).
    if secret.is_empty() && needs_secret {
        reader.error(
            node.get("secret").or(Some(node)),
            &key("secret"),
            "no secret: set `secret:` on the route or a global `platforms.webhook.extra.secret` \
             (or WEBHOOK_SECRET); \"INSECURE_NO_AUTH\" is accepted only when bound to 127.0.0.1",
        );
    } else if secret == INSECURE_NO_AUTH && !is_loopback_host(ctx.host) {
        reader.error(
            node.get("secret").or(Some(node)),
            &key("secret"),
            format!(
                "INSECURE_NO_AUTH is allowed only on a loopback bind, but `extra.host` is {}: \
                 set `host: 127.0.0.1` or give the route a real secret",
                ctx.host
                    .map_or_else(|| "unset (all interfaces)".to_owned(), |h| format!("{h:?}"))
            ),
        );
    }
    if let Ok(Some(preset)) = &sender
        && preset.sender.makes_secret()
        && node.get("secret").is_none()
        && !secret.is_empty()
    {
        reader.findings.push(format!(
            "route `{name}` (`source: {}`) is checked with the global secret, but {} makes its own signing secret: set the route's `secret:` to the one {} shows",
            preset.sender, preset.sender, preset.sender
        ));
    }
    let standard = match &sender {
        Ok(Some(p)) => matches!(p.sender, Sender::StandardWebhooks | Sender::Svix),
        _ => true,
    };
    if standard
        && secret.starts_with("whsec_")
        && herald_webhook::verify::standard_key(&secret).is_err()
    {
        reader.warn(
            node.get("secret"),
            &key("secret"),
            "starts with `whsec_` but the rest is not base64: Standard Webhooks requests to this route will be refused",
        );
    }
    if deliver_only && (deliver.trim().is_empty() || deliver.trim().eq_ignore_ascii_case("log")) {
        reader.error(
            node.get("deliver").or(node.get("deliver_only")),
            &key("deliver"),
            "`deliver_only: true` needs a real target in `deliver` (telegram, discord, slack, \
             github_comment, ...), not `log`",
        );
    }

    let Ok(sender) = sender else {
        return None;
    };
    if reader.errors.len() > errors_before {
        return None;
    }
    let payload_paths = match &script {
        None => {
            let mut paths = PayloadPaths::new();
            filter.add_paths(&mut paths);
            match &prompt {
                Some(prompt) => prompt.add_paths(&mut paths),
                // The default prompt shows the whole payload, cut.
                None => paths.add_raw(),
            }
            for (_, value) in &deliver_extra {
                if let ExtraValue::Template(t) = value {
                    t.add_paths(&mut paths);
                }
            }
            if let Some(preset) = &sender {
                herald_webhook::sender::payload_paths(preset.sender, &mut paths);
            }
            paths
        }
        // A script is given the whole payload.
        Some(_) => PayloadPaths::everything(),
    };
    Some(Route {
        name: name.to_owned(),
        source,
        secret,
        events,
        filter,
        script,
        prompt,
        skills,
        deliver,
        deliver_extra,
        deliver_only,
        enabled,
        toolsets,
        profile,
        description,
        created_at,
        sender,
        payload_paths,
    })
}

/// A present, non-null entry.
fn opt<'a>(node: &'a Node, key: &str) -> Option<&'a Node> {
    node.get(key).filter(|n| !n.is_null())
}

#[cfg(test)]
mod loopback_tests {
    use super::*;

    #[test]
    fn loopback_names_with_and_without_ports() {
        for ok in [
            "localhost",
            "localhost:8642",
            "127.0.0.1:8642",
            "[::1]:8642",
            "::1",
            "127.0.0.2",
            "ip6-localhost:8642",
        ] {
            assert!(is_loopback_name(ok), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8642",
            "10.0.0.1:8642",
            "0.0.0.0",
            "::",
            "",
            "[::2]:1",
        ] {
            assert!(!is_loopback_name(bad), "{bad}");
        }
        assert!(!is_loopback_host(Some("127.0.0.2")), "Hermes's list stays");
    }
}
