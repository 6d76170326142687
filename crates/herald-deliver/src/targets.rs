//! The set of targets a gateway can deliver to, built once at start from config.yaml
//! and the environment (the variable names Hermes uses).

use crate::Target;
use crate::discord::Discord;
use crate::discord_interaction::DiscordInteraction;
use crate::github::GithubComment;
use crate::log_target::LogTarget;
use crate::matrix::Matrix;
use crate::mattermost::Mattermost;
use crate::slack::Slack;
use crate::telegram::Telegram;
use herald_config::PlatformSettings;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What the targets are built from.
pub struct TargetSettings<'a> {
    pub platforms: &'a BTreeMap<String, PlatformSettings>,
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

impl TargetSettings<'_> {
    fn platform(&self, name: &str) -> PlatformSettings {
        self.platforms.get(name).cloned().unwrap_or_default()
    }
    fn env(&self, name: &str) -> Option<String> {
        (self.env)(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }
    fn extra_str(p: &PlatformSettings, key: &str) -> Option<String> {
        p.extra
            .get(key)
            .and_then(|v| v.as_str())
            .map(str::to_owned)
            .filter(|s| !s.is_empty())
    }
    /// Home channel: the environment wins over config.
    fn home(&self, p: &PlatformSettings, var: &str) -> Option<String> {
        self.env(var).or_else(|| p.home_channel.clone())
    }
}

/// `extra.timeout_seconds` of a platform block, else the default request limit.
fn timeout_of(p: &PlatformSettings) -> std::time::Duration {
    p.extra
        .get("timeout_seconds")
        .and_then(|v| {
            v.as_f64()
                .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
        })
        .filter(|s| s.is_finite() && *s > 0.0)
        .and_then(|s| std::time::Duration::try_from_secs_f64(s).ok())
        .unwrap_or(crate::http::REQUEST_TIMEOUT)
}

/// The targets by name (lower case).
#[derive(Clone, Default)]
pub struct TargetSet {
    targets: BTreeMap<String, Arc<dyn Target>>,
    /// Platforms herald knows but that are not enabled, with the reason.
    disabled: BTreeMap<String, String>,
}

impl TargetSet {
    /// Builds every target whose platform is enabled (a token in the environment enables
    /// it unless config says `enabled: false`).
    pub fn build(s: &TargetSettings<'_>) -> TargetSet {
        let client = crate::http::client();
        let mut set = TargetSet::default();
        set.add(Arc::new(LogTarget));
        set.add(Arc::new(GithubComment {
            program: s
                .env("HERALD_GH_PROGRAM")
                .unwrap_or_else(|| "gh".to_owned()),
        }));

        let p = s.platform("telegram");
        let token = s.env("TELEGRAM_BOT_TOKEN").or_else(|| p.token.clone());
        let base_url = TargetSettings::extra_str(&p, "base_url")
            .or_else(|| s.env("TELEGRAM_BASE_URL"))
            .unwrap_or_else(|| "https://api.telegram.org/bot".to_owned());
        let home_channel = s.home(&p, "TELEGRAM_HOME_CHANNEL");
        set.enable_if(
            &p,
            token.is_some(),
            "telegram",
            "TELEGRAM_BOT_TOKEN",
            || {
                Arc::new(Telegram {
                    client: client.clone(),
                    timeout: timeout_of(&p),
                    base_url,
                    token,
                    home_channel,
                })
            },
        );

        let p = s.platform("discord");
        let token = s.env("DISCORD_BOT_TOKEN").or_else(|| p.token.clone());
        let base_url = TargetSettings::extra_str(&p, "base_url")
            .or_else(|| s.env("DISCORD_BASE_URL"))
            .unwrap_or_else(|| "https://discord.com/api/v10".to_owned());
        let home_channel = s.home(&p, "DISCORD_HOME_CHANNEL");
        // Answers to interactions need no bot token: the interaction's own token is the
        // credential.
        set.add(Arc::new(DiscordInteraction(Discord {
            client: client.clone(),
            timeout: timeout_of(&p),
            base_url: base_url.clone(),
            token: None,
            home_channel: None,
        })));
        set.enable_if(&p, token.is_some(), "discord", "DISCORD_BOT_TOKEN", || {
            Arc::new(Discord {
                client: client.clone(),
                timeout: timeout_of(&p),
                base_url,
                token,
                home_channel,
            })
        });

        let p = s.platform("slack");
        let token = s.env("SLACK_BOT_TOKEN").or_else(|| p.token.clone());
        let base_url = TargetSettings::extra_str(&p, "base_url")
            .or_else(|| s.env("SLACK_BASE_URL"))
            .unwrap_or_else(|| "https://slack.com/api/".to_owned());
        let home_channel = s.home(&p, "SLACK_HOME_CHANNEL");
        set.enable_if(&p, token.is_some(), "slack", "SLACK_BOT_TOKEN", || {
            Arc::new(Slack {
                client: client.clone(),
                timeout: timeout_of(&p),
                base_url,
                token,
                home_channel,
            })
        });

        let p = s.platform("mattermost");
        let token = s.env("MATTERMOST_TOKEN").or_else(|| p.token.clone());
        let url = s
            .env("MATTERMOST_URL")
            .or_else(|| TargetSettings::extra_str(&p, "url"));
        let home_channel = s.home(&p, "MATTERMOST_HOME_CHANNEL");
        set.enable_if(
            &p,
            token.is_some() && url.is_some(),
            "mattermost",
            "MATTERMOST_URL and MATTERMOST_TOKEN",
            || {
                Arc::new(Mattermost {
                    client: client.clone(),
                    timeout: timeout_of(&p),
                    url,
                    token,
                    home_channel,
                })
            },
        );

        let p = s.platform("matrix");
        let token = s.env("MATRIX_ACCESS_TOKEN").or_else(|| p.token.clone());
        let homeserver = s
            .env("MATRIX_HOMESERVER")
            .or_else(|| TargetSettings::extra_str(&p, "homeserver"));
        let home_room = s.home(&p, "MATRIX_HOME_ROOM");
        set.enable_if(
            &p,
            token.is_some() && homeserver.is_some(),
            "matrix",
            "MATRIX_HOMESERVER and MATRIX_ACCESS_TOKEN",
            || {
                Arc::new(Matrix {
                    client: client.clone(),
                    timeout: timeout_of(&p),
                    homeserver,
                    token,
                    home_room,
                })
            },
        );

        let p = s.platform("email");
        let host = s
            .env("EMAIL_SMTP_HOST")
            .or_else(|| TargetSettings::extra_str(&p, "smtp_host"));
        let port = s
            .env("EMAIL_SMTP_PORT")
            .or_else(|| {
                p.extra
                    .get("smtp_port")
                    .map(|v| v.to_string().trim_matches('"').to_owned())
            })
            .and_then(|v| v.parse::<u16>().ok())
            .unwrap_or(587);
        let security = crate::email::SmtpSecurity::parse(
            s.env("EMAIL_SMTP_SECURITY")
                .or_else(|| TargetSettings::extra_str(&p, "smtp_security"))
                .as_deref(),
            port,
        );
        let address = s
            .env("EMAIL_ADDRESS")
            .or_else(|| TargetSettings::extra_str(&p, "address"));
        let password = s.env("EMAIL_PASSWORD").or_else(|| p.token.clone());
        let home_address = s.home(&p, "EMAIL_HOME_ADDRESS");
        set.enable_if(
            &p,
            host.is_some() && address.is_some(),
            "email",
            "EMAIL_SMTP_HOST and EMAIL_ADDRESS",
            || {
                Arc::new(crate::email::Email {
                    host,
                    port,
                    security,
                    address,
                    password,
                    home_address,
                })
            },
        );
        set
    }

    fn add(&mut self, target: Arc<dyn Target>) {
        self.targets.insert(target.name().to_owned(), target);
    }

    fn enable_if(
        &mut self,
        p: &PlatformSettings,
        configured: bool,
        name: &str,
        needs: &str,
        make: impl FnOnce() -> Arc<dyn Target>,
    ) {
        let enabled = match p.enabled {
            Some(false) => false,
            Some(true) => true,
            None => configured,
        };
        if enabled {
            self.add(make());
        } else {
            let why = if p.enabled == Some(false) {
                format!("platforms.{name}.enabled is false")
            } else {
                format!("not configured: set {needs}")
            };
            self.disabled.insert(name.to_owned(), why);
        }
    }

    /// The target for a route's `deliver` (case-insensitive), or why there is none.
    pub fn get(&self, deliver: &str) -> Result<Arc<dyn Target>, String> {
        let name = deliver.trim().to_ascii_lowercase();
        if let Some(t) = self.targets.get(&name) {
            return Ok(t.clone());
        }
        Err(format!("target `{name}` {}", self.why_missing(&name)))
    }

    /// Why `deliver` has no target (`is not enabled (…)` or `is not supported by
    /// herald`), or `None` when it has one.
    pub fn unavailable(&self, deliver: &str) -> Option<String> {
        let name = deliver.trim().to_ascii_lowercase();
        (!self.targets.contains_key(&name)).then(|| self.why_missing(&name))
    }

    fn why_missing(&self, name: &str) -> String {
        match self.disabled.get(name) {
            Some(why) => format!("is not enabled ({why})"),
            None => "is not supported by herald".to_owned(),
        }
    }

    /// Names of the enabled targets.
    pub fn names(&self) -> Vec<&str> {
        self.targets.keys().map(String::as_str).collect()
    }
}
