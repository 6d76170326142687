use super::*;
use crate::{Config, ConfigError, Home};
use std::collections::HashMap;

const TOKEN: (&str, &str) = ("TELEGRAM_BOT_TOKEN", "123:abc");

fn load_with(yaml: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let env: HashMap<String, String> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Config::from_yaml(&Home::new("/h"), yaml, &|k| env.get(k).cloned())
}

/// Telegram's settings with the token in the environment plus `env`.
fn tg(yaml: &str, env: &[(&str, &str)]) -> TelegramSettings {
    let mut all = vec![TOKEN];
    all.extend_from_slice(env);
    tg_only(yaml, &all)
}

/// Telegram's settings with exactly `env`.
fn tg_only(yaml: &str, env: &[(&str, &str)]) -> TelegramSettings {
    let c = load_with(yaml, env).unwrap();
    c.telegram.expect("telegram is on")
}

fn warnings(yaml: &str, env: &[(&str, &str)]) -> Vec<String> {
    let mut all = vec![TOKEN];
    all.extend_from_slice(env);
    let c = load_with(yaml, &all).unwrap();
    c.warnings.iter().map(ToString::to_string).collect()
}

fn error_text(yaml: &str, env: &[(&str, &str)]) -> String {
    let mut all = vec![TOKEN];
    all.extend_from_slice(env);
    match load_with(yaml, &all) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("expected a configuration error"),
    }
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn defaults_with_only_a_token() {
    let t = tg("", &[]);
    assert_eq!(t.token, "123:abc");
    assert!(t.allowed_users.is_empty() && t.group_allowed_chats.is_empty());
    assert!(!t.require_mention);
    assert!(t.exclusive_bot_mentions);
    assert!(!t.reactions);
    assert_eq!(t.allow_bots, AllowBots::None);
    assert_eq!(t.reply_to_mode, ReplyToMode::First);
    assert_eq!(t.unauthorized_dm, UnauthorizedDm::Pair);
    assert!(t.group_sessions_per_user);
    assert!(!t.thread_sessions_per_user);
    assert_eq!(t.webhook, None);
    assert_eq!(t.home, None);
    assert_eq!(t.proxy, None);
    assert_eq!(t.base_url, DEFAULT_BASE_URL);
    assert_eq!(t.base_file_url, DEFAULT_BASE_FILE_URL);
    assert!(
        !format!("{t:?}").contains("123:abc"),
        "the token is not logged"
    );
}

#[test]
fn token_env_wins_over_the_nested_block() {
    let yaml = "platforms:\n  telegram:\n    token: '9:from-yaml'\n";
    assert_eq!(tg_only(yaml, &[]).token, "9:from-yaml");
    assert_eq!(tg(yaml, &[]).token, "123:abc");
    let gw = "gateway:\n  platforms:\n    telegram:\n      token: '8:gw'\n";
    assert_eq!(tg_only(gw, &[]).token, "8:gw");
}

#[test]
fn no_token_means_off_and_a_top_level_token_is_ignored() {
    assert!(load_with("", &[]).unwrap().telegram.is_none());
    let c = load_with("telegram:\n  token: '7:top'\n", &[]).unwrap();
    assert!(
        c.telegram.is_none(),
        "Hermes reads no token from `telegram:`"
    );
    assert!(
        c.warnings
            .iter()
            .any(|w| w.place.key == "telegram.token" && w.place.line == 2),
        "{:?}",
        c.warnings
    );
}

#[test]
fn enabled_false_with_a_token_in_env_is_off() {
    for yaml in [
        "telegram:\n  enabled: false\n",
        "platforms:\n  telegram:\n    enabled: false\n",
        "gateway:\n  platforms:\n    telegram:\n      enabled: 'no'\n",
    ] {
        let c = load_with(yaml, &[TOKEN]).unwrap();
        assert!(c.telegram.is_none(), "{yaml}");
    }
    // The top-level block's `enabled` wins over the nested one's.
    let yaml = "telegram:\n  enabled: true\nplatforms:\n  telegram:\n    enabled: false\n";
    assert!(load_with(yaml, &[TOKEN]).unwrap().telegram.is_some());
    let on = "platforms:\n  telegram:\n    enabled: true\n";
    assert!(load_with(on, &[]).unwrap().telegram.is_none(), "no token");
}

#[test]
fn a_placeholder_token_is_off_with_a_warning() {
    let c = load_with("", &[("TELEGRAM_BOT_TOKEN", "changeme")]).unwrap();
    assert!(c.telegram.is_none());
    assert!(
        c.warnings
            .iter()
            .any(|w| w.place.key == "TELEGRAM_BOT_TOKEN" && w.message.contains("placeholder"))
    );
}

#[test]
fn allowed_users_env_yaml_and_star() {
    let yaml = "telegram:\n  allow_from: [1, '2']\n";
    assert_eq!(tg(yaml, &[]).allowed_users, set(&["1", "2"]));
    let env = [("TELEGRAM_ALLOWED_USERS", " 3, 4 ,")];
    assert_eq!(tg("", &env).allowed_users, set(&["3", "4"]));
    assert_eq!(tg(yaml, &env).allowed_users, set(&["3", "4"]), "env wins");
    let star = tg("", &[("TELEGRAM_ALLOWED_USERS", "*")]);
    assert!(star.allowed_users.contains("*"));
    assert!(star.has_allow_list());
    let comma = "platforms:\n  telegram:\n    allow_from: '5,6'\n";
    assert_eq!(tg(comma, &[]).allowed_users, set(&["5", "6"]));
}

#[test]
fn allow_all_users_reads_true_1_yes_only() {
    assert!(tg("", &[("TELEGRAM_ALLOW_ALL_USERS", "yes")]).allow_all_users);
    assert!(tg("", &[("TELEGRAM_ALLOW_ALL_USERS", "TRUE")]).allow_all_users);
    assert!(!tg("", &[("TELEGRAM_ALLOW_ALL_USERS", "on")]).allow_all_users);
    assert!(!tg("", &[]).allow_all_users);
}

#[test]
fn gateway_allowed_users_and_allow_all() {
    let t = tg(
        "",
        &[
            ("GATEWAY_ALLOWED_USERS", "7,8"),
            ("GATEWAY_ALLOW_ALL_USERS", "1"),
        ],
    );
    assert_eq!(t.gateway_allowed_users, set(&["7", "8"]));
    assert!(t.gateway_allow_all_users);
    assert!(!tg("", &[("GATEWAY_ALLOW_ALL_USERS", "on")]).gateway_allow_all_users);
}

#[test]
fn group_allowed_users_env_yaml_and_precedence() {
    let yaml = "telegram:\n  group_allow_from: ['11']\n";
    let env = [("TELEGRAM_GROUP_ALLOWED_USERS", "12")];
    assert_eq!(tg(yaml, &[]).group_allowed_users, set(&["11"]));
    assert_eq!(tg("", &env).group_allowed_users, set(&["12"]));
    assert_eq!(tg(yaml, &env).group_allowed_users, set(&["12"]), "env wins");
}

#[test]
fn group_allowed_chats_env_yaml_and_precedence() {
    let yaml = "platforms:\n  telegram:\n    group_allowed_chats: [-1001, -1002]\n";
    let env = [("TELEGRAM_GROUP_ALLOWED_CHATS", "-1003")];
    assert_eq!(tg(yaml, &[]).group_allowed_chats, set(&["-1001", "-1002"]));
    assert_eq!(tg("", &env).group_allowed_chats, set(&["-1003"]));
    assert_eq!(
        tg(yaml, &env).group_allowed_chats,
        set(&["-1003"]),
        "env wins"
    );
}

#[test]
fn allowed_chats_yaml_wins_over_env() {
    let yaml = "telegram:\n  allowed_chats: [-100]\n";
    let env = [("TELEGRAM_ALLOWED_CHATS", "-200, -300")];
    assert_eq!(tg("", &env).allowed_chats, set(&["-200", "-300"]));
    assert_eq!(tg(yaml, &[]).allowed_chats, set(&["-100"]));
    assert_eq!(tg(yaml, &env).allowed_chats, set(&["-100"]), "extra wins");
    let nested = "platforms:\n  telegram:\n    extra:\n      allowed_chats: '-400'\n";
    assert_eq!(tg(nested, &env).allowed_chats, set(&["-400"]));
}

#[test]
fn allowed_topics_yaml_wins_over_env() {
    let yaml = "telegram:\n  allowed_topics: [1, 5]\n";
    let env = [("TELEGRAM_ALLOWED_TOPICS", "9")];
    assert_eq!(tg("", &env).allowed_topics, set(&["9"]));
    assert_eq!(tg(yaml, &env).allowed_topics, set(&["1", "5"]));
}

#[test]
fn ignored_threads_are_numbers() {
    let env = [("TELEGRAM_IGNORED_THREADS", "3, x, 4")];
    assert_eq!(tg("", &env).ignored_threads, [3, 4].into());
    assert!(
        warnings("", &env)
            .iter()
            .any(|w| w.contains("TELEGRAM_IGNORED_THREADS") && w.contains("\"x\""))
    );
    let yaml = "telegram:\n  ignored_threads: [5]\n";
    assert_eq!(tg(yaml, &[]).ignored_threads, [5].into());
    assert_eq!(tg(yaml, &env).ignored_threads, [3, 4].into(), "env wins");
    let extra = "platforms:\n  telegram:\n    extra:\n      ignored_threads: [6]\n";
    assert_eq!(tg(extra, &env).ignored_threads, [6].into(), "extra wins");
}

#[test]
fn require_mention_defaults_off_and_env_turns_it_on() {
    assert!(!tg("", &[]).require_mention);
    assert!(tg("", &[("TELEGRAM_REQUIRE_MENTION", "yes")]).require_mention);
    assert!(!tg("", &[("TELEGRAM_REQUIRE_MENTION", "no")]).require_mention);
}

#[test]
fn platform_block_require_mention_overrides_env() {
    let env = [("TELEGRAM_REQUIRE_MENTION", "true")];
    for yaml in [
        "telegram:\n  require_mention: false\n",
        "platforms:\n  telegram:\n    require_mention: false\n",
        "platforms:\n  telegram:\n    extra:\n      require_mention: false\n",
    ] {
        assert!(!tg(yaml, &env).require_mention, "{yaml}");
    }
    let on = "telegram:\n  require_mention: 'on'\n";
    assert!(tg(on, &[("TELEGRAM_REQUIRE_MENTION", "false")]).require_mention);
}

#[test]
fn top_level_require_mention_is_bridged() {
    assert!(tg("require_mention: true\n", &[]).require_mention);
    let env = [("TELEGRAM_REQUIRE_MENTION", "false")];
    assert!(
        tg("require_mention: true\n", &env).require_mention,
        "bridged into extra, which wins over env"
    );
    let block = "require_mention: true\ntelegram:\n  require_mention: false\n";
    assert!(!tg(block, &[]).require_mention, "the telegram block wins");
    let nested = "require_mention: true\nplatforms:\n  telegram:\n    require_mention: false\n";
    assert!(!tg(nested, &[]).require_mention);
}

#[test]
fn mention_patterns_env_forms_and_yaml() {
    let json = [("TELEGRAM_MENTION_PATTERNS", r#"["^hey bot", "herald"]"#)];
    assert_eq!(tg("", &json).mention_patterns, ["^hey bot", "herald"]);
    let lines = [("TELEGRAM_MENTION_PATTERNS", "^hi\nyo, there\n")];
    assert_eq!(tg("", &lines).mention_patterns, ["^hi", "yo, there"]);
    let yaml = "telegram:\n  mention_patterns: ['^hermes']\n";
    assert_eq!(tg(yaml, &[]).mention_patterns, ["^hermes"]);
    assert_eq!(tg(yaml, &json).mention_patterns, ["^hermes"], "extra wins");
    let one = "telegram:\n  mention_patterns: '^one'\n";
    assert_eq!(tg(one, &[]).mention_patterns, ["^one"]);
}

#[test]
fn a_mention_pattern_that_does_not_compile_is_skipped_with_a_warning() {
    let yaml = "telegram:\n  mention_patterns: ['(open', ok]\n";
    assert_eq!(tg(yaml, &[]).mention_patterns, ["ok"]);
    assert!(
        warnings(yaml, &[])
            .iter()
            .any(|w| w.contains("telegram.mention_patterns") && w.contains("(open"))
    );
    let bad = "telegram:\n  mention_patterns: {a: 1}\n";
    assert!(tg(bad, &[]).mention_patterns.is_empty());
}

#[test]
fn free_response_chats_env_wins_over_the_block_but_not_extra() {
    let yaml = "telegram:\n  free_response_chats: [-1]\n";
    let env = [("TELEGRAM_FREE_RESPONSE_CHATS", "-2")];
    assert_eq!(tg(yaml, &[]).free_response_chats, set(&["-1"]));
    assert_eq!(tg("", &env).free_response_chats, set(&["-2"]));
    assert_eq!(tg(yaml, &env).free_response_chats, set(&["-2"]), "env wins");
    let extra = "telegram:\n  extra:\n    free_response_chats: [-3]\n";
    assert_eq!(tg(extra, &env).free_response_chats, set(&["-3"]));
}

#[test]
fn free_response_topics_yaml_wins_over_env() {
    let yaml = "telegram:\n  free_response_topics: ['-100:1', '-100:7']\n";
    let env = [("TELEGRAM_FREE_RESPONSE_TOPICS", "-200:3")];
    assert_eq!(tg("", &env).free_response_topics, set(&["-200:3"]));
    assert_eq!(
        tg(yaml, &env).free_response_topics,
        set(&["-100:1", "-100:7"])
    );
}

#[test]
fn exclusive_bot_mentions_defaults_on() {
    let env = [("TELEGRAM_EXCLUSIVE_BOT_MENTIONS", "false")];
    assert!(!tg("", &env).exclusive_bot_mentions);
    let yaml = "telegram:\n  exclusive_bot_mentions: true\n";
    assert!(tg(yaml, &env).exclusive_bot_mentions, "extra wins");
    let off = "platforms:\n  telegram:\n    exclusive_bot_mentions: false\n";
    assert!(!tg(off, &[]).exclusive_bot_mentions);
}

#[test]
fn allow_bots_env_yaml_and_precedence() {
    assert_eq!(
        tg("", &[("TELEGRAM_ALLOW_BOTS", " Mentions ")]).allow_bots,
        AllowBots::Mentions
    );
    let yaml = "telegram:\n  allow_bots: all\n";
    assert_eq!(tg(yaml, &[]).allow_bots, AllowBots::All);
    assert_eq!(
        tg(yaml, &[("TELEGRAM_ALLOW_BOTS", "none")]).allow_bots,
        AllowBots::None,
        "env wins"
    );
    let odd = [("TELEGRAM_ALLOW_BOTS", "some")];
    assert_eq!(tg("", &odd).allow_bots, AllowBots::None);
    assert!(warnings("", &odd).iter().any(|w| w.contains("\"some\"")));
}

#[test]
fn reactions_default_off_env_wins() {
    assert!(tg("", &[("TELEGRAM_REACTIONS", "true")]).reactions);
    let yaml = "telegram:\n  reactions: true\n";
    assert!(tg(yaml, &[]).reactions);
    assert!(
        !tg(yaml, &[("TELEGRAM_REACTIONS", "0")]).reactions,
        "env wins"
    );
    let off_word = [("TELEGRAM_REACTIONS", "off")];
    assert!(tg("", &off_word).reactions, "as in Hermes, only false/0/no");
    assert!(
        warnings("", &off_word)
            .iter()
            .any(|w| w.contains("TELEGRAM_REACTIONS"))
    );
}

#[test]
fn home_channel_env_and_yaml() {
    let env = [("TELEGRAM_HOME_CHANNEL", "-100")];
    assert_eq!(
        tg("", &env).home,
        Some(HomeChannel {
            chat_id: "-100".into(),
            name: "Home".into(),
            thread_id: None,
        })
    );
    let full = [
        ("TELEGRAM_HOME_CHANNEL", "-100"),
        ("TELEGRAM_HOME_CHANNEL_NAME", "Ops"),
        ("TELEGRAM_HOME_CHANNEL_THREAD_ID", "17"),
    ];
    let home = tg("", &full).home.unwrap();
    assert_eq!(
        (home.name.as_str(), home.thread_id.as_deref()),
        ("Ops", Some("17"))
    );
    let yaml = "platforms:\n  telegram:\n    home_channel: {platform: telegram, chat_id: -5, name: Team, thread_id: 3}\n";
    let home = tg(yaml, &[]).home.unwrap();
    assert_eq!(
        (
            home.chat_id.as_str(),
            home.name.as_str(),
            home.thread_id.as_deref()
        ),
        ("-5", "Team", Some("3"))
    );
    assert_eq!(tg(yaml, &env).home.unwrap().chat_id, "-100", "env wins");
    let no_id = "platforms:\n  telegram:\n    home_channel: {name: x}\n";
    assert_eq!(tg(no_id, &[]).home, None);
    assert!(warnings(no_id, &[]).iter().any(|w| w.contains("chat_id")));
}

#[test]
fn webhook_url_secret_and_port() {
    let env = [
        ("TELEGRAM_WEBHOOK_URL", "https://bot.example/tg"),
        ("TELEGRAM_WEBHOOK_SECRET", "s3cret"),
    ];
    let w = tg("", &env).webhook.unwrap();
    assert_eq!(
        (w.url.as_str(), w.secret.as_str(), w.port),
        ("https://bot.example/tg", "s3cret", 8443)
    );
    assert!(!format!("{w:?}").contains("s3cret"));
    let mut with_port = env.to_vec();
    with_port.push(("TELEGRAM_WEBHOOK_PORT", "9443"));
    assert_eq!(tg("", &with_port).webhook.unwrap().port, 9443);
    let mut bad_port = env.to_vec();
    bad_port.push(("TELEGRAM_WEBHOOK_PORT", "http"));
    assert_eq!(tg("", &bad_port).webhook.unwrap().port, 8443);
    assert!(
        warnings("", &bad_port)
            .iter()
            .any(|w| w.contains("TELEGRAM_WEBHOOK_PORT"))
    );
}

#[test]
fn webhook_url_without_secret_is_a_configuration_error() {
    let e = error_text("", &[("TELEGRAM_WEBHOOK_URL", "https://bot.example/tg")]);
    assert!(e.contains("`TELEGRAM_WEBHOOK_URL`"), "{e}");
    assert!(e.contains("TELEGRAM_WEBHOOK_SECRET is required"), "{e}");
    assert!(e.contains("openssl rand -hex 32"), "{e}");
    // Telegram off: Hermes never gets that far.
    let env = [("TELEGRAM_WEBHOOK_URL", "https://bot.example/tg")];
    assert!(load_with("", &env).is_ok());
}

#[test]
fn reply_to_mode_env_yaml_and_precedence() {
    assert_eq!(
        tg("", &[("TELEGRAM_REPLY_TO_MODE", "ALL")]).reply_to_mode,
        ReplyToMode::All
    );
    let yaml = "telegram:\n  reply_to_mode: all\n";
    assert_eq!(tg(yaml, &[]).reply_to_mode, ReplyToMode::All);
    assert_eq!(
        tg(yaml, &[("TELEGRAM_REPLY_TO_MODE", "off")]).reply_to_mode,
        ReplyToMode::Off,
        "env wins"
    );
    let extra = "telegram:\n  extra:\n    reply_to_mode: 'off'\n";
    assert_eq!(tg(extra, &[]).reply_to_mode, ReplyToMode::Off);
}

#[test]
fn reply_to_mode_false_is_off() {
    for yaml in [
        "telegram:\n  reply_to_mode: false\n",
        "platforms:\n  telegram:\n    reply_to_mode: false\n",
        "platforms:\n  telegram:\n    reply_to_mode: off\n",
    ] {
        assert_eq!(tg(yaml, &[]).reply_to_mode, ReplyToMode::Off, "{yaml}");
    }
}

#[test]
fn an_unknown_reply_mode_in_env_falls_back_to_the_nested_block() {
    let yaml = "platforms:\n  telegram:\n    reply_to_mode: all\n";
    let env = [("TELEGRAM_REPLY_TO_MODE", "sometimes")];
    assert_eq!(tg(yaml, &env).reply_to_mode, ReplyToMode::All);
    assert_eq!(tg("", &env).reply_to_mode, ReplyToMode::First);
    assert!(
        warnings("", &env)
            .iter()
            .any(|w| w.contains("\"sometimes\""))
    );
}

#[test]
fn proxy_env_yaml_and_precedence() {
    let yaml = "telegram:\n  proxy_url: ' socks5://y:1080 '\n";
    let env = [("TELEGRAM_PROXY", "http://x:3128")];
    assert_eq!(tg(yaml, &[]).proxy.as_deref(), Some("socks5://y:1080"));
    assert_eq!(tg("", &env).proxy.as_deref(), Some("http://x:3128"));
    assert_eq!(tg(yaml, &env).proxy.as_deref(), Some("http://x:3128"));
}

#[test]
fn unauthorized_dm_is_pair_only_without_an_allow_list() {
    assert_eq!(tg("", &[]).unauthorized_dm, UnauthorizedDm::Pair);
    for var in [
        "TELEGRAM_ALLOWED_USERS",
        "TELEGRAM_GROUP_ALLOWED_USERS",
        "TELEGRAM_GROUP_ALLOWED_CHATS",
        "GATEWAY_ALLOWED_USERS",
    ] {
        assert_eq!(
            tg("", &[(var, "1")]).unauthorized_dm,
            UnauthorizedDm::Ignore,
            "{var}"
        );
    }
    let yaml_list = "telegram:\n  allow_from: [1]\n";
    assert_eq!(tg(yaml_list, &[]).unauthorized_dm, UnauthorizedDm::Ignore);
}

#[test]
fn unauthorized_dm_explicit_settings() {
    let list = [("TELEGRAM_ALLOWED_USERS", "1")];
    let block = "telegram:\n  unauthorized_dm_behavior: pair\n";
    assert_eq!(
        tg(block, &list).unauthorized_dm,
        UnauthorizedDm::Pair,
        "per-platform wins"
    );
    let extra = "platforms:\n  telegram:\n    extra:\n      unauthorized_dm_behavior: PAIR\n";
    assert_eq!(tg(extra, &list).unauthorized_dm, UnauthorizedDm::Pair);
    let top = "unauthorized_dm_behavior: ignore\n";
    assert_eq!(tg(top, &[]).unauthorized_dm, UnauthorizedDm::Ignore);
    let gw = "gateway:\n  unauthorized_dm_behavior: ignore\n";
    assert_eq!(tg(gw, &[]).unauthorized_dm, UnauthorizedDm::Ignore);
    let top_pair = "unauthorized_dm_behavior: pair\n";
    assert_eq!(
        tg(top_pair, &list).unauthorized_dm,
        UnauthorizedDm::Ignore,
        "a global `pair` is the default, so the allow-list still makes it ignore"
    );
    let policy = "telegram:\n  dm_policy: pairing\n";
    assert_eq!(tg(policy, &list).unauthorized_dm, UnauthorizedDm::Pair);
    let odd = "telegram:\n  unauthorized_dm_behavior: drop\n";
    assert_eq!(
        tg(odd, &list).unauthorized_dm,
        UnauthorizedDm::Pair,
        "global default"
    );
    assert!(
        warnings(odd, &[])
            .iter()
            .any(|w| w.contains("pair or ignore"))
    );
}

#[test]
fn session_flags_top_level_then_gateway() {
    let top = "group_sessions_per_user: false\nthread_sessions_per_user: 'yes'\n";
    let t = tg(top, &[]);
    assert!(!t.group_sessions_per_user && t.thread_sessions_per_user);
    let gw = "gateway:\n  group_sessions_per_user: false\n  thread_sessions_per_user: true\n";
    let t = tg(gw, &[]);
    assert!(!t.group_sessions_per_user && t.thread_sessions_per_user);
    let both = "group_sessions_per_user: true\ngateway:\n  group_sessions_per_user: false\n";
    assert!(tg(both, &[]).group_sessions_per_user, "the top level wins");
    let odd = "group_sessions_per_user: maybe\n";
    assert!(tg(odd, &[]).group_sessions_per_user, "default");
    assert!(warnings(odd, &[]).iter().any(|w| w.contains("\"maybe\"")));
}

#[test]
fn base_urls_extra_then_env_then_default() {
    let env = [("TELEGRAM_BASE_URL", "http://127.0.0.1:8081/bot")];
    let t = tg("", &env);
    assert_eq!(t.base_url, "http://127.0.0.1:8081/bot");
    assert_eq!(t.base_file_url, "http://127.0.0.1:8081/bot");
    let yaml = "platforms:\n  telegram:\n    extra:\n      base_url: http://local:8081/bot\n      base_file_url: http://local:8081/file/bot\n";
    let t = tg(yaml, &env);
    assert_eq!(t.base_url, "http://local:8081/bot", "extra wins");
    assert_eq!(t.base_file_url, "http://local:8081/file/bot");
    let top = "telegram:\n  extra:\n    base_url: http://top:1/bot\n";
    assert_eq!(tg(top, &[]).base_url, "http://top:1/bot");
}

#[test]
fn a_wrongly_typed_value_is_an_error_with_its_line() {
    let e = error_text("telegram:\n  require_mention: [a]\n", &[]);
    assert!(e.contains(":2:3: `telegram.require_mention`"), "{e}");
    assert!(e.contains("expected true or false, found a list"), "{e}");
    let e = error_text("telegram:\n  allowed_chats: {a: 1}\n", &[]);
    assert!(e.contains("`telegram.allowed_chats`"), "{e}");
    let e = error_text("platforms:\n  telegram:\n    allow_from: [[1]]\n", &[]);
    assert!(e.contains("`platforms.telegram.allow_from[0]`"), "{e}");
}

#[test]
fn telegram_keys_are_known_and_hermes_only_ones_listed() {
    let yaml = "telegram:\n  require_mention: true\n  guest_mode: true\n  alow_from: [1]\nplatforms:\n  telegram:\n    reactions: true\n    observe_unmentioned_group_messages: true\nrequire_mention: true\nunauthorized_dm_behavior: pair\ngroup_sessions_per_user: true\ngateway:\n  thread_sessions_per_user: false\n";
    let c = load_with(yaml, &[TOKEN]).unwrap();
    let w: Vec<String> = c.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("alow_from") && w[0].contains("did you mean `allow_from`"));
    assert_eq!(
        c.hermes_only,
        [
            "telegram.guest_mode",
            "platforms.telegram.observe_unmentioned_group_messages"
        ]
    );
}
