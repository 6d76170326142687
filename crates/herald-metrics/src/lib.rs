//! herald's Prometheus metrics. One registry per process ([`get`]); every part of
//! herald records into it through the series' own methods, which do nothing until
//! [`enable`] is called (`metrics.enabled` in config.yaml). `GET /metrics` ([`router`])
//! serves it in the OpenMetrics text format that Prometheus scrapes.
//!
//! Label values are bounded ([`names`]): names herald knows, at most 1,000 per label.

pub mod bots;
mod endpoint;
mod labels;
pub mod names;
mod series;
pub mod traffic;

pub use endpoint::{counted, router};
pub use series::{Agent, Delivery, Doors, Extensions, Inbox, InboxFigures, Open, Webhook};

use futures_util::future::BoxFuture;
use prometheus_client::registry::Registry;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

/// Every series of the process.
pub struct Metrics {
    registry: Registry,
    pub webhook: Webhook,
    pub inbox: Inbox,
    pub delivery: Delivery,
    pub agent: Agent,
    pub doors: Doors,
    pub extensions: Extensions,
    pub bots: bots::Bots,
    /// What reads the figures kept elsewhere (the inbox's) just before a scrape.
    refreshers: Mutex<Vec<Refresher>>,
}

/// Reads figures kept elsewhere into their series, before a scrape.
pub type Refresher = Arc<dyn Fn() -> BoxFuture<'static, ()> + Send + Sync>;

static ENABLED: AtomicBool = AtomicBool::new(false);
static TRAFFIC: AtomicBool = AtomicBool::new(false);
static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The process's metrics.
pub fn get() -> &'static Metrics {
    &METRICS
}

/// Starts recording (until then every series' method returns at once).
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Whether series record.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Starts counting each route's requests per minute (the dashboard's charts),
/// independently of the series.
pub fn enable_traffic() {
    TRAFFIC.store(true, Ordering::Relaxed);
}

/// Whether each route's requests per minute are counted.
pub fn traffic_enabled() -> bool {
    TRAFFIC.load(Ordering::Relaxed)
}

impl Metrics {
    fn new() -> Metrics {
        let mut registry = Registry::default();
        let m = Metrics {
            registry: Registry::default(),
            webhook: Webhook::default(),
            inbox: Inbox::default(),
            delivery: Delivery::default(),
            agent: Agent::default(),
            doors: Doors::default(),
            extensions: Extensions::default(),
            bots: bots::Bots::default(),
            refreshers: Mutex::new(Vec::new()),
        };
        m.webhook.register(&mut registry);
        m.inbox.register(&mut registry);
        m.delivery.register(&mut registry);
        m.agent.register(&mut registry);
        m.doors.register(&mut registry);
        m.extensions.register(&mut registry);
        m.bots.register(&mut registry);
        Metrics { registry, ..m }
    }

    /// Has `refresh` run before every scrape.
    pub fn refresh_with(&self, refresh: Refresher) {
        if let Ok(mut all) = self.refreshers.lock() {
            all.push(refresh);
        }
    }

    /// Runs the refreshers, each for at most `within`.
    pub async fn refresh(&self, within: std::time::Duration) {
        self.bots.refresh();
        let all: Vec<Refresher> = match self.refreshers.lock() {
            Ok(all) => all.clone(),
            Err(_) => return,
        };
        for refresh in all {
            if tokio::time::timeout(within, refresh()).await.is_err() {
                tracing::warn!("metrics: a figure could not be read in time for the scrape");
            }
        }
    }

    /// The OpenMetrics text of every series.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String does not fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
