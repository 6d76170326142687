//! The series, one struct per family of them, each recording through methods that
//! take the names herald knows and bound them ([`crate::names`]).

use crate::labels::*;
use crate::names::{Names, UNKNOWN};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn seconds_from_10ms() -> Histogram {
    // 10 ms to about 80 s.
    Histogram::new(exponential_buckets(0.01, 2.0, 14))
}

fn seconds_from_100ms() -> Histogram {
    // 100 ms to about 27 min.
    Histogram::new(exponential_buckets(0.1, 2.0, 15))
}

/// Webhook requests: by route and outcome, verification failures, body bytes.
#[derive(Default)]
pub struct Webhook {
    requests: Family<RouteOutcome, Counter>,
    verification_failures: Family<SchemeReason, Counter>,
    body_bytes: Family<RouteLabel, Counter>,
    routes: Names,
    /// The last hour per minute, for the dashboard.
    pub traffic: crate::traffic::Traffic,
}

impl Webhook {
    pub(crate) fn register(&self, r: &mut Registry) {
        r.register(
            "herald_webhook_requests",
            "Webhook requests by route (`unknown` for a route herald does not know) and outcome",
            self.requests.clone(),
        );
        r.register(
            "herald_webhook_verification_failures",
            "Signature checks that failed, by scheme and reason",
            self.verification_failures.clone(),
        );
        r.register(
            "herald_webhook_body_bytes",
            "Bytes of webhook request bodies read, by route",
            self.body_bytes.clone(),
        );
    }

    /// A request answered with `outcome` (`route`: the route it named when herald
    /// knows it).
    pub fn request(&self, route: Option<&str>, outcome: &'static str) {
        let (series, traffic) = (crate::enabled(), crate::traffic_enabled());
        if !series && !traffic {
            return;
        }
        let route = match route {
            Some(r) => self.routes.value(r),
            None => UNKNOWN.to_owned(),
        };
        if traffic {
            self.traffic.count(&route, outcome);
        }
        if series {
            self.requests
                .get_or_create(&RouteOutcome { route, outcome })
                .inc();
        }
    }

    pub fn verification_failed(&self, scheme: &'static str, reason: &'static str) {
        if crate::enabled() {
            let labels = SchemeReason { scheme, reason };
            self.verification_failures.get_or_create(&labels).inc();
        }
    }

    pub fn body_read(&self, route: &str, bytes: usize) {
        if crate::enabled() {
            let route = self.routes.value(route);
            let labels = RouteLabel { route };
            self.body_bytes.get_or_create(&labels).inc_by(bytes as u64);
        }
    }
}

/// The inbox as the store tells it at each scrape.
#[derive(Default)]
pub struct Inbox {
    depth: Family<StateLabel, Gauge>,
    oldest_queued_age: Gauge<f64, AtomicU64>,
    leases_held: Gauge,
    shared: Gauge,
}

/// The inbox's figures at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InboxFigures {
    /// Entries per state, every state present (a state gone to 0 must still be set).
    pub counts: Vec<(String, i64)>,
    /// Seconds the oldest queued entry has waited (0 with none queued).
    pub oldest_queued_age_secs: f64,
    /// Entries claimed under a lease that has not run out (every instance's).
    pub leases_held: i64,
    /// Whether other instances share the store.
    pub shared: bool,
}

impl Inbox {
    pub(crate) fn register(&self, r: &mut Registry) {
        r.register(
            "herald_inbox_events",
            "Inbox entries by state",
            self.depth.clone(),
        );
        r.register(
            "herald_inbox_oldest_queued_age_seconds",
            "How long the oldest queued entry has waited",
            self.oldest_queued_age.clone(),
        );
        r.register(
            "herald_inbox_leases_held",
            "Inbox entries claimed under a live lease, by every instance sharing the store",
            self.leases_held.clone(),
        );
        r.register(
            "herald_store_shared",
            "1 when the store is PostgreSQL shared by several instances, 0 for SQLite in the home",
            self.shared.clone(),
        );
    }

    pub fn set(&self, figures: &InboxFigures) {
        for (state, n) in &figures.counts {
            let labels = StateLabel {
                state: state.clone(),
            };
            self.depth.get_or_create(&labels).set(*n);
        }
        self.oldest_queued_age.set(figures.oldest_queued_age_secs);
        self.leases_held.set(figures.leases_held);
        self.shared.set(i64::from(figures.shared));
    }
}

/// Deliveries to targets: attempts by target and outcome, and how long they took.
pub struct Delivery {
    attempts: Family<TargetOutcome, Counter>,
    latency: Histograms<TargetLabel>,
    targets: Names,
}

impl Default for Delivery {
    fn default() -> Self {
        Delivery {
            attempts: Family::default(),
            latency: Family::new_with_constructor(seconds_from_10ms),
            targets: Names::default(),
        }
    }
}

impl Delivery {
    pub(crate) fn register(&self, r: &mut Registry) {
        r.register(
            "herald_delivery_attempts",
            "Sends to delivery targets, by target and outcome (delivered, failed)",
            self.attempts.clone(),
        );
        r.register(
            "herald_delivery_duration_seconds",
            "How long one send to a target took",
            self.latency.clone(),
        );
    }

    /// One send to `target` that ended `outcome` after `took`.
    pub fn attempt(&self, target: &str, outcome: &'static str, took: Duration) {
        if !crate::enabled() {
            return;
        }
        let target = self.targets.value(target);
        self.latency
            .get_or_create(&TargetLabel {
                target: target.clone(),
            })
            .observe(took.as_secs_f64());
        self.attempts
            .get_or_create(&TargetOutcome { target, outcome })
            .inc();
    }
}

/// Agent work: runs by front door and outcome, turn and provider latency, provider
/// errors, tokens, tool calls and approvals.
pub struct Agent {
    runs: Family<DoorOutcome, Counter>,
    turn_latency: Histograms<DoorLabel>,
    provider_latency: Histograms<ProviderLabel>,
    provider_errors: Family<ProviderClass, Counter>,
    tokens: Family<ProviderDirection, Counter>,
    tool_calls: Family<ToolOutcome, Counter>,
    approvals: Family<OutcomeLabel, Counter>,
    providers: Names,
    tools: Names,
}

impl Default for Agent {
    fn default() -> Self {
        Agent {
            runs: Family::default(),
            turn_latency: Family::new_with_constructor(seconds_from_100ms),
            provider_latency: Family::new_with_constructor(seconds_from_10ms),
            provider_errors: Family::default(),
            tokens: Family::default(),
            tool_calls: Family::default(),
            approvals: Family::default(),
            providers: Names::default(),
            tools: Names::default(),
        }
    }
}

impl Agent {
    pub(crate) fn register(&self, r: &mut Registry) {
        r.register(
            "herald_agent_runs",
            "Agent runs by front door (webhook, api_server, tui, acp, cli) and outcome (completed, failed, cancelled)",
            self.runs.clone(),
        );
        r.register(
            "herald_agent_turn_duration_seconds",
            "How long a turn took, from its start to its end, by front door",
            self.turn_latency.clone(),
        );
        r.register(
            "herald_provider_request_duration_seconds",
            "How long one provider call took, to its last streamed byte, by provider",
            self.provider_latency.clone(),
        );
        r.register(
            "herald_provider_errors",
            "Provider calls that failed, by provider and error class",
            self.provider_errors.clone(),
        );
        r.register(
            "herald_provider_tokens",
            "Tokens the provider counted, by provider and direction (input, output)",
            self.tokens.clone(),
        );
        r.register(
            "herald_tool_calls",
            "Tool calls by tool and outcome (ok, error)",
            self.tool_calls.clone(),
        );
        r.register(
            "herald_approvals",
            "Answers to approval requests by outcome (once, session, always, deny, timeout)",
            self.approvals.clone(),
        );
    }

    /// A run of `door` that ended `outcome` after `took`.
    pub fn run_ended(&self, door: &'static str, outcome: &'static str, took: Duration) {
        if !crate::enabled() {
            return;
        }
        self.runs
            .get_or_create(&DoorOutcome { door, outcome })
            .inc();
        self.turn_latency
            .get_or_create(&DoorLabel { door })
            .observe(took.as_secs_f64());
    }

    /// One provider call of `provider` that took `took`, failing with `error` (its
    /// class) when it did.
    pub fn provider_call(&self, provider: &str, took: Duration, error: Option<&'static str>) {
        if !crate::enabled() {
            return;
        }
        let provider = self.providers.value(provider);
        if let Some(class) = error {
            let labels = ProviderClass {
                provider: provider.clone(),
                class,
            };
            self.provider_errors.get_or_create(&labels).inc();
        }
        self.provider_latency
            .get_or_create(&ProviderLabel { provider })
            .observe(took.as_secs_f64());
    }

    /// Tokens `provider` counted for one call.
    pub fn tokens(&self, provider: &str, input: u64, output: u64) {
        if !crate::enabled() {
            return;
        }
        let provider = self.providers.value(provider);
        for (direction, n) in [("input", input), ("output", output)] {
            let labels = ProviderDirection {
                provider: provider.clone(),
                direction,
            };
            self.tokens.get_or_create(&labels).inc_by(n);
        }
    }

    pub fn tool_call(&self, tool: &str, outcome: &'static str) {
        if crate::enabled() {
            let tool = self.tools.value(tool);
            self.tool_calls
                .get_or_create(&ToolOutcome { tool, outcome })
                .inc();
        }
    }

    pub fn approval(&self, outcome: &'static str) {
        if crate::enabled() {
            self.approvals
                .get_or_create(&OutcomeLabel { outcome })
                .inc();
        }
    }
}

/// The front doors' own traffic: requests by door, endpoint and status class, and the
/// connections and streams open now.
#[derive(Default)]
pub struct Doors {
    requests: Family<DoorEndpoint, Counter>,
    open: Family<DoorLabel, Gauge>,
    endpoints: Names,
}

/// An open connection or stream, counted until dropped.
pub struct Open {
    gauge: Option<Gauge>,
}

impl Drop for Open {
    fn drop(&mut self) {
        if let Some(g) = &self.gauge {
            g.dec();
        }
    }
}

impl Doors {
    pub(crate) fn register(&self, r: &mut Registry) {
        r.register(
            "herald_frontdoor_requests",
            "Requests to the front doors (api, webhook, rpc), by endpoint (the route pattern) and status class",
            self.requests.clone(),
        );
        r.register(
            "herald_frontdoor_open",
            "Open connections and streams: connections per listener (webhook, api, rpc), WebSocket sessions (websocket), SSE streams (sse), API runs parked for their clients' tool results (parked)",
            self.open.clone(),
        );
    }

    /// A request to `door`'s `endpoint` (a route pattern of the door's own, never the
    /// request's path) answered with `status`.
    pub fn request(&self, door: &'static str, endpoint: &str, status: u16) {
        if !crate::enabled() {
            return;
        }
        let code = match status {
            100..=199 => "1xx",
            200..=299 => "2xx",
            300..=399 => "3xx",
            400..=499 => "4xx",
            _ => "5xx",
        };
        let endpoint = self.endpoints.value(endpoint);
        let labels = DoorEndpoint {
            door,
            endpoint,
            code,
        };
        self.requests.get_or_create(&labels).inc();
    }

    /// Counts one more open connection or stream of `door` until the guard drops.
    pub fn open(&self, door: &'static str) -> Open {
        if !crate::enabled() {
            return Open { gauge: None };
        }
        let gauge = self.open.get_or_create_owned(&DoorLabel { door });
        gauge.inc();
        Open { gauge: Some(gauge) }
    }
}

/// What runs beside the agent: the Python plugin host and MCP servers.
#[derive(Default)]
pub struct Extensions {
    plugin_restarts: Counter,
    callback_failures: Family<MethodLabel, Counter>,
    mcp_up: Family<ServerLabel, Gauge>,
    methods: Names,
    servers: Names,
}

impl Extensions {
    pub(crate) fn register(&self, r: &mut Registry) {
        r.register(
            "herald_plugin_host_restarts",
            "Times the Python plugin host was started again after it died",
            self.plugin_restarts.clone(),
        );
        r.register(
            "herald_plugin_callback_failures",
            "Calls to the Python plugin host that failed or timed out, by method (hook.invoke, middleware.execute, tool.invoke, ...)",
            self.callback_failures.clone(),
        );
        r.register(
            "herald_mcp_server_up",
            "1 while an MCP server is connected, by server",
            self.mcp_up.clone(),
        );
    }

    pub fn plugin_host_restarted(&self) {
        if crate::enabled() {
            self.plugin_restarts.inc();
        }
    }

    pub fn callback_failed(&self, method: &str) {
        if crate::enabled() {
            let method = self.methods.value(method);
            self.callback_failures
                .get_or_create(&MethodLabel { method })
                .inc();
        }
    }

    pub fn mcp_server(&self, server: &str, up: bool) {
        if crate::enabled() {
            let server = self.servers.value(server);
            self.mcp_up
                .get_or_create(&ServerLabel { server })
                .set(i64::from(up));
        }
    }
}
