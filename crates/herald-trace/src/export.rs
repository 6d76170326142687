//! The OTLP exporter: chosen by `tracing:` in config.yaml and the standard `OTEL_*`
//! variables (which the OpenTelemetry SDK reads itself: endpoints, headers, timeouts,
//! `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`).

use opentelemetry::trace::TracerProvider as _;
#[cfg(feature = "grpc")]
use opentelemetry_otlp::WithTonicConfig;
use opentelemetry_otlp::{SpanExporter, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::collections::HashMap;

/// How spans travel to the collector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Grpc,
    HttpProtobuf,
    HttpJson,
}

impl Protocol {
    /// As `OTEL_EXPORTER_OTLP_PROTOCOL` spells it.
    pub fn parse(text: &str) -> Option<Protocol> {
        Some(match text.trim() {
            "grpc" => Protocol::Grpc,
            "http/protobuf" => Protocol::HttpProtobuf,
            "http/json" => Protocol::HttpJson,
            _ => return None,
        })
    }
}

/// What `tracing:` in config.yaml says; the `OTEL_*` variables fill in the rest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// `tracing:` is in the file (and not `enabled: false`).
    pub configured: bool,
    /// `tracing.enabled: false`: nothing is exported whatever the environment says.
    pub disabled: bool,
    /// `tracing.endpoint`: the collector's base URL (`http://collector:4318`, or
    /// `http://collector:4317` for gRPC).
    pub endpoint: Option<String>,
    pub protocol: Option<Protocol>,
    pub service_name: Option<String>,
    /// `tracing.headers`, sent with every export (an API key of a hosted collector).
    pub headers: Vec<(String, String)>,
}

/// Why export could not start.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("the trace exporter cannot be built: {0}")]
    Build(String),
    #[error("{0} is `{1}`: use grpc, http/protobuf or http/json")]
    Protocol(&'static str, String),
    /// gRPC export is a build feature (`otlp-grpc`).
    #[error(
        "OTLP over gRPC is not built into this herald (cargo build --features otlp-grpc); use http/protobuf, the default, or http/json"
    )]
    GrpcNotBuilt,
    #[error("the trace layer is not installed in this process's subscriber")]
    NoSubscriber,
    #[error("the trace layer cannot be installed: {0}")]
    Subscriber(String),
}

/// Keeps the exporter running; [`Guard::finish`] flushes what is left.
pub struct Guard {
    provider: SdkTracerProvider,
}

impl Guard {
    /// Exports the spans still buffered, then stops (within the SDK's timeout); the
    /// runtime keeps serving meanwhile (a gRPC export needs it).
    pub async fn finish(self) {
        let provider = self.provider;
        let _ = tokio::task::spawn_blocking(move || provider.shutdown()).await;
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

impl Settings {
    /// Whether spans are to be exported: a `tracing:` block, or an OTLP endpoint in
    /// the environment, unless switched off (`tracing.enabled: false`,
    /// `OTEL_SDK_DISABLED=true`, `OTEL_TRACES_EXPORTER=none`).
    pub fn wanted(&self) -> bool {
        let off = self.disabled
            || env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
            || env("OTEL_TRACES_EXPORTER").is_some_and(|v| v == "none");
        let endpoint = env("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
            || env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some();
        !off && (self.configured || endpoint)
    }

    fn protocol(&self) -> Result<Protocol, ExportError> {
        if let Some(p) = self.protocol {
            return Ok(p);
        }
        for var in [
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ] {
            if let Some(v) = env(var) {
                return Protocol::parse(&v).ok_or(ExportError::Protocol(var, v));
            }
        }
        Ok(Protocol::HttpProtobuf)
    }
}

/// Starts exporting when `settings` want it (`None` when they do not). Call it inside
/// the Tokio runtime: the gRPC exporter's connection lives on it.
pub fn start(settings: &Settings) -> Result<Option<Guard>, ExportError> {
    if !settings.wanted() {
        return Ok(None);
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let exporter = exporter(settings, settings.protocol()?)?;
    let mut resource = Resource::builder();
    if let Some(name) = settings.service_name.clone().or_else(|| {
        env("OTEL_SERVICE_NAME")
            .is_none()
            .then(|| "herald".to_owned())
    }) {
        resource = resource.with_service_name(name);
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build();
    crate::install(provider.tracer("herald"))?;
    Ok(Some(Guard { provider }))
}

fn exporter(settings: &Settings, protocol: Protocol) -> Result<SpanExporter, ExportError> {
    let built = match protocol {
        Protocol::Grpc => grpc_exporter(settings)?,
        Protocol::HttpProtobuf | Protocol::HttpJson => {
            let wire = match protocol {
                Protocol::HttpJson => opentelemetry_otlp::Protocol::HttpJson,
                _ => opentelemetry_otlp::Protocol::HttpBinary,
            };
            let mut b = SpanExporter::builder().with_http().with_protocol(wire);
            if let Some(e) = &settings.endpoint {
                b = b.with_endpoint(traces_url(e));
            }
            if !settings.headers.is_empty() {
                let headers: HashMap<String, String> = settings.headers.iter().cloned().collect();
                b = b.with_headers(headers);
            }
            b.build()
        }
    };
    built.map_err(|e| ExportError::Build(e.to_string()))
}

/// A base URL as the OTLP/HTTP spec reads `OTEL_EXPORTER_OTLP_ENDPOINT`: traces go
/// to its `/v1/traces`.
fn traces_url(base: &str) -> String {
    let base = base.trim().trim_end_matches('/');
    if base.ends_with("/v1/traces") {
        base.to_owned()
    } else {
        format!("{base}/v1/traces")
    }
}

#[cfg(feature = "grpc")]
fn grpc_exporter(
    settings: &Settings,
) -> Result<Result<SpanExporter, opentelemetry_otlp::ExporterBuildError>, ExportError> {
    let mut b = SpanExporter::builder().with_tonic();
    if let Some(e) = &settings.endpoint {
        b = b.with_endpoint(e.clone());
    }
    if !settings.headers.is_empty() {
        b = b.with_metadata(metadata(&settings.headers));
    }
    Ok(b.build())
}

#[cfg(not(feature = "grpc"))]
fn grpc_exporter(
    _: &Settings,
) -> Result<Result<SpanExporter, opentelemetry_otlp::ExporterBuildError>, ExportError> {
    Err(ExportError::GrpcNotBuilt)
}

/// The headers as gRPC metadata (a name or value HTTP would refuse is left out).
#[cfg(feature = "grpc")]
fn metadata(
    headers: &[(String, String)],
) -> opentelemetry_otlp::tonic_types::metadata::MetadataMap {
    let mut map = http::HeaderMap::new();
    for (k, v) in headers {
        if let (Ok(k), Ok(v)) = (
            http::HeaderName::try_from(k.to_ascii_lowercase()),
            http::HeaderValue::try_from(v.as_str()),
        ) {
            map.insert(k, v);
        }
    }
    opentelemetry_otlp::tonic_types::metadata::MetadataMap::from_headers(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_url_gets_the_traces_path_once() {
        assert_eq!(traces_url("http://c:4318"), "http://c:4318/v1/traces");
        assert_eq!(traces_url("http://c:4318/"), "http://c:4318/v1/traces");
        assert_eq!(
            traces_url("http://c:4318/v1/traces"),
            "http://c:4318/v1/traces"
        );
        assert_eq!(Protocol::parse("grpc"), Some(Protocol::Grpc));
        assert_eq!(Protocol::parse("http/json"), Some(Protocol::HttpJson));
        assert_eq!(Protocol::parse("thrift"), None);
    }

    #[cfg(not(feature = "grpc"))]
    #[test]
    fn grpc_export_says_it_is_not_built_in() {
        let asked = exporter(&Settings::default(), Protocol::Grpc);
        let told = asked.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(told.contains("--features otlp-grpc"), "{told}");
    }

    /// With the feature, a span goes over gRPC to a collector that decodes it.
    #[cfg(feature = "grpc")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_span_goes_over_grpc() {
        use opentelemetry::trace::{Tracer, TracerProvider as _};
        let receiver = herald_test_support::otlp::OtlpReceiver::start();
        let settings = Settings {
            endpoint: Some(receiver.url.clone()),
            headers: vec![("x-api-key".into(), "k".into())],
            ..Settings::default()
        };
        let exporter = exporter(&settings, Protocol::Grpc).unwrap();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter)
            .build();
        provider.tracer("t").in_span("over.grpc", |_| {});
        let _ = tokio::task::spawn_blocking(move || provider.shutdown()).await;
        let spans = receiver.spans();
        assert!(
            spans
                .iter()
                .any(|s| s.name == "over.grpc" && s.via == "grpc"),
            "{spans:?}"
        );
    }
}
