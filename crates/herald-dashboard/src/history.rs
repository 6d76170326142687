//! What the dashboard keeps over time: the inbox depth each minute of the last hour,
//! read by a background task.

use crate::Dashboard;
use herald_admin::InboxView;
use std::collections::VecDeque;
use std::sync::{Mutex, Weak};
use std::time::Duration;

/// Samples kept (one a minute: an hour).
const SAMPLES: usize = 60;
/// How often the inbox depth is read.
const SAMPLE_EVERY: Duration = Duration::from_secs(60);

/// One reading of the inbox.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct DepthSample {
    /// Unix milliseconds.
    pub at_ms: i64,
    pub queued: i64,
    pub running: i64,
    pub delivering: i64,
    pub dead: i64,
}

#[derive(Default)]
pub(crate) struct DepthHistory {
    samples: Mutex<VecDeque<DepthSample>>,
}

impl DepthHistory {
    pub(crate) fn samples(&self) -> Vec<DepthSample> {
        self.samples
            .lock()
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn push(&self, sample: DepthSample) {
        if let Ok(mut s) = self.samples.lock() {
            s.push_back(sample);
            while s.len() > SAMPLES {
                s.pop_front();
            }
        }
    }
}

pub(crate) fn depth_of(counts: &[(String, i64)], at_ms: i64) -> DepthSample {
    let n = |state: &str| {
        counts
            .iter()
            .find(|(s, _)| s == state)
            .map_or(0, |(_, n)| *n)
    };
    DepthSample {
        at_ms,
        queued: n("queued"),
        running: n("running"),
        delivering: n("delivering"),
        dead: n("dead"),
    }
}

/// Reads the inbox depth now and every minute, for as long as the dashboard lives.
pub(crate) fn spawn_sampler(dash: Weak<Dashboard>, gw: InboxView) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(SAMPLE_EVERY);
        loop {
            tick.tick().await;
            let Some(dash) = dash.upgrade() else {
                return;
            };
            match gw.counts().await {
                Ok(counts) => dash.history.push(depth_of(&counts, herald_store::now_ms())),
                Err(e) => tracing::warn!(error = %e, "dashboard: cannot read the inbox depth"),
            }
        }
    });
}
