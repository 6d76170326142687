//! Signs that a home's chat bot talks to people through Hermes's gateway on a platform
//! herald does not receive from yet: a Hermes per-platform block (`discord:`, `slack:`,
//! ... at the top level), a platform turned on with `platforms.<name>.enabled: true`, or
//! an allow-list such as `DISCORD_ALLOWED_USERS`. herald sends to some of these platforms
//! but receives from none of them, so each sign is reported (never a refused start).
//! Telegram, Slack and Discord are served (herald-chat), so they are not on this list.

use crate::node::Node;

/// Chat platforms Hermes's gateway receives messages from and herald does not yet, with
/// the prefix of their allow-list variables (`<PREFIX>_ALLOWED_USERS`,
/// `<PREFIX>_ALLOW_ALL_USERS`, `<PREFIX>_GROUP_ALLOWED_USERS`).
pub const CHAT_PLATFORMS: &[(&str, &str)] = &[
    ("whatsapp", "WHATSAPP"),
    ("mattermost", "MATTERMOST"),
    ("matrix", "MATRIX"),
    ("signal", "SIGNAL"),
    ("sms", "SMS"),
    ("email", "EMAIL"),
    ("dingtalk", "DINGTALK"),
    ("feishu", "FEISHU"),
    ("wecom", "WECOM"),
    ("wecom_callback", "WECOM_CALLBACK"),
    ("weixin", "WEIXIN"),
    ("bluebubbles", "BLUEBUBBLES"),
    ("qqbot", "QQ"),
    ("yuanbao", "YUANBAO"),
];

/// One sign that a chat platform is meant to receive messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatPlatformUse {
    /// The platform's name as `deliver:` spells it (`telegram`).
    pub platform: String,
    /// Where the sign is, in words (``` `telegram:` at line 12 of config.yaml ```,
    /// `TELEGRAM_ALLOWED_USERS (environment or .env)`).
    pub source: String,
}

/// Every sign in the document and the environment, in platform order.
pub(crate) fn chat_platform_uses(
    doc: &Node,
    gateway: Option<&Node>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<ChatPlatformUse> {
    let at = |node: &Node| match node.line {
        0 => "config.yaml".to_owned(),
        line => format!("line {line} of config.yaml"),
    };
    let set = |name: &str| env(name).is_some_and(|v| !v.trim().is_empty());
    let mut uses = Vec::new();
    for (platform, prefix) in CHAT_PLATFORMS {
        let mut add = |source: String| {
            uses.push(ChatPlatformUse {
                platform: (*platform).to_owned(),
                source,
            })
        };
        if let Some(block) = doc.get(platform).filter(|n| !n.is_null()) {
            add(format!("`{platform}:` at {}", at(block)));
        }
        for (key, platforms) in [
            ("platforms", doc.get("platforms")),
            (
                "gateway.platforms",
                gateway.and_then(|g| g.get("platforms")),
            ),
        ] {
            let enabled = platforms
                .and_then(|p| p.get(platform))
                .and_then(|b| b.get("enabled"))
                .filter(|e| e.to_json() == serde_json::Value::Bool(true));
            if let Some(e) = enabled {
                add(format!("`{key}.{platform}.enabled: true` at {}", at(e)));
            }
        }
        for suffix in ["ALLOWED_USERS", "ALLOW_ALL_USERS", "GROUP_ALLOWED_USERS"] {
            let var = format!("{prefix}_{suffix}");
            if set(&var) {
                add(format!("{var} (environment or .env)"));
            }
        }
    }
    uses
}
