//! `tracing:`, typed: where herald exports its OpenTelemetry traces (the standard
//! `OTEL_*` variables apply too; this block only adds to them).

use crate::node::Node;
use crate::reader::Reader;

/// `tracing:`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct TracingSettings {
    /// The block is in the file.
    pub present: bool,
    /// `tracing.enabled` (true when the block is there): `false` exports nothing, even
    /// with `OTEL_EXPORTER_OTLP_ENDPOINT` set.
    pub enabled: bool,
    /// `tracing.endpoint`: the collector's base URL.
    pub endpoint: Option<String>,
    /// `tracing.protocol`: `grpc`, `http/protobuf` (the default) or `http/json`.
    pub protocol: Option<String>,
    /// `tracing.service_name` (else `OTEL_SERVICE_NAME`, else `herald`).
    pub service_name: Option<String>,
    /// `tracing.headers`: sent with every export.
    pub headers: Vec<(String, String)>,
}

impl std::fmt::Debug for TracingSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TracingSettings")
            .field("enabled", &self.enabled)
            .field("endpoint", &self.endpoint)
            .field("protocol", &self.protocol)
            .field("headers", &self.headers.len())
            .finish_non_exhaustive()
    }
}

const KEYS: &[&str] = &["enabled", "endpoint", "protocol", "service_name", "headers"];
const PROTOCOLS: &[&str] = &["grpc", "http/protobuf", "http/json"];

/// Reads `tracing:`; problems go to `r`.
pub fn read_tracing_settings(r: &mut Reader, doc: &Node) -> TracingSettings {
    let Some(block) = doc.get("tracing").filter(|n| !n.is_null()) else {
        return TracingSettings::default();
    };
    r.check_keys(block, "tracing", KEYS);
    let at = |key: &str| block.get(key).filter(|n| !n.is_null());
    let mut out = TracingSettings {
        present: true,
        enabled: true,
        ..TracingSettings::default()
    };
    if let Some(n) = at("enabled")
        && let Some(v) = r.bool(n, "tracing.enabled")
    {
        out.enabled = v;
    }
    let text = |r: &mut Reader, key: &str| {
        at(key)
            .and_then(|n| r.string(n, &format!("tracing.{key}")))
            .flatten()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    };
    out.endpoint = text(r, "endpoint");
    out.service_name = text(r, "service_name");
    if let Some(p) = text(r, "protocol") {
        if PROTOCOLS.contains(&p.as_str()) {
            out.protocol = Some(p);
        } else {
            let why =
                format!("`{p}` is not an OTLP protocol: use grpc, http/protobuf or http/json");
            r.error(at("protocol"), "tracing.protocol", why);
        }
    }
    if let Some(headers) = at("headers") {
        for (k, v) in headers.entries().iter() {
            if let Some(Some(v)) = r.string(v, &format!("tracing.headers.{k}")) {
                out.headers.push((k.to_owned(), v));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(yaml: &str) -> (TracingSettings, usize) {
        let doc = Node::parse_yaml(yaml).expect("yaml");
        let mut r = Reader::new(std::path::Path::new("config.yaml"));
        let s = read_tracing_settings(&mut r, &doc);
        (s, r.errors.len() + r.warnings.len())
    }

    #[test]
    fn the_block_turns_export_on_and_its_keys_are_read() {
        assert!(!read("model: x\n").0.present);
        let (s, problems) = read(
            "tracing:\n  endpoint: http://c:4318\n  protocol: grpc\n  service_name: gw\n  headers: {x-api-key: k}\n",
        );
        assert_eq!(problems, 0);
        assert!(s.present && s.enabled);
        assert_eq!(s.endpoint.as_deref(), Some("http://c:4318"));
        assert_eq!(s.protocol.as_deref(), Some("grpc"));
        assert_eq!(s.headers, [("x-api-key".to_owned(), "k".to_owned())]);
        assert!(
            !format!("{s:?}").contains("\"k\""),
            "header values are not shown"
        );
        let (s, problems) = read("tracing:\n  enabled: false\n  protocol: thrift\n");
        assert!(!s.enabled);
        assert_eq!(problems, 1);
    }
}
