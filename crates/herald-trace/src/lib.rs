//! herald's OpenTelemetry traces. The spans herald makes for its trace have the
//! target [`TARGET`] (the [`span!`] macro): they are exported over OTLP once [`start`]
//! found an endpoint (`tracing:` in config.yaml, or the standard `OTEL_*` variables),
//! and are never written to the log. Until then, and in a process that exports
//! nothing, they are not even made: the layer's filter refuses them at the cost of one
//! atomic load.
//!
//! The W3C trace context crosses herald's boundaries as a `traceparent` string: taken
//! from a request ([`continue_from`]), kept with an accepted event in the inbox, and
//! continued by the worker that runs it, possibly after a restart.

mod context;
mod export;
mod http;
mod late;

pub use context::{continue_from, current_traceparent};
pub use export::{ExportError, Guard, Protocol, Settings, start};
pub use http::traced;

use late::LateTracer;
use opentelemetry_sdk::trace::Tracer;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use tracing_subscriber::Registry;
use tracing_subscriber::filter::FilterFn;

/// The target of the spans that make herald's trace.
pub const TARGET: &str = "herald_trace";

/// A span of herald's trace: `tracing::info_span!` with the target [`TARGET`].
#[macro_export]
macro_rules! span {
    ($name:literal $(, $($fields:tt)*)?) => {
        ::tracing::info_span!(target: "herald_trace", $name $(, $($fields)*)?)
    };
}

static EXPORTING: AtomicBool = AtomicBool::new(false);
static TRACER: OnceLock<LateTracer> = OnceLock::new();

type Ours = fn(&tracing::Metadata<'_>) -> bool;

/// Whether spans are being exported.
pub fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// The layer every process puts on its `Registry`: it refuses every span until
/// [`start`] gave its tracer an exporter.
pub fn layer() -> impl tracing_subscriber::Layer<Registry> + Send + Sync + 'static {
    let tracer = TRACER.get_or_init(LateTracer::default).clone();
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_tracked_inactivity(false);
    let ours: Ours = |meta| exporting() && meta.target() == TARGET;
    tracing_subscriber::Layer::with_filter(layer, FilterFn::new(ours))
}

/// Gives the layer's tracer its exporter and starts letting spans through.
fn install(tracer: Tracer) -> Result<(), ExportError> {
    let late = TRACER.get().ok_or(ExportError::NoSubscriber)?;
    if !late.set(tracer) {
        return Err(ExportError::Subscriber(
            "traces are exported already".into(),
        ));
    }
    EXPORTING.store(true, Ordering::Relaxed);
    tracing::callsite::rebuild_interest_cache();
    Ok(())
}
