//! `config.yaml` read into a checked [`Config`], with the `.env`/environment overlay.

use crate::error::{ConfigError, Problem};
use crate::hermes_keys::{HERMES_GATEWAY_KEYS, HERMES_TOP_KEYS, SECTIONS};
use crate::home::Home;
use crate::node::{Node, NodeValue};
use crate::reader::{Reader, parse_bool_text};
use crate::route::{Route, RouteContext, RouteSource, read_route};
use std::collections::BTreeMap;

/// Default webhook port.
pub const DEFAULT_PORT: u16 = 8644;
/// Default accepted requests per route per rolling minute.
pub const DEFAULT_RATE_LIMIT: u32 = 30;
/// Default largest body.
pub const DEFAULT_MAX_BODY_BYTES: u64 = 1_048_576;
/// Default route-script time limit.
pub const DEFAULT_SCRIPT_TIMEOUT_SECS: u64 = 30;

/// Top-level keys of the webhook side.
const TOP_KEYS: &[&str] = &[
    "platforms",
    "gateway",
    "multiplex_profiles",
    "platform_toolsets",
];
/// Top-level blocks kept as written for the agent front doors (also known keys).
const AGENT_SECTIONS: &[&str] = &[
    "model",
    "providers",
    "custom_providers",
    "agent",
    "approvals",
    "terminal",
    "web",
    "command_allowlist",
    "security",
    "skills",
    "plugins",
    "max_live_sessions",
    "mcp_servers",
    "mcp_discovery_timeout",
    "delegation",
    "store",
    "metrics",
    "inbox",
    "tracing",
    "schedules",
];
const GATEWAY_KEYS: &[&str] = &["platforms", "multiplex_profiles", "api_server"];
const WEBHOOK_KEYS: &[&str] = &["enabled", "extra"];
const EXTRA_KEYS: &[&str] = &[
    "host",
    "port",
    "secret",
    "rate_limit",
    "max_body_bytes",
    "script_timeout_seconds",
    "routes",
    "max_concurrent_runs",
    "max_concurrent_runs_per_route",
    "retry_initial_seconds",
    "retry_max_seconds",
    "retry_for_seconds",
    "shutdown_grace_seconds",
    "header_timeout_seconds",
    "body_timeout_seconds",
    "idle_timeout_seconds",
    "max_connections",
    "max_body_bytes_in_flight",
];
/// Platform names herald knows (their own keys are read by the delivery targets).
const PLATFORM_NAMES: &[&str] = &[
    "webhook",
    "telegram",
    "discord",
    "slack",
    "signal",
    "sms",
    "whatsapp",
    "matrix",
    "mattermost",
    "homeassistant",
    "email",
    "dingtalk",
    "feishu",
    "wecom",
    "wecom_callback",
    "weixin",
    "bluebubbles",
    "qqbot",
    "yuanbao",
    "ntfy",
    "line",
    "teams",
    "google_chat",
    "irc",
    "api_server",
];

/// The webhook listener's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookSettings {
    pub enabled: bool,
    /// `None`: all interfaces (IPv4 and IPv6).
    pub host: Option<String>,
    pub port: u16,
    pub secret: Option<String>,
    pub rate_limit: u32,
    pub max_body_bytes: u64,
    pub script_timeout_secs: u64,
    /// The inbox workers (herald keys in `platforms.webhook.extra`).
    pub workers: WorkerSettings,
    /// Bounds on clients (herald keys in `platforms.webhook.extra`).
    pub connections: ConnectionSettings,
}

/// How hostile or slow clients are bounded (herald additions, all in
/// `platforms.webhook.extra`).
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionSettings {
    /// `header_timeout_seconds`: a request's head must arrive within this.
    pub header_timeout_secs: u64,
    /// `body_timeout_seconds`: a request's body must arrive within this.
    pub body_timeout_secs: u64,
    /// `idle_timeout_seconds`: a keep-alive connection with nothing to do is closed after this.
    pub idle_timeout_secs: u64,
    /// `max_connections`: open connections at once (kept below the descriptor limit).
    pub max_connections: u64,
    /// `max_body_bytes_in_flight`: bytes of request bodies being read and processed at once.
    pub max_body_bytes_in_flight: u64,
}

impl Default for ConnectionSettings {
    fn default() -> Self {
        ConnectionSettings {
            header_timeout_secs: 10,
            body_timeout_secs: 30,
            idle_timeout_secs: 60,
            max_connections: 4096,
            max_body_bytes_in_flight: 64 << 20,
        }
    }
}

/// How queued agent events are worked off (herald additions, all in
/// `platforms.webhook.extra`).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerSettings {
    /// `max_concurrent_runs`: agent runs and deliveries at once, all routes.
    pub max_runs: usize,
    /// `max_concurrent_runs_per_route`.
    pub max_runs_per_route: usize,
    /// `retry_initial_seconds`: the first wait after a transient failure (doubles).
    pub retry_initial_secs: u64,
    /// `retry_max_seconds`: the longest wait between attempts.
    pub retry_max_secs: u64,
    /// `retry_for_seconds`: how long a failing stage is retried before it is dead.
    pub retry_for_secs: u64,
    /// `shutdown_grace_seconds`: how long running turns may finish on SIGINT/SIGTERM.
    pub shutdown_grace_secs: u64,
}

impl Default for WorkerSettings {
    fn default() -> Self {
        WorkerSettings {
            max_runs: 8,
            max_runs_per_route: 4,
            retry_initial_secs: 1,
            retry_max_secs: 15,
            retry_for_secs: 600,
            shutdown_grace_secs: 30,
        }
    }
}

/// The whole checked configuration.
/// The toolsets `platform_toolsets` names for the platforms herald serves (`None`: the
/// platform's default set).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlatformToolsets {
    pub cli: Option<Vec<String>>,
    pub api_server: Option<Vec<String>>,
    pub webhook: Option<Vec<String>>,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub home: Home,
    pub webhook: WebhookSettings,
    /// Routes from `config.yaml` (the subscriptions file is loaded separately).
    pub routes: Vec<Route>,
    pub multiplex_profiles: bool,
    /// `platform_toolsets.{cli,api_server,webhook}`.
    pub platform_toolsets: PlatformToolsets,
    /// The OpenAI-compatible API server (`platforms.api_server`, `API_SERVER_*`).
    pub api_server: crate::api_settings::ApiServerSettings,
    /// The model choice (`model`, `providers`, `custom_providers`), typed.
    pub model: crate::model_settings::ModelSettings,
    /// Other platforms' blocks (telegram, discord, ...), for the delivery targets.
    pub platforms: std::collections::BTreeMap<String, crate::platforms::PlatformSettings>,
    /// Telegram's settings as Hermes reads them (`TELEGRAM_*`, `telegram:`,
    /// `platforms.telegram`); `None` when Telegram is off (no token, or `enabled: false`).
    pub telegram: Option<crate::telegram_settings::TelegramSettings>,
    /// Slack's settings as Hermes reads them (`SLACK_*`, `slack:`, `platforms.slack`),
    /// with herald's Events API; `None` when Slack is off.
    pub slack: Option<crate::slack_settings::SlackSettings>,
    /// Discord's settings as Hermes reads them (`DISCORD_*`, `discord:`,
    /// `platforms.discord`); `None` when Discord is off.
    pub discord: Option<crate::discord_settings::DiscordSettings>,
    /// The agent's settings (limits, terminal, approvals, web, skills), typed.
    pub agent: crate::agent_settings::AgentSettings,
    /// `mcp_servers:` and `mcp_discovery_timeout`.
    pub mcp: crate::mcp_settings::McpSettings,
    /// `delegation:`, how `delegate_task` starts children.
    pub delegation: crate::delegation_settings::DelegationSettings,
    /// `store:`, where the inbox, sessions and runs are kept.
    pub store: crate::store_settings::StoreSettings,
    /// `metrics:`, Prometheus metrics at `/metrics`.
    pub metrics: crate::metrics_settings::MetricsSettings,
    /// `schedules:`, scheduled jobs named in the configuration.
    pub schedules: Vec<crate::schedule_settings::ScheduleSettings>,
    /// `inbox:`, how long finished entries are kept.
    pub inbox: crate::inbox_settings::InboxSettings,
    /// `tracing:`, where OpenTelemetry traces go.
    pub tracing: crate::tracing_settings::TracingSettings,
    /// Unknown keys and other non-fatal findings, each reported once at start.
    pub warnings: Vec<Problem>,
    /// Mistakes herald serves through that change what routes do, in plain words (see
    /// [`Reader::findings`]); the start ends with them and `herald config check` prints them.
    pub findings: Vec<String>,
    /// Hermes settings in the file that herald does not implement (dotted keys, in file
    /// order), listed once at info level.
    pub hermes_only: Vec<String>,
    /// Signs that a chat platform is meant to receive messages (Hermes's gateway does;
    /// herald does not): reported as findings by the start and `herald config check`.
    pub chat_platforms: Vec<crate::chat_platforms::ChatPlatformUse>,
    /// Why `herald gateway run` would refuse to start (neither front door enabled, an API
    /// key it refuses), each with its file, line and key; `herald config check` lists them.
    pub start_refusals: Vec<Problem>,
}

/// Reads the environment (injected so tests need not touch the process's).
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Values `reload_dotenv` read after the start, over the process environment (which a
/// running multi-threaded process does not rewrite).
static RELOADED: std::sync::RwLock<BTreeMap<String, String>> =
    std::sync::RwLock::new(BTreeMap::new());

/// The process environment, with what `.env` said when it was last reloaded on top.
pub fn process_env(name: &str) -> Option<String> {
    let reloaded = RELOADED.read().ok().and_then(|r| r.get(name).cloned());
    reloaded.or_else(|| std::env::var(name).ok())
}

/// Makes `process_env(key)` answer `value` from now on (a value just written to `.env`).
pub fn remember_env(key: &str, value: &str) {
    if let Ok(mut r) = RELOADED.write() {
        r.insert(key.to_owned(), value.to_owned());
    }
}

/// Loads `<home>/.env` into the process environment, overriding what is set there.
pub fn load_dotenv(home: &Home) -> Result<(), ConfigError> {
    let path = home.env_file();
    if !path.exists() {
        return Ok(());
    }
    dotenvy::from_path_override(&path).map_err(|e| ConfigError::Read {
        path: path.clone(),
        source: std::io::Error::other(e.to_string()),
    })
}

/// Reads `<home>/.env` again: its values win in [`process_env`] from now on. How many
/// variables it changed or added (0 without the file).
pub fn reload_dotenv(home: &Home) -> Result<usize, ConfigError> {
    let path = home.env_file();
    if !path.exists() {
        return Ok(0);
    }
    let read_error = |e: dotenvy::Error| ConfigError::Read {
        path: path.clone(),
        source: std::io::Error::other(e.to_string()),
    };
    let mut read = BTreeMap::new();
    for pair in dotenvy::from_path_iter(&path).map_err(read_error)? {
        let (key, value) = pair.map_err(read_error)?;
        read.insert(key, value);
    }
    let changed = read
        .iter()
        .filter(|(k, v)| process_env(k).as_deref() != Some(v.as_str()))
        .count();
    if let Ok(mut r) = RELOADED.write() {
        r.extend(read);
    }
    Ok(changed)
}

impl Config {
    /// What routes are read against: the global secret, the bind host, the home.
    pub fn route_context(&self) -> RouteContext<'_> {
        RouteContext {
            global_secret: self.webhook.secret.as_deref(),
            host: self.webhook.host.as_deref(),
            home: self.home.root(),
        }
    }

    /// The subscriptions file as it is now, read against this config (a subscription
    /// named like a `config.yaml` route is skipped).
    pub fn subscriptions(&self) -> Result<crate::Subscriptions, crate::SubscriptionsError> {
        let statics: Vec<&str> = self.routes.iter().map(|r| r.name.as_str()).collect();
        crate::load_subscriptions(
            &self.home.subscriptions_file(),
            &statics,
            &self.route_context(),
        )
    }

    /// Reads `<home>/config.yaml` (an absent file is an empty config) and the environment.
    pub fn load(home: &Home, env: EnvLookup<'_>) -> Result<Config, ConfigError> {
        let path = home.config_file();
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(source) => return Err(ConfigError::Read { path, source }),
        };
        Self::from_yaml(home, &text, env)
    }

    /// Parses config text as if it were `<home>/config.yaml`.
    pub fn from_yaml(home: &Home, text: &str, env: EnvLookup<'_>) -> Result<Config, ConfigError> {
        let path = home.config_file();
        let doc: Node = if text.trim().is_empty() {
            Node::at(NodeValue::Map(Vec::new()), 0, 0)
        } else {
            // serde-saphyr's default options carry a budget against alias bombs.
            Node::parse_yaml(text).map_err(|e| crate::yaml_errors::syntax_error(&path, text, &e))?
        };
        let doc = if doc.is_null() {
            Node::at(NodeValue::Map(Vec::new()), 0, 0)
        } else {
            doc
        };
        let mut r = Reader::new(&path);
        for line in crate::yaml_errors::prompts_cut_by_comments(text) {
            r.findings.push(format!(
                "line {line} of config.yaml: an unquoted ` #` starts a YAML comment, so the prompt ends before it; put the prompt in quotes"
            ));
        }
        if !matches!(doc.value, NodeValue::Map(_)) {
            r.error(
                Some(&doc),
                "(top level)",
                format!(
                    "config.yaml must be a mapping of keys, found {}",
                    doc.kind()
                ),
            );
            return Err(ConfigError::Invalid(r.errors));
        }
        let known: Vec<&str> = TOP_KEYS
            .iter()
            .chain(AGENT_SECTIONS)
            .chain(crate::telegram_settings::TOP_KEYS)
            .chain(&["slack", "discord"])
            .chain(crate::chat_display::TOP_KEYS)
            .copied()
            .collect();
        let mut hermes_only = r.check_keys_knowing(&doc, "", &known, HERMES_TOP_KEYS);
        hermes_only.extend(crate::telegram_settings::check_top_level_block(
            &mut r, &doc,
        ));
        let gateway = doc.get("gateway").filter(|n| !n.is_null());
        if let Some(g) = gateway {
            let known: Vec<&str> = GATEWAY_KEYS
                .iter()
                .chain(crate::telegram_settings::GATEWAY_KEYS)
                .chain(crate::chat_display::GATEWAY_KEYS)
                .copied()
                .collect();
            hermes_only.extend(r.check_keys_knowing(g, "gateway", &known, HERMES_GATEWAY_KEYS));
        }
        for section in SECTIONS {
            if let Some(node) = doc.get(section.name).filter(|n| !n.is_null()) {
                hermes_only.extend(r.check_keys_knowing(
                    node,
                    section.name,
                    section.herald,
                    section.hermes,
                ));
            }
        }
        let sources = PlatformSources {
            top: doc
                .get("platforms")
                .and_then(|p| p.get("webhook"))
                .filter(|n| !n.is_null()),
            gateway: gateway
                .and_then(|g| g.get("platforms"))
                .and_then(|p| p.get("webhook"))
                .filter(|n| !n.is_null()),
        };
        for (prefix, platforms) in [
            ("platforms", doc.get("platforms")),
            (
                "gateway.platforms",
                gateway.and_then(|g| g.get("platforms")),
            ),
        ] {
            if let Some(p) = platforms.filter(|n| !n.is_null()) {
                r.check_keys(p, prefix, PLATFORM_NAMES);
            }
        }
        for (prefix, w) in [
            ("platforms.webhook", sources.top),
            ("gateway.platforms.webhook", sources.gateway),
        ] {
            if let Some(w) = w {
                note_misplaced_routes(&mut r, w, prefix);
                r.check_keys(w, prefix, WEBHOOK_KEYS);
                if let Some(extra) = w.get("extra").filter(|n| !n.is_null()) {
                    r.check_keys(extra, &format!("{prefix}.extra"), EXTRA_KEYS);
                }
            }
        }

        let platforms = crate::platforms::read_platforms(
            &mut r,
            &[
                ("platforms", doc.get("platforms").filter(|n| !n.is_null())),
                (
                    "gateway.platforms",
                    gateway
                        .and_then(|g| g.get("platforms"))
                        .filter(|n| !n.is_null()),
                ),
            ],
            &mut hermes_only,
        );
        let telegram = crate::telegram_settings::read_telegram_settings(
            &mut r,
            &crate::telegram_settings::TelegramInput {
                doc: &doc,
                gateway,
                platforms: &platforms,
                env,
                env_file: &home.env_file(),
            },
        )
        .map(|mut t| {
            t.display = crate::chat_display::read_chat_display(&mut r, &doc, env, "telegram");
            t
        });
        hermes_only.extend(crate::slack_settings::check_top_level_block(&mut r, &doc));
        hermes_only.extend(crate::discord_settings::check_top_level_block(&mut r, &doc));
        let slack = crate::slack_settings::read_slack_settings(&crate::chat_sources::ChatInput {
            doc: &doc,
            gateway,
            platforms: &platforms,
            env,
        })
        .map(|mut s| {
            s.display = crate::chat_display::read_chat_display(&mut r, &doc, env, "slack");
            s
        });
        let discord =
            crate::discord_settings::read_discord_settings(&crate::chat_sources::ChatInput {
                doc: &doc,
                gateway,
                platforms: &platforms,
                env,
            })
            .map(|mut d| {
                d.display = crate::chat_display::read_chat_display(&mut r, &doc, env, "discord");
                d
            });
        let mut webhook = read_webhook_settings(&mut r, &sources);
        apply_env(&mut webhook, env);
        if !env_enables_webhook(env) {
            for var in ["WEBHOOK_PORT", "WEBHOOK_SECRET"] {
                if env(var).is_some_and(|v| !v.trim().is_empty()) {
                    r.warnings.push(Problem {
                        place: crate::start_guard::env_place(&home.env_file(), var),
                        message: format!(
                            "ignored: {var} applies only with WEBHOOK_ENABLED=true (as in Hermes); set WEBHOOK_ENABLED=true beside it, or use `platforms.webhook.extra.{}` in config.yaml",
                            if var == "WEBHOOK_PORT" { "port" } else { "secret" }
                        ),
                    });
                }
            }
        }

        let multiplex_node = doc
            .get("multiplex_profiles")
            .or(gateway.and_then(|g| g.get("multiplex_profiles")));
        let mut multiplex_profiles = multiplex_node
            .filter(|n| !n.is_null())
            .and_then(|n| r.bool(n, "multiplex_profiles"))
            .unwrap_or(false);
        if let Some(v) = env("GATEWAY_MULTIPLEX_PROFILES").and_then(|v| parse_bool_text(&v)) {
            multiplex_profiles = v;
        }
        let mut platform_list = |name: &str| {
            doc.get("platform_toolsets")
                .and_then(|p| p.get(name))
                .filter(|n| !n.is_null())
                .and_then(|n| r.string_list(n, &format!("platform_toolsets.{name}")))
        };
        let platform_toolsets = PlatformToolsets {
            cli: platform_list("cli"),
            api_server: platform_list("api_server"),
            webhook: platform_list("webhook"),
        };

        let mut routes = Vec::new();
        let ctx = RouteContext {
            global_secret: webhook.secret.as_deref(),
            host: webhook.host.as_deref(),
            home: home.root(),
        };
        if let Some((routes_node, prefix)) = sources.lookup_extra("routes") {
            match &routes_node.value {
                NodeValue::Map(entries) => {
                    for (name, node) in entries {
                        let key = format!("{prefix}.{name}");
                        if let Some(route) =
                            read_route(&mut r, name, node, &key, RouteSource::Config, &ctx)
                        {
                            routes.retain(|x: &Route| x.name != *name);
                            routes.push(route);
                        }
                    }
                }
                NodeValue::Null => {}
                _ => r.error(
                    Some(routes_node),
                    &prefix,
                    format!(
                        "expected a mapping of route name to route, found {}",
                        routes_node.kind()
                    ),
                ),
            }
        }

        let chat_platforms = crate::chat_platforms::chat_platform_uses(&doc, gateway, env);
        let agent = crate::agent_settings::read_agent_settings(&mut r, &doc);
        let model = crate::model_settings::read_model_settings(&mut r, &doc);
        let mcp = crate::mcp_settings::read_mcp_settings(&mut r, &doc, env);
        let delegation = crate::delegation_settings::read_delegation_settings(&mut r, &doc);
        let store = crate::store_settings::read_store_settings(&mut r, &doc, env);
        let api_server = crate::api_settings::read_api_settings(&mut r, &platforms, gateway, env);
        let metrics = crate::metrics_settings::read_metrics_settings(&mut r, &doc, env);
        let schedules = crate::schedule_settings::read_schedules(&mut r, &doc);
        let inbox = crate::inbox_settings::read_inbox_settings(&mut r, &doc);
        let tracing = crate::tracing_settings::read_tracing_settings(&mut r, &doc);
        note_top_level_webhooks(&mut r, &doc);
        if doc.get("dashboard").is_some_and(|n| !n.is_null()) {
            r.findings.push(
                "`dashboard:` configures Hermes's web dashboard, which herald does not run: herald serves its own at /dashboard on the API listener (or on the webhook listener when the API is off); log in with the API key or the token `herald dashboard token` prints. The block is ignored.".into(),
            );
        }
        let mut hosts = Vec::new();
        if webhook.enabled {
            hosts.push(webhook.host.as_deref().unwrap_or("0.0.0.0"));
        }
        if api_server.enabled {
            hosts.push(api_server.host.as_str());
        }
        if let Some(f) = crate::metrics_settings::open_metrics_finding(&metrics, &hosts) {
            r.findings.push(f);
        }
        if !r.errors.is_empty() {
            return Err(ConfigError::Invalid(r.errors));
        }
        let start_refusals = crate::start_guard::start_refusals(&crate::start_guard::Guarded {
            config_file: &path,
            env_file: home.env_file(),
            doc: &doc,
            gateway,
            webhook_enabled: webhook.enabled,
            api: &api_server,
            chat_bot: telegram.is_some() || slack.is_some() || discord.is_some(),
            env,
        });
        Ok(Config {
            agent,
            mcp,
            delegation,
            store,
            metrics,
            schedules,
            inbox,
            tracing,
            home: home.clone(),
            webhook,
            routes,
            multiplex_profiles,
            platform_toolsets,
            platforms,
            telegram,
            slack,
            discord,
            model,
            api_server,
            warnings: r.warnings,
            findings: r.findings,
            hermes_only,
            chat_platforms,
            start_refusals,
        })
    }
}

/// `routes:` one level too shallow (beside `extra:` rather than in it) is never served.
fn note_misplaced_routes(r: &mut Reader, webhook: &Node, prefix: &str) {
    let Some(routes) = webhook.get("routes").filter(|n| !n.is_null()) else {
        return;
    };
    let count = routes.entries().len();
    let noun = if count == 1 { "route" } else { "routes" };
    r.findings.push(format!(
        "{count} {noun} under `{prefix}.routes` {} not served: routes live under `{prefix}.extra.routes`",
        if count == 1 { "is" } else { "are" }
    ));
}

/// A top-level `webhooks: routes:` block (as the seed's forum-topic example writes it)
/// is never served.
fn note_top_level_webhooks(r: &mut Reader, doc: &Node) {
    let Some(routes) = doc
        .get("webhooks")
        .and_then(|w| w.get("routes"))
        .filter(|n| !n.is_null())
    else {
        return;
    };
    let count = routes.entries().len();
    let noun = if count == 1 { "route" } else { "routes" };
    r.findings.push(format!(
        "{count} {noun} under a top-level `webhooks: routes:` block {} not served: routes belong under `platforms.webhook.extra.routes` (move the block there, indented under `platforms:` `webhook:` `extra:`)",
        if count == 1 { "is" } else { "are" }
    ));
}

/// `platforms.webhook` and `gateway.platforms.webhook`; the top-level one wins key by key.
struct PlatformSources<'a> {
    top: Option<&'a Node>,
    gateway: Option<&'a Node>,
}

impl<'a> PlatformSources<'a> {
    fn lookup(&self, key: &str) -> Option<(&'a Node, String)> {
        for (prefix, node) in [
            ("platforms.webhook", self.top),
            ("gateway.platforms.webhook", self.gateway),
        ] {
            if let Some(v) = node.and_then(|n| n.get(key)).filter(|n| !n.is_null()) {
                return Some((v, format!("{prefix}.{key}")));
            }
        }
        None
    }

    fn lookup_extra(&self, key: &str) -> Option<(&'a Node, String)> {
        for (prefix, node) in [
            ("platforms.webhook", self.top),
            ("gateway.platforms.webhook", self.gateway),
        ] {
            if let Some(v) = node.and_then(|n| n.get("extra")).and_then(|e| e.get(key)) {
                return Some((v, format!("{prefix}.extra.{key}")));
            }
        }
        None
    }
}

fn read_webhook_settings(r: &mut Reader, sources: &PlatformSources<'_>) -> WebhookSettings {
    let enabled = match sources.lookup("enabled") {
        // Strings other than the known words count as false (spec §1.2).
        Some((n, _)) => match &n.value {
            NodeValue::Str(s) => parse_bool_text(s).unwrap_or(false),
            _ => r.bool(n, "platforms.webhook.enabled").unwrap_or(false),
        },
        None => false,
    };
    let host = match sources.lookup_extra("host") {
        Some((n, key)) => r.string(n, &key).flatten().filter(|h| !h.trim().is_empty()),
        None => None,
    };
    let port = sources
        .lookup_extra("port")
        .filter(|(n, _)| !n.is_null())
        .and_then(|(n, key)| r.int(n, &key, 0, 65535))
        .map_or(DEFAULT_PORT, |p| p as u16);
    let secret = sources
        .lookup_extra("secret")
        .and_then(|(n, key)| r.string(n, &key).flatten())
        .filter(|s| !s.is_empty());
    let rate_limit = sources
        .lookup_extra("rate_limit")
        .filter(|(n, _)| !n.is_null())
        .and_then(|(n, key)| r.int(n, &key, 0, u32::MAX as i128))
        .map_or(DEFAULT_RATE_LIMIT, |v| v as u32);
    let max_body_bytes = sources
        .lookup_extra("max_body_bytes")
        .filter(|(n, _)| !n.is_null())
        .and_then(|(n, key)| r.int(n, &key, 1, 1 << 40))
        .map_or(DEFAULT_MAX_BODY_BYTES, |v| v as u64);
    let script_timeout_secs = sources
        .lookup_extra("script_timeout_seconds")
        .filter(|(n, _)| !n.is_null())
        .and_then(|(n, key)| r.int(n, &key, i64::MIN as i128, 86_400))
        .map_or(DEFAULT_SCRIPT_TIMEOUT_SECS, |v| v.max(1) as u64);
    let defaults = WorkerSettings::default();
    let mut number = |key: &str, min: i128, max: i128, default: u64| {
        sources
            .lookup_extra(key)
            .filter(|(n, _)| !n.is_null())
            .and_then(|(n, key)| r.int(n, &key, min, max))
            .map_or(default, |v| v as u64)
    };
    let workers = WorkerSettings {
        max_runs: number("max_concurrent_runs", 1, 1024, defaults.max_runs as u64) as usize,
        max_runs_per_route: number(
            "max_concurrent_runs_per_route",
            1,
            1024,
            defaults.max_runs_per_route as u64,
        ) as usize,
        retry_initial_secs: number(
            "retry_initial_seconds",
            1,
            3600,
            defaults.retry_initial_secs,
        ),
        retry_max_secs: number("retry_max_seconds", 1, 86_400, defaults.retry_max_secs),
        retry_for_secs: number("retry_for_seconds", 0, 30 * 86_400, defaults.retry_for_secs),
        shutdown_grace_secs: number(
            "shutdown_grace_seconds",
            0,
            3600,
            defaults.shutdown_grace_secs,
        ),
    };
    let defaults = ConnectionSettings::default();
    let connections = ConnectionSettings {
        header_timeout_secs: number(
            "header_timeout_seconds",
            1,
            3600,
            defaults.header_timeout_secs,
        ),
        body_timeout_secs: number("body_timeout_seconds", 1, 3600, defaults.body_timeout_secs),
        idle_timeout_secs: number(
            "idle_timeout_seconds",
            1,
            86_400,
            defaults.idle_timeout_secs,
        ),
        max_connections: number("max_connections", 1, 1 << 20, defaults.max_connections),
        max_body_bytes_in_flight: number(
            "max_body_bytes_in_flight",
            1,
            1 << 40,
            defaults.max_body_bytes_in_flight,
        ),
    };
    WebhookSettings {
        enabled,
        host,
        port,
        secret,
        rate_limit,
        max_body_bytes,
        script_timeout_secs,
        workers,
        connections,
    }
}

/// `WEBHOOK_ENABLED=true` in the environment (only then are `WEBHOOK_PORT` and
/// `WEBHOOK_SECRET` read).
fn env_enables_webhook(env: EnvLookup<'_>) -> bool {
    env("WEBHOOK_ENABLED")
        .and_then(|v| parse_bool_text(&v))
        .unwrap_or(false)
}

/// The webhook port the environment sets (`WEBHOOK_PORT` with `WEBHOOK_ENABLED=true`),
/// which wins over `platforms.webhook.extra.port`; `None` when the port is the file's.
pub fn webhook_port_from_env(env: EnvLookup<'_>) -> Option<u16> {
    env_enables_webhook(env)
        .then(|| env("WEBHOOK_PORT"))
        .flatten()
        .and_then(|p| p.trim().parse::<u16>().ok())
}

/// `WEBHOOK_ENABLED`, and only then `WEBHOOK_PORT` and `WEBHOOK_SECRET` (spec §1.4).
fn apply_env(w: &mut WebhookSettings, env: EnvLookup<'_>) {
    if !env_enables_webhook(env) {
        return;
    }
    w.enabled = true;
    if let Some(port) = webhook_port_from_env(env) {
        w.port = port;
    }
    if let Some(secret) = env("WEBHOOK_SECRET").filter(|s| !s.is_empty()) {
        w.secret = Some(secret);
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
