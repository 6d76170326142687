//! A tracer that exists from the process's start and works once the exporter's
//! provider is set: the OpenTelemetry layer is built with it when logging starts,
//! before the configuration says where traces go.

use opentelemetry::trace::noop::NoopSpan;
use opentelemetry::trace::{SpanBuilder, SpanContext, Status, Tracer};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{Span as SdkSpan, Tracer as SdkTracer};
use std::borrow::Cow;
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

/// Herald's tracer: a no-op until [`LateTracer::set`].
#[derive(Clone, Default)]
pub(crate) struct LateTracer {
    inner: Arc<OnceLock<SdkTracer>>,
}

impl LateTracer {
    pub(crate) fn set(&self, tracer: SdkTracer) -> bool {
        self.inner.set(tracer).is_ok()
    }
}

/// A span of the exporter's tracer, or none yet.
#[derive(Debug)]
// The small variant is only made before export starts (the layer's filter lets no
// span through until then): boxing the other would cost every exported span.
#[allow(clippy::large_enum_variant)]
pub(crate) enum LateSpan {
    Sdk(SdkSpan),
    Off(NoopSpan),
}

impl Tracer for LateTracer {
    type Span = LateSpan;

    fn build_with_context(&self, builder: SpanBuilder, parent_cx: &Context) -> LateSpan {
        match self.inner.get() {
            Some(t) => LateSpan::Sdk(t.build_with_context(builder, parent_cx)),
            None => LateSpan::Off(NoopSpan::DEFAULT),
        }
    }
}

impl opentelemetry::trace::Span for LateSpan {
    fn add_event_with_timestamp<T>(
        &mut self,
        name: T,
        timestamp: SystemTime,
        attributes: Vec<KeyValue>,
    ) where
        T: Into<Cow<'static, str>>,
    {
        match self {
            LateSpan::Sdk(s) => s.add_event_with_timestamp(name, timestamp, attributes),
            LateSpan::Off(s) => s.add_event_with_timestamp(name, timestamp, attributes),
        }
    }

    fn span_context(&self) -> &SpanContext {
        match self {
            LateSpan::Sdk(s) => s.span_context(),
            LateSpan::Off(s) => s.span_context(),
        }
    }

    fn is_recording(&self) -> bool {
        match self {
            LateSpan::Sdk(s) => s.is_recording(),
            LateSpan::Off(s) => s.is_recording(),
        }
    }

    fn set_attribute(&mut self, attribute: KeyValue) {
        match self {
            LateSpan::Sdk(s) => s.set_attribute(attribute),
            LateSpan::Off(s) => s.set_attribute(attribute),
        }
    }

    fn set_status(&mut self, status: Status) {
        match self {
            LateSpan::Sdk(s) => s.set_status(status),
            LateSpan::Off(s) => s.set_status(status),
        }
    }

    fn update_name<T>(&mut self, new_name: T)
    where
        T: Into<Cow<'static, str>>,
    {
        match self {
            LateSpan::Sdk(s) => s.update_name(new_name),
            LateSpan::Off(s) => s.update_name(new_name),
        }
    }

    fn add_link(&mut self, span_context: SpanContext, attributes: Vec<KeyValue>) {
        match self {
            LateSpan::Sdk(s) => s.add_link(span_context, attributes),
            LateSpan::Off(s) => s.add_link(span_context, attributes),
        }
    }

    fn end_with_timestamp(&mut self, timestamp: SystemTime) {
        match self {
            LateSpan::Sdk(s) => s.end_with_timestamp(timestamp),
            LateSpan::Off(s) => s.end_with_timestamp(timestamp),
        }
    }
}
