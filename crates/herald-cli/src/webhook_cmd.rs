//! `herald webhook subscribe|list|remove|test` (spec §18): dynamic routes in
//! `webhook_subscriptions.json`, picked up by a running gateway without a restart.

use anyhow::{Context, bail};
use clap::Subcommand;
use herald_config::default_config::generate_secret;
use herald_config::{Config, Home, Route, load_dotenv, process_env};
use serde_json::{Map, Value, json};
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
            let list = |s: &Option<String>| -> Vec<Value> {
                s.as_deref()
                    .map(|v| {
                        v.split(',')
                            .map(str::trim)
                            .filter(|x| !x.is_empty())
                            .map(|x| Value::from(x.to_owned()))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            let mut subs = read_subscriptions(&path)?;
            let existed = subs.contains_key(&name);
            let secret = secret.unwrap_or_else(generate_secret);
            let mut entry = Map::new();
            entry.insert(
                "description".into(),
                json!(description.unwrap_or_else(|| format!("Agent-created subscription: {name}"))),
            );
            entry.insert("events".into(), Value::Array(list(&events)));
            entry.insert("secret".into(), json!(secret));
            entry.insert("prompt".into(), json!(prompt));
            entry.insert("skills".into(), Value::Array(list(&skills)));
            entry.insert("deliver".into(), json!(deliver));
            entry.insert(
                "created_at".into(),
                json!(
                    jiff::Timestamp::now()
                        .strftime("%Y-%m-%dT%H:%M:%SZ")
                        .to_string()
                ),
            );
            if deliver_only {
                entry.insert("deliver_only".into(), json!(true));
            }
            if let Some(s) = &script {
                entry.insert("script".into(), json!(s));
            }
            if let Some(c) = &deliver_chat_id {
                entry.insert("deliver_extra".into(), json!({ "chat_id": c }));
            }
            subs.insert(name.clone(), Value::Object(entry));
            write_subscriptions(&path, &subs)?;
            let events_text = match list(&events) {
                e if e.is_empty() => "(all)".to_owned(),
                e => e
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", "),
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
            let subs = read_subscriptions(&path)?;
            if subs.is_empty() {
                outln!("No dynamic webhook subscriptions.");
                outln!("  Create one with: herald webhook subscribe <name> --prompt '...'");
                return Ok(ExitCode::SUCCESS);
            }
            outln!("{} webhook subscription(s):", subs.len());
            for (name, entry) in &subs {
                outln!();
                outln!("  ◆ {name}");
                if let Some(d) = entry["description"].as_str().filter(|d| !d.is_empty()) {
                    outln!("    {d}");
                }
                outln!("    URL:     {}/webhooks/{name}", base_url(&config));
                let events: Vec<&str> = entry["events"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                outln!(
                    "    Events:  {}",
                    if events.is_empty() {
                        "(all)".to_owned()
                    } else {
                        events.join(", ")
                    }
                );
                let direct = if entry["deliver_only"] == Value::Bool(true) {
                    " (direct — no agent)"
                } else {
                    ""
                };
                outln!(
                    "    Deliver: {}{direct}",
                    entry["deliver"].as_str().unwrap_or("log")
                );
                if let Some(s) = entry["script"].as_str() {
                    outln!("    Script:  {s}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        WebhookCommand::Remove { name } => {
            let name = name.trim().to_lowercase();
            let mut subs = read_subscriptions(&path)?;
            if subs.shift_remove(&name).is_none() {
                outln!("No subscription named '{name}'.");
                outln!(
                    "  Routes from config.yaml cannot be removed with this command; edit {} instead.",
                    home.config_file().display()
                );
                return Ok(ExitCode::FAILURE);
            }
            write_subscriptions(&path, &subs)?;
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
                outln!("No subscription named '{name}'.");
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

/// The route named `name`: a subscription, else a route of `config.yaml`.
fn find_route(config: &Config, name: &str) -> anyhow::Result<Option<Route>> {
    let subs = config.subscriptions().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(subs
        .routes
        .into_iter()
        .chain(config.routes.iter().cloned())
        .find(|r| r.name == name))
}

/// The subscriptions object, in file order; a missing file is empty.
fn read_subscriptions(path: &std::path::Path) -> anyhow::Result<Map<String, Value>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Map::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => bail!("{} is not a JSON object; fix or remove it", path.display()),
        Err(e) => bail!(
            "{} is not valid JSON ({e}); fix or remove it",
            path.display()
        ),
    }
}

/// Writes through a temporary file and an atomic rename, mode 0600.
fn write_subscriptions(path: &std::path::Path, subs: &Map<String, Value>) -> anyhow::Result<()> {
    let dir = path.parent().context("subscriptions file has no folder")?;
    herald_config::home::create_private_dir(dir)?;
    let mut text = serde_json::to_string_pretty(&Value::Object(subs.clone()))?;
    text.push('\n');
    herald_config::default_config::write_private_replace(path, text.as_bytes())
        .with_context(|| format!("cannot replace {}", path.display()))
}
