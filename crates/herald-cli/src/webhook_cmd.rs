//! `herald webhook subscribe|list|remove|test` (spec §18): dynamic routes in
//! `webhook_subscriptions.json`, picked up by a running gateway without a restart.

use clap::Subcommand;
use herald_config::default_config::generate_secret;
use herald_config::{
    Config, DeliverChat, Home, NewSubscription, Route, SubscriptionsFile, load_dotenv, process_env,
};
use serde_json::Value;
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum WebhookCommand {
    /// Create or replace a subscription (a dynamic route).
    #[command(visible_alias = "add")]
    Subscribe {
        /// Route name: lower case letters, digits, `-` and `_`.
        name: String,
        /// Prompt template (the message itself with --deliver-only).
        #[arg(long, default_value = "")]
        prompt: String,
        /// Accepted event types, comma-separated (default: all).
        #[arg(long)]
        events: Option<String>,
        /// Description shown by `webhook list`.
        #[arg(long)]
        description: Option<String>,
        /// Skills, comma-separated.
        #[arg(long)]
        skills: Option<String>,
        /// Delivery target (log, telegram, discord, slack, github_comment, ...).
        #[arg(long, default_value = "log")]
        deliver: String,
        /// Chat id for the target (stored as deliver_extra.chat_id).
        #[arg(long)]
        deliver_chat_id: Option<String>,
        /// Secret (default: a generated one).
        #[arg(long)]
        secret: Option<String>,
        /// Send the rendered prompt directly, with no agent.
        #[arg(long)]
        deliver_only: bool,
        /// Script under the home's scripts/ folder.
        #[arg(long)]
        script: Option<String>,
    },
    /// List subscriptions.
    #[command(visible_alias = "ls")]
    List,
    /// Remove a subscription.
    #[command(visible_alias = "rm")]
    Remove {
        /// The subscription's name (as `webhook list` shows it).
        name: String,
    },
    /// Send a signed test POST to a subscription on the running gateway.
    Test {
        /// The route's name: a subscription or a route in config.yaml.
        name: String,
        /// JSON body to send.
        #[arg(long)]
        payload: Option<String>,
        /// Event type to send as `X-GitHub-Event` (default: the route's first listed
        /// event, else `test`).
        #[arg(long)]
        event: Option<String>,
    },
}

static NAME_RE: std::sync::LazyLock<Option<regex::Regex>> =
    std::sync::LazyLock::new(|| regex::Regex::new("^[a-z0-9][a-z0-9_-]*$").ok());

fn normalize(name: &str) -> String {
    name.trim().to_lowercase().replace(' ', "-")
}

/// `http://<host>:<port>` as the CLI shows it.
fn base_url(config: &Config) -> String {
    let host = match config.webhook.host.as_deref().map(str::trim) {
        None | Some("") | Some("0.0.0.0") | Some("::") => "localhost".to_owned(),
        Some(h) if h.contains(':') && !h.starts_with('[') => format!("[{h}]"),
        Some(h) => h.to_owned(),
    };
    format!("http://{host}:{}", config.webhook.port)
}

pub fn run(home: &Home, command: WebhookCommand) -> anyhow::Result<ExitCode> {
    load_dotenv(home)?;
    let config = Config::load(home, &process_env)
        .map_err(|e| anyhow::anyhow!("configuration error:\n{e}"))?;
    if !config.webhook.enabled && !home.config_file().exists() {
        outln!("Webhook platform is not enabled: there is no configuration yet.");
        outln!(
            "  `herald gateway run` writes {} on its first start (the webhook platform enabled),",
            home.config_file().display()
        );
        outln!("  or run `herald gateway setup` to answer a few questions first.");
        return Ok(ExitCode::FAILURE);
    }
    if !config.webhook.enabled {
        outln!("Webhook platform is not enabled.");
        outln!("  Enable it in {}:", home.config_file().display());
        outln!("    platforms:\n      webhook:\n        enabled: true");
        outln!(
            "  or set WEBHOOK_ENABLED=true in {}",
            home.env_file().display()
        );
        return Ok(ExitCode::FAILURE);
    }
    let path = home.subscriptions_file();
    match command {
        WebhookCommand::Subscribe {
            name,
            prompt,
            events,
            description,
            skills,
            deliver,
            deliver_chat_id,
            secret,
            deliver_only,
            script,
        } => {
            let name = normalize(&name);
            if !NAME_RE.as_ref().is_some_and(|re| re.is_match(&name)) {
                outln!(
                    "Error: Invalid name '{name}'. Use lower case letters, digits, '-' and '_', starting with a letter or digit."
                );
                return Ok(ExitCode::FAILURE);
            }
            if deliver_only
                && (deliver.trim().is_empty() || deliver.trim().eq_ignore_ascii_case("log"))
            {
                outln!(
                    "Error: --deliver-only requires --deliver to be a real target (telegram, discord, slack, github_comment, ...), not 'log'."
                );
                return Ok(ExitCode::FAILURE);
            }
            if config.routes.iter().any(|r| r.name == name) {
                outln!(
                    "Error: '{name}' is already a route in {}; config.yaml wins on a name clash, so this subscription would never be used. Choose another name.",
                    home.config_file().display()
                );
                return Ok(ExitCode::FAILURE);
            }
            let list = |s: &Option<String>| -> Vec<String> {
                s.as_deref()
                    .map(|v| {
                        v.split(',')
                            .map(str::trim)
                            .filter(|x| !x.is_empty())
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default()
            };
            let shared = SharedSubscriptions::pull(home)?;
            let mut subs = SubscriptionsFile::open(&path)?;
            let existed = subs.contains(&name);
            let secret = secret.unwrap_or_else(generate_secret);
            let entry = NewSubscription {
                description: description
                    .unwrap_or_else(|| format!("Agent-created subscription: {name}")),
                events: list(&events),
                secret: secret.clone(),
                prompt: prompt.clone(),
                skills: list(&skills),
                deliver: deliver.clone(),
                created_at: jiff::Timestamp::now()
                    .strftime("%Y-%m-%dT%H:%M:%SZ")
                    .to_string(),
                deliver_only,
                script: script.clone(),
                deliver_extra: deliver_chat_id.map(|chat_id| DeliverChat { chat_id }),
            };
            subs.put(&name, &entry);
            subs.save()?;
            if !SharedSubscriptions::push(shared, &path)? {
                return Ok(ExitCode::FAILURE);
            }
            let events_text = match entry.events.is_empty() {
                true => "(all)".to_owned(),
                false => entry.events.join(", "),
            };
            outln!(
                "{} webhook subscription: {name}",
                if existed { "Updated" } else { "Created" }
            );
            outln!("  URL:    {}/webhooks/{name}", base_url(&config));
            outln!("  Secret: {secret}");
            outln!("  Events: {events_text}");
            outln!("  Deliver: {deliver}");
            if deliver_only {
                outln!("  Mode: direct delivery (no agent, zero LLM cost)");
            }
            if !prompt.is_empty() {
                let cut: String = prompt.chars().take(80).collect();
                let more = if prompt.chars().count() > 80 {
                    "..."
                } else {
                    ""
                };
                outln!(
                    "  {}: {cut}{more}",
                    if deliver_only { "Message" } else { "Prompt" }
                );
            }
            if let Some(s) = &script {
                outln!("  Script: {s}");
            }
            outln!();
            outln!(
                "Point the sender at the URL and sign requests with the secret (GitHub: X-Hub-Signature-256)."
            );
            outln!("A running gateway picks this up on its next request; no restart needed.");
            Ok(ExitCode::SUCCESS)
        }
        WebhookCommand::List => {
            drop(SharedSubscriptions::pull(home)?);
            let subs = SubscriptionsFile::open(&path)?.listed();
            if subs.is_empty() {
                outln!("No dynamic webhook subscriptions.");
                outln!("  Create one with: herald webhook subscribe <name> --prompt '...'");
            } else {
                outln!("{} webhook subscription(s):", subs.len());
            }
            for entry in &subs {
                let name = &entry.name;
                outln!();
                outln!("  ◆ {name}");
                if let Some(d) = &entry.description {
                    outln!("    {d}");
                }
                outln!("    URL:     {}/webhooks/{name}", base_url(&config));
                print_route_lines(&entry.events, &entry.deliver, entry.deliver_only);
                if let Some(s) = &entry.script {
                    outln!("    Script:  {s}");
                }
            }
            if !config.routes.is_empty() {
                outln!();
                outln!(
                    "{} route(s) in {}:",
                    config.routes.len(),
                    home.config_file().display()
                );
            }
            for route in &config.routes {
                let name = &route.name;
                outln!();
                let off = if route.enabled { "" } else { " (disabled)" };
                outln!("  ◆ {name}{off}");
                if let Some(d) = &route.description {
                    outln!("    {d}");
                }
                outln!("    URL:     {}/webhooks/{name}", base_url(&config));
                print_route_lines(&route.events, &route.deliver, route.deliver_only);
                if let Some(s) = &route.script {
                    outln!("    Script:  {s}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        WebhookCommand::Remove { name } => {
            let name = name.trim().to_lowercase();
            let shared = SharedSubscriptions::pull(home)?;
            let mut subs = SubscriptionsFile::open(&path)?;
            if !subs.remove(&name) {
                outln!("No subscription named '{name}'.");
                outln!(
                    "  Routes from config.yaml cannot be removed with this command; edit {} instead.",
                    home.config_file().display()
                );
                return Ok(ExitCode::FAILURE);
            }
            subs.save()?;
            if !SharedSubscriptions::push(shared, &path)? {
                return Ok(ExitCode::FAILURE);
            }
            outln!("Removed webhook subscription: {name}");
            Ok(ExitCode::SUCCESS)
        }
        WebhookCommand::Test {
            name,
            payload,
            event,
        } => {
            let name = name.trim().to_lowercase();
            let Some(route) = find_route(&config, &name)? else {
                outln!("No subscription or config.yaml route named '{name}'.");
                let names = route_names(&config)?;
                match names.is_empty() {
                    true => outln!(
                        "  There are no routes yet: herald webhook subscribe NAME --deliver log"
                    ),
                    false => outln!("  Routes: {}", names.join(", ")),
                }
                return Ok(ExitCode::FAILURE);
            };
            let body = payload.unwrap_or_else(|| {
                r#"{"test": true, "event_type": "test", "message": "Hello from herald webhook test"}"#.to_owned()
            });
            if let Err(e) = serde_json::from_str::<Value>(&body) {
                outln!("Error: --payload is not valid JSON: {e}");
                return Ok(ExitCode::FAILURE);
            }
            let event = event
                .or_else(|| route.events.first().cloned())
                .unwrap_or_else(|| "test".to_owned());
            let url = format!("{}/webhooks/{name}", base_url(&config));
            outln!("Sending test POST to {url}");
            crate::webhook_test::send(
                home,
                &route,
                &crate::webhook_test::TestRequest {
                    url: &url,
                    event: &event,
                    body,
                },
            )
        }
    }
}

/// The Events and Deliver lines of `webhook list`.
fn print_route_lines(events: &[String], deliver: &str, deliver_only: bool) {
    let events = match events.is_empty() {
        true => "(all)".to_owned(),
        false => events.join(", "),
    };
    outln!("    Events:  {events}");
    let direct = if deliver_only {
        " (direct — no agent)"
    } else {
        ""
    };
    outln!("    Deliver: {deliver}{direct}");
}

/// Every route `webhook test` can send to: the subscriptions, then config.yaml's.
fn route_names(config: &Config) -> anyhow::Result<Vec<String>> {
    let subs = config.subscriptions().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(subs
        .routes
        .iter()
        .chain(&config.routes)
        .map(|r| r.name.clone())
        .collect())
}

/// The route named `name`: a subscription, else a route of `config.yaml`.
fn find_route(config: &Config, name: &str) -> anyhow::Result<Option<Route>> {
    let subs = config.subscriptions().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(subs
        .routes
        .into_iter()
        .chain(config.routes.iter().cloned())
        .find(|r| r.name == name))
}

/// The subscriptions of a store several instances share: the home's file brought in
/// step before a change, and the change pushed to every instance after it.
struct SharedSubscriptions {
    store: herald_store::Store,
    rt: tokio::runtime::Runtime,
    version: Option<i64>,
}

impl SharedSubscriptions {
    /// `None` when the home's store is its own (SQLite): the file is all there is.
    fn pull(home: &Home) -> anyhow::Result<Option<SharedSubscriptions>> {
        let rt = crate::stores::runtime()?;
        let Some(store) = crate::stores::open(home, crate::stores::Access::Read, &rt)? else {
            return Ok(None);
        };
        if !store.shared() {
            return Ok(None);
        }
        let path = home.subscriptions_file();
        let version = rt
            .block_on(herald_gateway::shared_subscriptions::pull(&store, &path))
            .map_err(anyhow::Error::msg)?;
        Ok(Some(SharedSubscriptions { store, rt, version }))
    }

    /// Pushes the changed file; false (said) when another instance changed the
    /// subscriptions at the same moment.
    fn push(shared: Option<SharedSubscriptions>, path: &std::path::Path) -> anyhow::Result<bool> {
        let Some(s) = shared else {
            return Ok(true);
        };
        let pushed =
            s.rt.block_on(herald_gateway::shared_subscriptions::push(
                &s.store, path, s.version,
            ))
            .map_err(anyhow::Error::msg)?;
        if !pushed {
            eprintln!(
                "herald: another instance changed the subscriptions at the same moment; nothing was shared: run the command again"
            );
            let _ =
                s.rt.block_on(herald_gateway::shared_subscriptions::pull(&s.store, path));
        }
        Ok(pushed)
    }
}
