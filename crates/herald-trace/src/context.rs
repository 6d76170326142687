//! The W3C trace context (`traceparent`, `tracestate`) in and out of herald's spans.

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use std::collections::HashMap;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Makes `span` continue the trace `traceparent` names (with its `tracestate`): a
/// request's headers, or the context an accepted event was kept with. A missing or
/// malformed one leaves the span the root of a new trace.
pub fn continue_from(span: &tracing::Span, traceparent: Option<&str>, tracestate: Option<&str>) {
    if !crate::exporting() {
        return;
    }
    let Some(parent) = traceparent else {
        return;
    };
    let mut carrier = HashMap::from([("traceparent".to_owned(), parent.trim().to_owned())]);
    if let Some(state) = tracestate {
        carrier.insert("tracestate".to_owned(), state.trim().to_owned());
    }
    let cx = TraceContextPropagator::new().extract(&carrier);
    if cx.span().span_context().is_valid() {
        let _ = span.set_parent(cx);
    }
}

/// The `traceparent` of the current span, for what continues it later or elsewhere
/// (`None` while nothing is exported, without looking the span up).
pub fn current_traceparent() -> Option<String> {
    if !crate::exporting() {
        return None;
    }
    let cx = tracing::Span::current().context();
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut carrier: HashMap<String, String> = HashMap::new();
    TraceContextPropagator::new().inject_context(&cx, &mut carrier);
    carrier.remove("traceparent")
}
