//! `herald webhook subscribe|list|remove|test` (spec §18): dynamic routes in
//! `webhook_subscriptions.json`, picked up by a running gateway without a restart.

use anyhow::{Context, bail};
use clap::Subcommand;
use herald_config::default_config::generate_secret;
use herald_config::{Config, Home, load_dotenv, process_env};
use herald_webhook::verify::sign;
use serde_json::{Map, Value, json};
use std::io::Write;
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
    Remove { name: String },
    /// Send a signed test POST to a subscription on the running gateway.
    Test {
        name: String,
        /// JSON body to send.
        #[arg(long)]
        payload: Option<String>,
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
    if !config.webhook.enabled {
        println!("Webhook platform is not enabled.");
        println!("  Enable it in {}:", home.config_file().display());
        println!("    platforms:\n      webhook:\n        enabled: true");
        println!(
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
                println!(
                    "Error: Invalid name '{name}'. Use lower case letters, digits, '-' and '_', starting with a letter or digit."
                );
                return Ok(ExitCode::FAILURE);
            }
            if deliver_only
                && (deliver.trim().is_empty() || deliver.trim().eq_ignore_ascii_case("log"))
            {
                println!(
                    "Error: --deliver-only requires --deliver to be a real target (telegram, discord, slack, github_comment, ...), not 'log'."
                );
                return Ok(ExitCode::FAILURE);
            }
            if config.routes.iter().any(|r| r.name == name) {
                println!(
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
            println!(
                "{} webhook subscription: {name}",
                if existed { "Updated" } else { "Created" }
            );
            println!("  URL:    {}/webhooks/{name}", base_url(&config));
            println!("  Secret: {secret}");
            println!("  Events: {events_text}");
            println!("  Deliver: {deliver}");
            if deliver_only {
                println!("  Mode: direct delivery (no agent, zero LLM cost)");
            }
            if !prompt.is_empty() {
                let cut: String = prompt.chars().take(80).collect();
                let more = if prompt.chars().count() > 80 {
                    "..."
                } else {
                    ""
                };
                println!(
                    "  {}: {cut}{more}",
                    if deliver_only { "Message" } else { "Prompt" }
                );
            }
            if let Some(s) = &script {
                println!("  Script: {s}");
            }
            println!();
            println!(
                "Point the sender at the URL and sign requests with the secret (GitHub: X-Hub-Signature-256)."
            );
            println!("A running gateway picks this up on its next request; no restart needed.");
            Ok(ExitCode::SUCCESS)
        }
        WebhookCommand::List => {
            let subs = read_subscriptions(&path)?;
            if subs.is_empty() {
                println!("No dynamic webhook subscriptions.");
                println!("  Create one with: herald webhook subscribe <name> --prompt '...'");
                return Ok(ExitCode::SUCCESS);
            }
            println!("{} webhook subscription(s):", subs.len());
            for (name, entry) in &subs {
                println!();
                println!("  ◆ {name}");
                if let Some(d) = entry["description"].as_str().filter(|d| !d.is_empty()) {
                    println!("    {d}");
                }
                println!("    URL:     {}/webhooks/{name}", base_url(&config));
                let events: Vec<&str> = entry["events"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                println!(
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
                println!(
                    "    Deliver: {}{direct}",
                    entry["deliver"].as_str().unwrap_or("log")
                );
                if let Some(s) = entry["script"].as_str() {
                    println!("    Script:  {s}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        WebhookCommand::Remove { name } => {
            let name = name.trim().to_lowercase();
            let mut subs = read_subscriptions(&path)?;
            if subs.shift_remove(&name).is_none() {
                println!("No subscription named '{name}'.");
                println!(
                    "  Routes from config.yaml cannot be removed with this command; edit {} instead.",
                    home.config_file().display()
                );
                return Ok(ExitCode::FAILURE);
            }
            write_subscriptions(&path, &subs)?;
            println!("Removed webhook subscription: {name}");
            Ok(ExitCode::SUCCESS)
        }
        WebhookCommand::Test { name, payload } => {
            let name = name.trim().to_lowercase();
            let subs = read_subscriptions(&path)?;
            let Some(entry) = subs.get(&name) else {
                println!("No subscription named '{name}'.");
                return Ok(ExitCode::FAILURE);
            };
            let body = payload.unwrap_or_else(|| {
                r#"{"test": true, "event_type": "test", "message": "Hello from herald webhook test"}"#.to_owned()
            });
            if let Err(e) = serde_json::from_str::<Value>(&body) {
                println!("Error: --payload is not valid JSON: {e}");
                return Ok(ExitCode::FAILURE);
            }
            let secret = entry["secret"]
                .as_str()
                .or(config.webhook.secret.as_deref())
                .unwrap_or_default()
                .to_owned();
            let url = format!("{}/webhooks/{name}", base_url(&config));
            println!("Sending test POST to {url}");
            send_test(&url, &secret, body)
        }
    }
}

fn send_test(url: &str, secret: &str, body: String) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(10))
            .build()?;
        let sent = client
            .post(url)
            .header("Content-Type", "application/json")
            .header("X-GitHub-Event", "test")
            .header("X-Hub-Signature-256", sign::github(secret, body.as_bytes()))
            .body(body)
            .send()
            .await;
        match sent {
            Ok(resp) => {
                let status = resp.status();
                let text = resp.text().await.unwrap_or_default();
                println!("Response ({}): {text}", status.as_u16());
                Ok(if status.is_success() {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::FAILURE
                })
            }
            Err(e) => {
                println!("Error: {e}");
                println!("  Is the gateway running? Start it with: herald gateway run");
                Ok(ExitCode::FAILURE)
            }
        }
    })
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
    let tmp = dir.join(format!(".webhook_subscriptions.{}.tmp", std::process::id()));
    let mut text = serde_json::to_string_pretty(&Value::Object(subs.clone()))?;
    text.push('\n');
    {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut f = options
            .open(&tmp)
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
    }
    std::fs::rename(&tmp, path).with_context(|| format!("cannot replace {}", path.display()))?;
    Ok(())
}
