//! Session keys as Hermes builds them (`gateway/session.py` `build_session_key`), so a
//! chat's conversation is the same one Hermes kept for it.

/// What kind of chat a message came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChatType {
    Dm,
    Group,
    Channel,
    Thread,
}

impl ChatType {
    pub fn as_str(self) -> &'static str {
        match self {
            ChatType::Dm => "dm",
            ChatType::Group => "group",
            ChatType::Channel => "channel",
            ChatType::Thread => "thread",
        }
    }
}

/// Where a message came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// `telegram`.
    pub platform: &'static str,
    pub chat_type: ChatType,
    pub chat_id: String,
    /// A forum topic (Telegram's General topic is `1`).
    pub thread_id: Option<String>,
    pub user_id: Option<String>,
}

/// Whether a group's participants each have their own session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRules {
    /// `group_sessions_per_user` (Hermes's default: true).
    pub group_per_user: bool,
    /// `thread_sessions_per_user` (Hermes's default: false).
    pub thread_per_user: bool,
}

impl Default for KeyRules {
    fn default() -> Self {
        KeyRules {
            group_per_user: true,
            thread_per_user: false,
        }
    }
}

/// `agent:main:<platform>:dm:<chat_id>[:<thread_id>]` for a DM;
/// `agent:main:<platform>:<type>:<chat_id>[:<thread_id>][:<user_id>]` for a group,
/// channel or thread, with the user when the rules say each participant has their own.
pub fn session_key(source: &Source, rules: KeyRules) -> String {
    let mut key = format!(
        "agent:main:{}:{}:",
        source.platform,
        source.chat_type.as_str()
    );
    if source.chat_type == ChatType::Dm {
        let chat = match source.chat_id.as_str() {
            "" => source.user_id.as_deref().unwrap_or(""),
            id => id,
        };
        key.push_str(chat);
        if let Some(thread) = &source.thread_id {
            key.push(':');
            key.push_str(thread);
        }
        return key;
    }
    key.push_str(&source.chat_id);
    if let Some(thread) = &source.thread_id {
        key.push(':');
        key.push_str(thread);
    }
    let per_user = match source.thread_id {
        Some(_) => rules.thread_per_user,
        None => rules.group_per_user,
    };
    if per_user && let Some(user) = &source.user_id {
        key.push(':');
        key.push_str(user);
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(chat_type: ChatType, thread: Option<&str>) -> Source {
        Source {
            platform: "telegram",
            chat_type,
            chat_id: "-100".into(),
            thread_id: thread.map(str::to_owned),
            user_id: Some("7".into()),
        }
    }

    #[test]
    fn keys_are_built_as_hermes_builds_them() {
        let rules = KeyRules::default();
        let mut dm = source(ChatType::Dm, None);
        dm.chat_id = "42".into();
        assert_eq!(session_key(&dm, rules), "agent:main:telegram:dm:42");
        dm.thread_id = Some("5".into());
        assert_eq!(session_key(&dm, rules), "agent:main:telegram:dm:42:5");
        let group = source(ChatType::Group, None);
        assert_eq!(
            session_key(&group, rules),
            "agent:main:telegram:group:-100:7"
        );
        let shared = KeyRules {
            group_per_user: false,
            thread_per_user: false,
        };
        assert_eq!(
            session_key(&group, shared),
            "agent:main:telegram:group:-100"
        );
        let topic = source(ChatType::Group, Some("3"));
        assert_eq!(
            session_key(&topic, rules),
            "agent:main:telegram:group:-100:3"
        );
        let each = KeyRules {
            group_per_user: true,
            thread_per_user: true,
        };
        assert_eq!(
            session_key(&topic, each),
            "agent:main:telegram:group:-100:3:7"
        );
    }
}
