//! `herald webhook subscribe|list|remove|test` (spec §18): dynamic routes in
//! `webhook_subscriptions.json`, picked up by a running gateway without a restart.

use clap::Subcommand;
use herald_admin::subscriptions::{self, SubscribeRequest, Subscribed, SubscriptionError};
use herald_config::{Config, Home, Route, SubscriptionsFile, load_dotenv, process_env};
use std::process::ExitCode;

// Parsed once per process: the size of the largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
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
        /// Delivery target (log, telegram, discord, slack, github_comment, ...; default
        /// log, or discord_interaction with --source discord).
        #[arg(long)]
        deliver: Option<String>,
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
        /// The sender's preset: stripe, jira, shopify, slack, linear, pagerduty, sentry,
        /// paddle, bitbucket, gitea, forgejo, twilio, discord, token, standard-webhooks,
        /// svix (default: detected from the request's headers). See docs/senders.md.
        #[arg(long, value_name = "NAME")]
        source: Option<String>,
        /// Discord: the application's public key (hex).
        #[arg(long, value_name = "HEX")]
        public_key: Option<String>,
        /// Twilio: the URL exactly as configured in Twilio's console.
        #[arg(long, value_name = "URL")]
        public_url: Option<String>,
        /// Token: the header holding the bare secret (default: Authorization: Bearer).
        #[arg(long, value_name = "NAME")]
        header: Option<String>,
        /// Paddle: how old a signature may be, in seconds (default 5).
        #[arg(long, value_name = "SECONDS")]
        tolerance_seconds: Option<u32>,
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
        /// JSON body to send, or `@FILE` to read it from a file (default: a realistic
        /// sample for the route's `source:`, else a small test payload).
        #[arg(long, allow_hyphen_values = true)]
        payload: Option<String>,
        /// Event type to send, where the route's sender names it (`X-GitHub-Event`
        /// without a `source:`; default: the route's first listed event, else the
        /// sample's, else `test`).
        #[arg(long)]
        event: Option<String>,
    },
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
            source,
            public_key,
            public_url,
            header,
            tolerance_seconds,
        } => {
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
            let request = SubscribeRequest {
                name,
                description,
                events: list(&events),
                prompt: prompt.clone(),
                skills: list(&skills),
                deliver: deliver.unwrap_or_default(),
                deliver_chat_id,
                secret,
                deliver_only,
                script: script.clone(),
                sender: herald_config::SenderFields {
                    source,
                    public_key,
                    public_url,
                    header,
                    tolerance_seconds,
                },
            };
            let config_routes: Vec<String> = config.routes.iter().map(|r| r.name.clone()).collect();
            let s = Stores::open(home)?;
            let made = s.rt.block_on(subscriptions::subscribe(
                &path,
                &config_routes,
                s.store.as_ref(),
                request,
            ));
            let Subscribed {
                name,
                secret,
                replaced,
                entry,
            } = match made {
                Ok(s) => s,
                Err(e) => return Ok(refused(e)),
            };
            let events_text = match entry.events.is_empty() {
                true => "(all)".to_owned(),
                false => entry.events.join(", "),
            };
            outln!(
                "{} webhook subscription: {name}",
                if replaced { "Updated" } else { "Created" }
            );
            outln!("  URL:    {}/webhooks/{name}", base_url(&config));
            outln!("  Secret: {secret}");
            outln!("  Events: {events_text}");
            outln!("  Deliver: {}", entry.deliver);
            if let Some(source) = &entry.sender.source {
                outln!("  Source: {source}");
            }
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
            match &entry.sender.source {
                Some(source) => outln!(
                    "Paste the URL into {source}'s webhook settings (docs/senders.md says where); the secret is the one {source} gave you or the one above."
                ),
                None => outln!(
                    "Point the sender at the URL and sign requests with the secret (GitHub: X-Hub-Signature-256)."
                ),
            }
            outln!("A running gateway picks this up on its next request; no restart needed.");
            Ok(ExitCode::SUCCESS)
        }
        WebhookCommand::List => {
            let s = Stores::open(home)?;
            s.rt.block_on(subscriptions::refresh(&path, s.store.as_ref()))
                .map_err(anyhow::Error::msg)?;
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
                print_source(entry.source.as_deref());
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
                print_source(route.sender.as_ref().map(|p| p.sender.name()));
                if let Some(s) = &route.script {
                    outln!("    Script:  {s}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        WebhookCommand::Remove { name } => {
            let name = name.trim().to_lowercase();
            let s = Stores::open(home)?;
            let removed =
                s.rt.block_on(subscriptions::remove(&path, s.store.as_ref(), &name));
            match removed {
                Ok(()) => {}
                Err(SubscriptionError::NotFound(_)) => {
                    outln!("No subscription named '{name}'.");
                    outln!(
                        "  Routes from config.yaml cannot be removed with this command; edit {} instead.",
                        home.config_file().display()
                    );
                    return Ok(ExitCode::FAILURE);
                }
                Err(e) => return Ok(refused(e)),
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
            let limit = config.webhook.max_body_bytes;
            let payload = match payload
                .as_deref()
                .map(|p| read_payload(p, limit))
                .transpose()
            {
                Ok(p) => p,
                Err(e) => {
                    outln!("Error: {e}");
                    return Ok(ExitCode::FAILURE);
                }
            };
            let url = format!("{}/webhooks/{name}", base_url(&config));
            outln!("Sending test POST to {url}");
            crate::webhook_test::send(
                home,
                &route,
                &crate::webhook_test::TestRequest {
                    url: &url,
                    event: event.as_deref(),
                    payload,
                },
            )
        }
    }
}

/// `--payload`: the text, or `@FILE`'s (refused past the gateway's body limit, which
/// would answer it 413, before it is read).
fn read_payload(given: &str, limit: u64) -> anyhow::Result<String> {
    let Some(path) = given.strip_prefix('@') else {
        return Ok(given.to_owned());
    };
    let cannot = |e: std::io::Error| anyhow::anyhow!("cannot read --payload file {path}: {e}");
    let size = std::fs::metadata(path).map_err(cannot)?.len();
    if size > limit {
        anyhow::bail!(
            "--payload file {path} is {size} bytes, over the webhook's max_body_bytes ({limit}): the gateway would answer 413"
        );
    }
    std::fs::read_to_string(path).map_err(cannot)
}

/// The Source line of `webhook list`.
fn print_source(source: Option<&str>) {
    outln!(
        "    Source:  {}",
        source.unwrap_or("(detected from the request's headers)")
    );
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

/// Says why a subscription change was refused (as `webhook subscribe` always has).
fn refused(e: SubscriptionError) -> ExitCode {
    match e {
        SubscriptionError::Race => eprintln!("herald: {e}"),
        SubscriptionError::File(_) | SubscriptionError::Shared(_) => eprintln!("herald: {e}"),
        _ => outln!("Error: {e}"),
    }
    ExitCode::FAILURE
}

/// The home's store, when other instances share it (their subscriptions are shared
/// too), with a runtime to reach it.
struct Stores {
    store: Option<herald_store::Store>,
    rt: tokio::runtime::Runtime,
}

impl Stores {
    fn open(home: &Home) -> anyhow::Result<Stores> {
        let rt = crate::stores::runtime()?;
        let store =
            crate::stores::open(home, crate::stores::Access::Read, &rt)?.filter(|s| s.shared());
        Ok(Stores { store, rt })
    }
}
