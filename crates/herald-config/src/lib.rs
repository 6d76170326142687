//! herald's configuration: `config.yaml` (the same keys a Hermes user has), the
//! subscriptions file, `.env` and the environment overlay.
//!
//! Everything is read once into typed, checked values: every error names the file, the
//! line, the key and the fix. This crate does no network I/O and starts no threads.

pub mod agent_settings;
pub mod always_approvals;
pub mod api_settings;
pub mod chat_display;
pub mod chat_platforms;
pub mod chat_sources;
pub mod config;
pub mod default_config;
pub mod delegation_settings;
pub mod discord_settings;
pub mod env_file;
pub mod error;
pub mod hermes_keys;
pub mod home;
pub mod inbox_settings;
pub mod mcp_settings;
pub mod metrics_settings;
pub mod model_settings;
pub mod node;
pub mod platforms;
pub mod pyyaml;
pub mod reader;
pub mod route;
mod route_sender;
pub mod schedule_settings;
pub mod slack_settings;
pub use route_sender::check_sender_fields;
pub(crate) mod start_guard;
pub mod store_settings;
pub mod subscriptions;
pub mod subscriptions_file;
pub mod telegram_settings;
mod telegram_sources;
pub mod tracing_settings;

/// A small YAML document (a plugin's `plugin.yaml`) read into `T`: YAML is read in
/// this crate alone.
pub fn from_yaml<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    serde_saphyr::from_str(text).map_err(|e| e.to_string())
}
pub mod yaml_errors;

pub use agent_settings::AgentSettings;
pub use api_settings::{ApiServerSettings, ModelRoute};
pub use chat_platforms::ChatPlatformUse;
pub use config::{
    Config, ConnectionSettings, PlatformToolsets, WebhookSettings, WorkerSettings, load_dotenv,
    process_env, reload_dotenv,
};
pub use delegation_settings::DelegationSettings;
pub use error::{ConfigError, Problem};
pub use home::Home;
pub use mcp_settings::{
    McpServerSettings, McpSettings, McpTls, McpTransport, SamplingSettings, TlsVerify,
};
pub use model_settings::{ModelSettings, ProviderSettings};
pub use platforms::PlatformSettings;
pub use route::{ExtraValue, Route, RouteContext, RouteSource, is_loopback_host, is_loopback_name};
pub use store_settings::{PostgresSettings, SslMode, StoreBackend, StoreSettings};
pub use subscriptions::{Subscriptions, SubscriptionsError, load_subscriptions};
pub use subscriptions_file::{
    DeliverChat, Listed, NewSubscription, SenderFields, SubscriptionsFile, SubscriptionsFileError,
};
pub use telegram_settings::{
    AllowBots, HomeChannel, ReplyToMode, TelegramSettings, TelegramWebhook, UnauthorizedDm,
};
