//! `mcp_servers:` and `mcp_discovery_timeout`, typed, as Hermes reads them. A server
//! that cannot be read is left out with a warning naming file, line and key (Hermes
//! skips it too); it never stops herald. `${VAR}` and `${env:VAR}` in any text are
//! replaced from the environment and `.env`; an unset variable stays as written.

use crate::node::{Node, NodeValue};
use crate::reader::{Reader, parse_bool_text};
use std::time::Duration;

/// Hermes's `mcp_discovery_timeout`: how long a first turn waits for discovery.
pub const DEFAULT_DISCOVERY_TIMEOUT: Duration = Duration::from_millis(1500);
const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(300);
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(60);
const DEFAULT_KEEPALIVE: Duration = Duration::from_secs(180);
const MIN_KEEPALIVE: Duration = Duration::from_secs(5);

/// Every configured MCP server, in file order, and the discovery wait.
#[derive(Debug, Clone, PartialEq)]
pub struct McpSettings {
    pub servers: Vec<McpServerSettings>,
    pub discovery_timeout: Duration,
}

impl Default for McpSettings {
    fn default() -> Self {
        McpSettings {
            servers: Vec::new(),
            discovery_timeout: DEFAULT_DISCOVERY_TIMEOUT,
        }
    }
}

/// One `mcp_servers.<name>` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServerSettings {
    pub name: String,
    pub transport: McpTransport,
    /// Per call (`timeout`, 300 s).
    pub timeout: Duration,
    /// Starting and the handshake (`connect_timeout`, 60 s).
    pub connect_timeout: Duration,
    pub enabled: bool,
    /// `tools.include`: only these of the server's tools (wins over `exclude`).
    pub include: Option<Vec<String>>,
    /// `tools.exclude`.
    pub exclude: Vec<String>,
    /// `tools.resources` / `tools.prompts`: the resource and prompt utility tools.
    pub resources: bool,
    pub prompts: bool,
    /// `supports_parallel_tool_calls`.
    pub parallel: bool,
    /// `keepalive_interval` (180 s, at least 5 s).
    pub keepalive: Duration,
    /// `sampling:`, the server's requests for a model answer.
    pub sampling: SamplingSettings,
    /// `idle_timeout_seconds` (also under `lifecycle:`): a stdio server with no call
    /// this long is stopped, and started again by the next call (`None`: never).
    pub idle_timeout: Option<Duration>,
    /// `max_lifetime_seconds` (also under `lifecycle:`): a stdio server this old is
    /// stopped between calls and started again by the next one.
    pub max_lifetime: Option<Duration>,
    /// `ssl_verify`, `client_cert` and `client_key` of an HTTP or SSE server.
    pub tls: McpTls,
}

/// How herald checks an HTTP or SSE server's certificate, and the one it shows.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct McpTls {
    pub verify: TlsVerify,
    /// A PEM file with the client certificate (and its key, unless `client_key`).
    pub client_cert: Option<std::path::PathBuf>,
    pub client_key: Option<std::path::PathBuf>,
}

/// `ssl_verify`.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum TlsVerify {
    /// `true` (the default): the system's roots.
    #[default]
    System,
    /// `false`: any certificate (as httpx's `verify=False`).
    Off,
    /// A path: only the CAs of that PEM bundle.
    Ca(std::path::PathBuf),
}

impl McpServerSettings {
    /// A server with Hermes's defaults (an ACP client's server, which brings only its
    /// name and how to reach it).
    pub fn new(name: impl Into<String>, transport: McpTransport) -> McpServerSettings {
        McpServerSettings {
            name: name.into(),
            transport,
            timeout: DEFAULT_CALL_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            enabled: true,
            include: None,
            exclude: Vec::new(),
            resources: true,
            prompts: true,
            parallel: false,
            keepalive: DEFAULT_KEEPALIVE,
            sampling: SamplingSettings::default(),
            idle_timeout: None,
            max_lifetime: None,
            tls: McpTls::default(),
        }
    }
}

/// How herald speaks to a server.
#[derive(Debug, Clone, PartialEq)]
pub enum McpTransport {
    /// `command`, `args`, `env`.
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
    },
    /// `url` and `headers`: Streamable HTTP.
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
    /// `url`, `headers` and `transport: sse`: the older HTTP+SSE protocol.
    Sse {
        url: String,
        headers: Vec<(String, String)>,
    },
}

/// `mcp_servers.<name>.sampling`, with Hermes's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingSettings {
    pub enabled: bool,
    pub model: Option<String>,
    pub max_tokens_cap: u64,
    pub timeout: Duration,
    pub max_rpm: u32,
    pub allowed_models: Vec<String>,
    pub max_tool_rounds: u32,
}

impl Default for SamplingSettings {
    fn default() -> Self {
        SamplingSettings {
            enabled: true,
            model: None,
            max_tokens_cap: 4096,
            timeout: Duration::from_secs(30),
            max_rpm: 10,
            allowed_models: Vec::new(),
            max_tool_rounds: 5,
        }
    }
}

/// The keys of one server herald reads.
const SERVER_KEYS: &[&str] = &[
    "command",
    "args",
    "env",
    "url",
    "headers",
    "transport",
    "timeout",
    "connect_timeout",
    "enabled",
    "tools",
    "supports_parallel_tool_calls",
    "keepalive_interval",
    "sampling",
];
/// Hermes keys of a server that herald does not implement (listed, not warned about).
const HERMES_ONLY_SERVER_KEYS: &[&str] = &[
    "idle_timeout_seconds",
    "max_lifetime_seconds",
    "lifecycle",
    "skip_preflight",
    "auth",
    "oauth",
    "elicitation",
];

/// Reads `mcp_servers` and `mcp_discovery_timeout` of `doc`.
pub fn read_mcp_settings(
    r: &mut Reader,
    doc: &Node,
    env: &dyn Fn(&str) -> Option<String>,
) -> McpSettings {
    let discovery_timeout = doc
        .get("mcp_discovery_timeout")
        .and_then(seconds_of)
        .filter(|d| !d.is_zero())
        .unwrap_or(DEFAULT_DISCOVERY_TIMEOUT);
    let mut servers = Vec::new();
    let Some(node) = doc.get("mcp_servers").filter(|n| !n.is_null()) else {
        return McpSettings {
            servers,
            discovery_timeout,
        };
    };
    let NodeValue::Map(entries) = &node.value else {
        r.warn(
            Some(node),
            "mcp_servers",
            format!(
                "expected a mapping of server name to server, found {}: no MCP server is used",
                node.kind()
            ),
        );
        return McpSettings {
            servers,
            discovery_timeout,
        };
    };
    for (name, server) in entries {
        let key = format!("mcp_servers.{name}");
        let mut read = ServerReader { r, key: &key, env };
        if let Some(s) = read.server(name, server) {
            servers.push(s);
        }
    }
    McpSettings {
        servers,
        discovery_timeout,
    }
}

struct ServerReader<'a, 'r> {
    r: &'r mut Reader,
    key: &'a str,
    env: &'a dyn Fn(&str) -> Option<String>,
}

impl ServerReader<'_, '_> {
    fn server(&mut self, name: &str, node: &Node) -> Option<McpServerSettings> {
        if !matches!(node.value, NodeValue::Map(_)) {
            self.skip(node, format!("expected a mapping, found {}", node.kind()));
            return None;
        }
        let known: Vec<&str> = SERVER_KEYS
            .iter()
            .chain(HERMES_ONLY_SERVER_KEYS)
            .copied()
            .collect();
        self.r.check_keys(node, self.key, &known);
        for key in ["auth", "oauth"] {
            if let Some(n) = node.get(key).filter(|n| !n.is_null()) {
                self.warn(n, key, "not supported by herald: the server is used without it (OAuth is not implemented)".into());
            }
        }
        let transport = self.transport(node)?;
        let tools = node.get("tools").filter(|n| !n.is_null());
        Some(McpServerSettings {
            name: name.to_owned(),
            transport,
            timeout: self.secs(node, "timeout").unwrap_or(DEFAULT_CALL_TIMEOUT),
            connect_timeout: self
                .secs(node, "connect_timeout")
                .unwrap_or(DEFAULT_CONNECT_TIMEOUT),
            enabled: self.flag(node, "enabled", true),
            include: tools.and_then(|t| self.list(t, "tools.include")),
            exclude: tools
                .and_then(|t| self.list(t, "tools.exclude"))
                .unwrap_or_default(),
            resources: tools.is_none_or(|t| self.flag(t, "resources", true)),
            prompts: tools.is_none_or(|t| self.flag(t, "prompts", true)),
            parallel: self.flag(node, "supports_parallel_tool_calls", false),
            keepalive: self
                .secs(node, "keepalive_interval")
                .unwrap_or(DEFAULT_KEEPALIVE)
                .max(MIN_KEEPALIVE),
            sampling: self.sampling(node),
            idle_timeout: self.lifecycle(node, "idle_timeout_seconds"),
            max_lifetime: self.lifecycle(node, "max_lifetime_seconds"),
            tls: self.tls(node),
        })
    }

    /// `ssl_verify` (true, false or a CA bundle's path) and the client certificate
    /// (`client_cert` as a path or `[cert, key]`, `client_key`), as Hermes reads them.
    fn tls(&mut self, node: &Node) -> McpTls {
        let mut tls = McpTls::default();
        if let Some(n) = node.get("ssl_verify").filter(|n| !n.is_null()) {
            tls.verify = match &n.value {
                NodeValue::Bool(true) => TlsVerify::System,
                NodeValue::Bool(false) => TlsVerify::Off,
                NodeValue::Str(s) => match parse_bool_text(s) {
                    Some(true) => TlsVerify::System,
                    Some(false) => TlsVerify::Off,
                    None => TlsVerify::Ca(expand_home(&interpolate(s, self.env)).into()),
                },
                _ => {
                    self.warn(
                        n,
                        "ssl_verify",
                        "expected true, false or a CA bundle's path: certificates are checked"
                            .into(),
                    );
                    TlsVerify::System
                }
            };
        }
        let cert = self.list(node, "client_cert").unwrap_or_default();
        let key = self.text(node, "client_key");
        match (cert.as_slice(), key) {
            ([], _) => {}
            ([cert], key) => {
                tls.client_cert = Some(expand_home(cert).into());
                tls.client_key = key.map(|k| expand_home(&k).into());
            }
            ([cert, key, ..], extra) => {
                if let Some(n) = extra.and(node.get("client_key")) {
                    self.warn(
                        n,
                        "client_key",
                        "client_cert is a [cert, key] list already: client_key is not used".into(),
                    );
                }
                tls.client_cert = Some(expand_home(cert).into());
                tls.client_key = Some(expand_home(key).into());
            }
        }
        tls
    }

    /// A recycle limit, at the server's level or under `lifecycle:`; 0 is none, as
    /// Hermes reads it.
    fn lifecycle(&mut self, node: &Node, key: &str) -> Option<Duration> {
        let at = match node.get(key).filter(|n| !n.is_null()) {
            Some(_) => node,
            None => node.get("lifecycle").filter(|l| l.get(key).is_some())?,
        };
        let n = at.get(key)?;
        if seconds_of(n).is_some_and(|d| d.is_zero()) {
            return None;
        }
        self.secs(at, key)
    }

    fn transport(&mut self, node: &Node) -> Option<McpTransport> {
        if let Some(url) = self.text(node, "url") {
            let sse = self
                .text(node, "transport")
                .is_some_and(|t| t.eq_ignore_ascii_case("sse"));
            let lower = url.to_ascii_lowercase();
            if !(lower.starts_with("http://") || lower.starts_with("https://")) {
                self.skip(
                    node,
                    format!("url {url:?} is not an http:// or https:// URL"),
                );
                return None;
            }
            let headers = self.pairs(node, "headers");
            return Some(match sse {
                true => McpTransport::Sse { url, headers },
                false => McpTransport::Http { url, headers },
            });
        }
        let Some(command) = self.text(node, "command") else {
            self.skip(
                node,
                "has neither `command` (a local server) nor `url`".into(),
            );
            return None;
        };
        let args = self.list(node, "args").unwrap_or_default();
        Some(McpTransport::Stdio {
            command: expand_home(&command),
            args,
            env: self.pairs(node, "env"),
        })
    }

    fn sampling(&mut self, node: &Node) -> SamplingSettings {
        let mut s = SamplingSettings::default();
        let Some(n) = node.get("sampling").filter(|n| !n.is_null()) else {
            return s;
        };
        if let NodeValue::Bool(b) = n.value {
            s.enabled = b;
            return s;
        }
        s.enabled = self.flag(n, "enabled", true);
        s.model = self.text(n, "model");
        if let Some(v) = self.count(n, "max_tokens_cap").filter(|v| *v >= 1) {
            s.max_tokens_cap = v;
        }
        if let Some(v) = self.secs(n, "timeout").filter(|d| d.as_secs_f64() >= 1.0) {
            s.timeout = v;
        }
        if let Some(v) = self.count(n, "max_rpm").filter(|v| *v >= 1) {
            s.max_rpm = u32::try_from(v).unwrap_or(u32::MAX);
        }
        if let Some(v) = self.count(n, "max_tool_rounds") {
            s.max_tool_rounds = u32::try_from(v).unwrap_or(u32::MAX);
        }
        s.allowed_models = self.list(n, "allowed_models").unwrap_or_default();
        s
    }

    /// A whole number at `key`; anything else is warned about and left out.
    fn count(&mut self, node: &Node, key: &str) -> Option<u64> {
        let n = node.get(key).filter(|n| !n.is_null())?;
        let read = match &n.value {
            NodeValue::Int(i) => u64::try_from(*i).ok(),
            NodeValue::Str(t) => t.trim().parse::<u64>().ok(),
            _ => None,
        };
        if read.is_none() {
            self.warn(
                n,
                key,
                "expected a whole number of at least 0: the default is used".into(),
            );
        }
        read
    }

    /// Text at `key`, with `${VAR}` replaced.
    fn text(&mut self, node: &Node, key: &str) -> Option<String> {
        let n = node.get(key).filter(|n| !n.is_null())?;
        match &n.value {
            NodeValue::Str(s) => Some(interpolate(s, self.env)),
            NodeValue::Int(i) => Some(i.to_string()),
            NodeValue::Float(f) => Some(f.to_string()),
            _ => {
                self.warn(n, key, format!("expected text, found {}", n.kind()));
                None
            }
        }
    }

    /// A list of text (a single text is a list of one), with `${VAR}` replaced.
    fn list(&mut self, node: &Node, key: &str) -> Option<Vec<String>> {
        let (parent, last) = match key.split_once('.') {
            Some((_, last)) => (node, last),
            None => (node, key),
        };
        let n = parent.get(last).filter(|n| !n.is_null())?;
        let item = |v: &Node| match &v.value {
            NodeValue::Str(s) => Some(s.clone()),
            NodeValue::Int(i) => Some(i.to_string()),
            NodeValue::Float(f) => Some(f.to_string()),
            NodeValue::Bool(b) => Some(b.to_string()),
            _ => None,
        };
        let out: Option<Vec<String>> = match &n.value {
            NodeValue::Seq(items) => items.iter().map(item).collect(),
            _ => item(n).map(|s| vec![s]),
        };
        if out.is_none() {
            self.warn(
                n,
                key,
                format!("expected a list of text, found {}", n.kind()),
            );
        }
        out.map(|v| v.iter().map(|s| interpolate(s, self.env)).collect())
    }

    /// A mapping of names to text (`env`, `headers`).
    fn pairs(&mut self, node: &Node, key: &str) -> Vec<(String, String)> {
        let Some(n) = node.get(key).filter(|n| !n.is_null()) else {
            return Vec::new();
        };
        let NodeValue::Map(entries) = &n.value else {
            self.warn(n, key, format!("expected a mapping, found {}", n.kind()));
            return Vec::new();
        };
        let mut out = Vec::new();
        for (k, v) in entries {
            match &v.value {
                NodeValue::Str(s) => out.push((k.clone(), interpolate(s, self.env))),
                NodeValue::Int(_) | NodeValue::Float(_) | NodeValue::Bool(_) => {
                    out.push((k.clone(), v.to_json().to_string()))
                }
                NodeValue::Null => out.push((k.clone(), String::new())),
                _ => self.warn(v, &format!("{key}.{k}"), "expected text".into()),
            }
        }
        out
    }

    /// A flag, read as Hermes reads it (true/1/yes/on, false/0/no/off); anything else
    /// is `default`, with a warning.
    fn flag(&mut self, node: &Node, key: &str, default: bool) -> bool {
        let Some(n) = node.get(key).filter(|n| !n.is_null()) else {
            return default;
        };
        let read = match &n.value {
            NodeValue::Bool(b) => Some(*b),
            NodeValue::Int(0) => Some(false),
            NodeValue::Int(1) => Some(true),
            NodeValue::Str(s) => parse_bool_text(s),
            _ => None,
        };
        read.unwrap_or_else(|| {
            self.warn(n, key, format!("expected true or false: {default} is used"));
            default
        })
    }

    fn secs(&mut self, node: &Node, key: &str) -> Option<Duration> {
        let n = node.get(key).filter(|n| !n.is_null())?;
        let read = seconds_of(n).filter(|d| !d.is_zero());
        if read.is_none() {
            self.warn(
                n,
                key,
                "expected a positive number of seconds: the default is used".into(),
            );
        }
        read
    }

    fn warn(&mut self, node: &Node, key: &str, message: String) {
        self.r
            .warn(Some(node), &format!("{}.{key}", self.key), message);
    }

    fn skip(&mut self, node: &Node, why: String) {
        self.r.warn(
            Some(node),
            self.key,
            format!("{why}: this MCP server is not used"),
        );
    }
}

/// A number of seconds (an integer, a float or numeric text), if positive and finite.
fn seconds_of(n: &Node) -> Option<Duration> {
    let secs = match &n.value {
        NodeValue::Int(i) => *i as f64,
        NodeValue::Float(f) => *f,
        NodeValue::Str(s) => s.trim().parse::<f64>().ok()?,
        _ => return None,
    };
    (secs.is_finite() && secs >= 0.0)
        .then(|| Duration::try_from_secs_f64(secs).ok())
        .flatten()
}

/// `${VAR}` and `${env:VAR}` replaced from `env`; an unset (or empty) variable keeps
/// its placeholder, as Hermes leaves it.
pub fn interpolate(text: &str, env: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let name = &after[..end];
        let var = name.strip_prefix("env:").unwrap_or(name).trim();
        match env(var).filter(|v| !v.is_empty()) {
            Some(value) => out.push_str(&value),
            None => out.push_str(&rest[start..start + 2 + end + 1]),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// A leading `~/` as the user's home folder.
fn expand_home(command: &str) -> String {
    match (command.strip_prefix("~/"), std::env::var("HOME")) {
        (Some(rest), Ok(home)) if !home.is_empty() => format!("{home}/{rest}"),
        _ => command.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(yaml: &str, env: &dyn Fn(&str) -> Option<String>) -> (McpSettings, Vec<String>) {
        let doc = Node::parse_yaml(yaml).unwrap();
        let mut r = Reader::new(std::path::Path::new("config.yaml"));
        let s = read_mcp_settings(&mut r, &doc, env);
        let warnings = r.warnings.iter().map(|w| w.to_string()).collect();
        (s, warnings)
    }

    #[test]
    fn servers_read_as_hermes_reads_them() {
        let env = |k: &str| (k == "GH_TOKEN").then(|| "ghp_x".to_owned());
        let (s, warnings) = read(
            "mcp_discovery_timeout: 3\nmcp_servers:\n  github:\n    command: npx\n    args: [-y, server-github]\n    env: {GITHUB_TOKEN: '${GH_TOKEN}', MISSING: '${env:NOPE}'}\n    tools: {include: create_issue}\n    idle_timeout_seconds: 1.5\n    lifecycle: {max_lifetime_seconds: 60}\n  remote:\n    url: https://mcp.example/mcp\n    headers: {Authorization: 'Bearer ${GH_TOKEN}'}\n    timeout: 20\n    enabled: 'no'\n    sampling: {max_rpm: 2, allowed_models: [a], max_tool_rounds: lots}\n    idle_timeout_seconds: 0\n    ssl_verify: /etc/ca.pem\n    client_cert: [/etc/c.pem, /etc/k.pem]\n  old:\n    url: http://127.0.0.1:9/sse\n    transport: SSE\n    ssl_verify: 'false'\n  broken: {args: [x]}\n",
            &env,
        );
        assert_eq!(s.discovery_timeout, Duration::from_secs(3));
        assert_eq!(s.servers.len(), 3, "{warnings:?}");
        let gh = &s.servers[0];
        assert_eq!(
            gh.transport,
            McpTransport::Stdio {
                command: "npx".into(),
                args: vec!["-y".into(), "server-github".into()],
                env: vec![
                    ("GITHUB_TOKEN".into(), "ghp_x".into()),
                    ("MISSING".into(), "${env:NOPE}".into())
                ],
            }
        );
        assert_eq!(gh.include, Some(vec!["create_issue".to_owned()]));
        assert_eq!(gh.timeout, Duration::from_secs(300));
        assert_eq!(gh.connect_timeout, Duration::from_secs(60));
        assert!(gh.enabled && gh.resources && gh.prompts && gh.sampling.enabled);
        let remote = &s.servers[1];
        assert!(!remote.enabled);
        assert_eq!(remote.timeout, Duration::from_secs(20));
        assert_eq!(remote.sampling.max_rpm, 2);
        assert_eq!(remote.sampling.allowed_models, vec!["a".to_owned()]);
        assert!(matches!(
            &remote.transport,
            McpTransport::Http { headers, .. } if headers[0].1 == "Bearer ghp_x"
        ));
        assert_eq!(gh.idle_timeout, Some(Duration::from_millis(1500)));
        assert_eq!(gh.max_lifetime, Some(Duration::from_secs(60)));
        assert_eq!(remote.idle_timeout, None);
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("sampling.max_tool_rounds") || w.contains("max_tool_rounds")),
            "{warnings:?}"
        );
        assert_eq!(remote.sampling.max_tool_rounds, 5);
        assert_eq!(remote.tls.verify, TlsVerify::Ca("/etc/ca.pem".into()));
        assert_eq!(remote.tls.client_cert, Some("/etc/c.pem".into()));
        assert_eq!(remote.tls.client_key, Some("/etc/k.pem".into()));
        assert_eq!(gh.tls, McpTls::default());
        let old = s.servers.iter().find(|s| s.name == "old").unwrap();
        assert_eq!(old.tls.verify, TlsVerify::Off);
        assert_eq!(
            old.transport,
            McpTransport::Sse {
                url: "http://127.0.0.1:9/sse".into(),
                headers: vec![]
            }
        );
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("mcp_servers.broken") && w.contains("neither")),
            "{warnings:?}"
        );
    }

    #[test]
    fn interpolation_keeps_unset_placeholders() {
        let env = |k: &str| (k == "A").then(|| "1".to_owned());
        assert_eq!(interpolate("x${A}y${env:A}${B}", &env), "x1y1${B}");
        assert_eq!(interpolate("${A", &env), "${A");
    }
}
