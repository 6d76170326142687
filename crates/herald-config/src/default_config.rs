//! The commented `config.yaml` written on a first start.

use crate::error::ConfigError;
use crate::home::Home;
use base64::Engine;
use rand::RngCore;
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
    std::fs::create_dir_all(home.root()).map_err(|source| ConfigError::Write {
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
