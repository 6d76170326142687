//! The commented `config.yaml` written on a first start.

use crate::error::ConfigError;
use crate::home::Home;
use base64::Engine;
use rand::RngCore;
use serde_json::{Value, json};
use std::io::Write;
use std::path::Path;

/// A fresh random secret: 32 bytes, URL-safe base64 without padding (43 characters).
pub fn generate_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The default configuration text with `secret` filled in.
pub fn default_config_text(secret: &str) -> String {
    format!(
        r#"# herald configuration (the same keys as a Hermes Agent config.yaml).
# Written on first start; edit freely. Unknown keys are reported and ignored.

# The model that answers webhook events on agent routes (any OpenAI-compatible server).
# Without one, accepted events wait in the inbox (`herald inbox list`).
# model:
#   default: llama3.1
#   base_url: http://127.0.0.1:11434/v1

platforms:
  webhook:
    enabled: true
    extra:
      host: 127.0.0.1          # bind address; remove for all interfaces
      port: 8644
      # Global secret: used by every route without a `secret:` of its own.
      secret: "{secret}"
      rate_limit: 30           # accepted requests per route per minute
      max_body_bytes: 1048576
      # Agent runs at once (all routes / per route), retries of failed runs and
      # deliveries (1 s doubling to 15 s, for 10 minutes), shutdown grace period.
      max_concurrent_runs: 8
      max_concurrent_runs_per_route: 4
      retry_initial_seconds: 1
      retry_max_seconds: 15
      retry_for_seconds: 600
      shutdown_grace_seconds: 30
      routes:
        # POST /webhooks/example, signed like GitHub (X-Hub-Signature-256)
        # or with X-Webhook-Signature-V2 + X-Webhook-Timestamp.
        example:
          events: []           # empty: every event type
          prompt: "Event {{event_type}} arrived: {{__raw__}}"
          deliver: log
"#
    )
}

/// Writes the default `config.yaml` (mode 0600, never over an existing file) and
/// returns the generated secret.
pub fn write_default_config(home: &Home) -> Result<String, ConfigError> {
    let path = home.config_file();
    home.create().map_err(|source| ConfigError::Write {
        path: home.root().to_path_buf(),
        source,
    })?;
    let secret = generate_secret();
    write_private_new(&path, default_config_text(&secret).as_bytes()).map_err(|source| {
        ConfigError::Write {
            path: path.clone(),
            source,
        }
    })?;
    Ok(secret)
}

/// Creates `path` with mode 0600; fails if it exists.
pub fn write_private_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// What `herald gateway setup` writes into `config.yaml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupChoices {
    pub enable: bool,
    pub port: u16,
    pub secret: String,
    pub model: Option<ModelChoice>,
}

/// The model the agent uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelChoice {
    pub model: String,
    pub provider: ModelProvider,
}

/// Where the model is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelProvider {
    /// OpenRouter; the key is `OPENROUTER_API_KEY` in `.env`.
    OpenRouter,
    /// Any OpenAI-compatible server, written as `providers.<SETUP_PROVIDER>` with its
    /// key (if any) in the environment variable `SETUP_PROVIDER_KEY_ENV`.
    Endpoint { base_url: String },
}

/// The `providers:` key setup writes for an OpenAI-compatible endpoint.
pub const SETUP_PROVIDER: &str = "endpoint";
/// The `.env` variable holding that endpoint's key.
pub const SETUP_PROVIDER_KEY_ENV: &str = "ENDPOINT_API_KEY";

/// Sets `platforms.webhook.{enabled, extra.port, extra.secret}` and the model in a
/// config file, keeping every other key (comments are not kept: the old file is saved as
/// `config.yaml.bak`). A missing file gets the commented default with these values.
pub fn apply_setup(path: &Path, choices: &SetupChoices) -> Result<(), ConfigError> {
    let write_err = |source| ConfigError::Write {
        path: path.to_path_buf(),
        source,
    };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let text = default_config_text(&choices.secret)
                .replace(
                    "    enabled: true",
                    &format!("    enabled: {}", choices.enable),
                )
                .replace("      port: 8644", &format!("      port: {}", choices.port));
            if choices.model.is_none() {
                return write_private_replace(path, text.as_bytes()).map_err(write_err);
            }
            text
        }
        Err(source) => {
            return Err(ConfigError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let mut doc = parse_doc(path, &text)?;
    let webhook = entry(entry(&mut doc, "platforms"), "webhook");
    webhook["enabled"] = json!(choices.enable);
    let extra = entry(webhook, "extra");
    extra["port"] = json!(choices.port);
    extra["secret"] = json!(choices.secret);
    if let Some(model) = &choices.model {
        set_model(&mut doc, model);
    }
    write_doc(path, &doc)
}

/// What a prompt sent while a turn runs does (`display.busy_input_mode`, as Hermes
/// reads it; anything else is `interrupt`, its default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BusyInputMode {
    /// The turn is interrupted and the prompt runs next.
    #[default]
    Interrupt,
    /// The prompt runs after the turn, which goes on.
    Queue,
    /// The prompt joins the running turn at its next tool result.
    Steer,
}

impl BusyInputMode {
    pub fn parse(text: &str) -> Option<BusyInputMode> {
        match text.trim().to_ascii_lowercase().as_str() {
            "interrupt" => Some(BusyInputMode::Interrupt),
            "queue" => Some(BusyInputMode::Queue),
            "steer" => Some(BusyInputMode::Steer),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            BusyInputMode::Interrupt => "interrupt",
            BusyInputMode::Queue => "queue",
            BusyInputMode::Steer => "steer",
        }
    }
}

/// `display.busy_input_mode` of the config file as it is now (read at each use, as
/// Hermes reads it, so an edit applies at once).
pub fn busy_input_mode(path: &Path) -> BusyInputMode {
    let doc = read_doc(path).unwrap_or_default();
    doc["display"]["busy_input_mode"]
        .as_str()
        .and_then(BusyInputMode::parse)
        .unwrap_or_default()
}

/// `approvals.mcp_reload_confirm` as it is now: whether `/reload-mcp` asks first
/// (Hermes's default: yes).
pub fn mcp_reload_confirm(path: &Path) -> bool {
    let doc = read_doc(path).unwrap_or_default();
    let v = &doc["approvals"]["mcp_reload_confirm"];
    match v {
        serde_json::Value::Bool(b) => *b,
        serde_json::Value::String(s) => crate::reader::parse_bool_text(s).unwrap_or(true),
        _ => true,
    }
}

/// Writes `approvals.mcp_reload_confirm: false` (the answer "always").
pub fn stop_mcp_reload_confirm(path: &Path) -> Result<(), ConfigError> {
    let mut doc = read_doc(path)?;
    entry(&mut doc, "approvals")["mcp_reload_confirm"] = json!(false);
    write_doc(path, &doc)
}

/// Writes `mcp_servers.<name>` (`herald mcp add`), replacing an entry of that name.
pub fn set_mcp_server(path: &Path, name: &str, server: Value) -> Result<(), ConfigError> {
    let mut doc = read_doc(path)?;
    entry(&mut doc, "mcp_servers")[name] = server;
    write_doc(path, &doc)
}

/// Removes `mcp_servers.<name>`, and `mcp_servers` when it is left empty (`herald mcp
/// remove`). Whether there was such a server.
pub fn remove_mcp_server(path: &Path, name: &str) -> Result<bool, ConfigError> {
    let mut doc = read_doc(path)?;
    let Some(servers) = doc.get_mut("mcp_servers").and_then(Value::as_object_mut) else {
        return Ok(false);
    };
    if servers.remove(name).is_none() {
        return Ok(false);
    }
    if servers.is_empty()
        && let Some(top) = doc.as_object_mut()
    {
        top.remove("mcp_servers");
    }
    write_doc(path, &doc)?;
    Ok(true)
}

/// Writes `platform_toolsets.<platform>` (the TUI's `/tools enable|disable`).
pub fn set_platform_toolsets(
    path: &Path,
    platform: &str,
    toolsets: &[String],
) -> Result<(), ConfigError> {
    let mut doc = read_doc(path)?;
    entry(&mut doc, "platform_toolsets")[platform] = json!(toolsets);
    write_doc(path, &doc)
}

/// The `display:` section of the config file as it is now (empty when it is missing
/// or unreadable): the display toggles Hermes's TUI reads back.
pub fn display_settings(path: &Path) -> serde_json::Map<String, Value> {
    match read_doc(path).unwrap_or_default().get("display") {
        Some(Value::Object(display)) => display.clone(),
        _ => serde_json::Map::new(),
    }
}

/// Writes keys of `display:` (a dotted key such as `sections.thinking` goes under
/// `display.sections`), as the TUI's display toggles do.
pub fn set_display(path: &Path, changes: &[(&str, Value)]) -> Result<(), ConfigError> {
    let mut doc = read_doc(path)?;
    for (key, value) in changes {
        let mut at = entry(&mut doc, "display");
        let mut parts = key.split('.').peekable();
        while let Some(part) = parts.next() {
            if parts.peek().is_none() {
                at[part] = value.clone();
            } else {
                at = entry(at, part);
            }
        }
    }
    write_doc(path, &doc)
}

/// Writes `display.busy_input_mode` (the TUI's `/busy MODE`).
pub fn set_busy_input_mode(path: &Path, mode: BusyInputMode) -> Result<(), ConfigError> {
    set_display(path, &[("busy_input_mode", json!(mode.as_str()))])
}

/// Sets only the model (and its provider entry) in the config file, leaving every other
/// key as it is; a missing file gets a config with the model alone (`herald acp --setup`).
pub fn apply_model(path: &Path, choice: &ModelChoice) -> Result<(), ConfigError> {
    let mut doc = read_doc(path)?;
    set_model(&mut doc, choice);
    write_doc(path, &doc)
}

fn set_model(doc: &mut Value, choice: &ModelChoice) {
    match &choice.provider {
        ModelProvider::OpenRouter => {
            doc["model"] = json!({ "provider": "openrouter", "default": choice.model });
        }
        ModelProvider::Endpoint { base_url } => {
            doc["model"] = json!({ "provider": SETUP_PROVIDER, "default": choice.model });
            entry(doc, "providers")[SETUP_PROVIDER] = json!({
                "base_url": base_url,
                "key_env": SETUP_PROVIDER_KEY_ENV,
                "default_model": choice.model,
            });
        }
    }
}

/// A config document as JSON (empty or non-mapping text is an empty mapping).
fn parse_doc(path: &Path, text: &str) -> Result<Value, ConfigError> {
    if text.trim().is_empty() {
        return Ok(json!({}));
    }
    let doc: Value = crate::node::Node::parse_yaml(text)
        .map(|node| node.to_json())
        .map_err(|e| crate::yaml_errors::syntax_error(path, text, &e))?;
    Ok(if doc.is_object() { doc } else { json!({}) })
}

/// A config file as a document; a missing file is an empty one (a file that exists but
/// cannot be read is an error, so it is never replaced by a near-empty one).
fn read_doc(path: &Path) -> Result<Value, ConfigError> {
    match std::fs::read_to_string(path) {
        Ok(t) => parse_doc(path, &t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(json!({})),
        Err(source) => Err(ConfigError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Saves the old file as `config.yaml.bak`, then writes `doc` as YAML (0600, atomic).
fn write_doc(path: &Path, doc: &Value) -> Result<(), ConfigError> {
    let write_err = |source| ConfigError::Write {
        path: path.to_path_buf(),
        source,
    };
    if path.exists() {
        std::fs::copy(path, path.with_extension("yaml.bak")).map_err(write_err)?;
    }
    let yaml = serde_saphyr::to_string(doc)
        .map_err(|e| write_err(std::io::Error::other(e.to_string())))?;
    write_private_replace(path, yaml.as_bytes()).map_err(write_err)
}

/// The object under `key`, created when missing or not an object.
fn entry<'a>(v: &'a mut Value, key: &str) -> &'a mut Value {
    if !v[key].is_object() {
        v[key] = Value::Object(serde_json::Map::new());
    }
    &mut v[key]
}

/// Writes a file with mode 0600 through a temporary file and a rename.
pub fn write_private_replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("herald-tmp");
    let _ = std::fs::remove_file(&tmp);
    write_private_new(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// Appends `value` to the top-level list `key` of a config file (created when missing),
/// keeping every other key; the old file is saved as `config.yaml.bak`.
pub fn append_to_list(path: &Path, key: &str, value: &str) -> Result<(), ConfigError> {
    let mut doc = read_doc(path)?;
    if !doc[key].is_array() {
        doc[key] = json!([]);
    }
    if let Some(list) = doc[key].as_array_mut()
        && !list.iter().any(|v| v.as_str() == Some(value))
    {
        list.push(json!(value));
    }
    write_doc(path, &doc)
}

/// Turns a plugin on or off in `config.yaml` as `hermes plugins enable|disable` does:
/// on adds `key` to `plugins.enabled` and drops every name of it from
/// `plugins.disabled`; off does the reverse. Whether anything changed.
pub fn set_plugin_enabled(
    path: &Path,
    key: &str,
    names: &[&str],
    on: bool,
) -> Result<bool, ConfigError> {
    let mut doc = read_doc(path)?;
    let plugins = entry(&mut doc, "plugins");
    let list = |v: &Value| -> Vec<String> {
        match v {
            Value::Array(a) => a
                .iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect(),
            Value::String(s) => vec![s.clone()],
            _ => Vec::new(),
        }
    };
    let (mut add_to, mut drop_from) = (list(&plugins["enabled"]), list(&plugins["disabled"]));
    if !on {
        std::mem::swap(&mut add_to, &mut drop_from);
    }
    let before = (add_to.clone(), drop_from.clone());
    add_to.retain(|n| !names.contains(&n.as_str()) || n == key);
    if !add_to.iter().any(|n| n == key) {
        add_to.push(key.to_owned());
    }
    drop_from.retain(|n| n != key && !names.contains(&n.as_str()));
    if (add_to.clone(), drop_from.clone()) == before {
        return Ok(false);
    }
    if !on {
        std::mem::swap(&mut add_to, &mut drop_from);
    }
    plugins["enabled"] = json!(add_to);
    plugins["disabled"] = json!(drop_from);
    write_doc(path, &doc)?;
    Ok(true)
}
