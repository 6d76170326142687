//! `metrics:`, typed: whether herald serves Prometheus metrics at `/metrics` on its
//! listeners, and the bearer token a scrape must bring.

use crate::node::Node;
use crate::reader::Reader;

/// `metrics:`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct MetricsSettings {
    /// `metrics.enabled` (off).
    pub enabled: bool,
    /// `metrics.token`, or `HERALD_METRICS_TOKEN`: scrapes must send
    /// `Authorization: Bearer <token>` (none: `/metrics` is open to whoever reaches it).
    pub token: Option<String>,
}

impl std::fmt::Debug for MetricsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsSettings")
            .field("enabled", &self.enabled)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .finish()
    }
}

const KEYS: &[&str] = &["enabled", "token"];

/// Reads `metrics:` and `HERALD_METRICS_TOKEN`; problems go to `r`.
pub fn read_metrics_settings(
    r: &mut Reader,
    doc: &Node,
    env: crate::config::EnvLookup<'_>,
) -> MetricsSettings {
    let Some(block) = doc.get("metrics").filter(|n| !n.is_null()) else {
        return MetricsSettings::default();
    };
    r.check_keys(block, "metrics", KEYS);
    let at = |key: &str| block.get(key).filter(|n| !n.is_null());
    let enabled = at("enabled")
        .and_then(|n| r.bool(n, "metrics.enabled"))
        .unwrap_or(false);
    let from_file = at("token")
        .and_then(|n| r.string(n, "metrics.token"))
        .flatten();
    let token = env("HERALD_METRICS_TOKEN")
        .or(from_file)
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty());
    MetricsSettings { enabled, token }
}

/// The finding for metrics served without a token on an address others can reach.
pub fn open_metrics_finding(settings: &MetricsSettings, hosts: &[&str]) -> Option<String> {
    if !settings.enabled || settings.token.is_some() {
        return None;
    }
    let exposed: Vec<&str> = hosts
        .iter()
        .copied()
        .filter(|h| !crate::route::is_loopback_name(h))
        .collect();
    (!exposed.is_empty()).then(|| {
        format!(
            "metrics.enabled serves /metrics without a token on {}: anyone who reaches it reads your route names and traffic; set metrics.token (or HERALD_METRICS_TOKEN)",
            exposed.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(yaml: &str, env: &[(&str, &str)]) -> (MetricsSettings, Vec<String>) {
        let doc = Node::parse_yaml(yaml).expect("yaml");
        let mut r = Reader::new(std::path::Path::new("config.yaml"));
        let lookup = |k: &str| {
            env.iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| (*v).to_owned())
        };
        let s = read_metrics_settings(&mut r, &doc, &lookup);
        let problems = r
            .errors
            .iter()
            .chain(r.warnings.iter())
            .map(|p| p.to_string())
            .collect();
        (s, problems)
    }

    #[test]
    fn off_unless_enabled_and_the_token_from_the_file_or_the_environment() {
        assert_eq!(read("model: x\n", &[]).0, MetricsSettings::default());
        let (s, p) = read("metrics:\n  enabled: true\n  token: ' abc '\n", &[]);
        assert_eq!((s.enabled, s.token.as_deref()), (true, Some("abc")));
        assert!(p.is_empty(), "{p:?}");
        let (s, _) = read(
            "metrics:\n  enabled: true\n  token: abc\n",
            &[("HERALD_METRICS_TOKEN", "fromenv")],
        );
        assert_eq!(s.token.as_deref(), Some("fromenv"));
        assert!(
            !format!("{s:?}").contains("fromenv"),
            "the token is not shown"
        );
        let (_, p) = read("metrics:\n  enabled: yes-please\n  tokn: x\n", &[]);
        assert_eq!(p.len(), 2, "{p:?}");
    }

    #[test]
    fn an_open_endpoint_on_a_public_address_is_a_finding() {
        let open = MetricsSettings {
            enabled: true,
            token: None,
        };
        assert!(open_metrics_finding(&open, &["127.0.0.1", "::1", "localhost"]).is_none());
        let f = open_metrics_finding(&open, &["127.0.0.1", "0.0.0.0"]).unwrap();
        assert!(f.contains("0.0.0.0") && f.contains("metrics.token"), "{f}");
        let closed = MetricsSettings {
            token: Some("t".into()),
            ..open
        };
        assert!(open_metrics_finding(&closed, &["0.0.0.0"]).is_none());
    }
}
