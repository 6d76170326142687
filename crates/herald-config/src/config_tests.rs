use super::*;
use crate::default_config::default_config_text;
use std::collections::HashMap;

fn load_with(yaml: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let env: HashMap<String, String> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Config::from_yaml(&Home::new("/h"), yaml, &|k| env.get(k).cloned())
}

fn load(yaml: &str) -> Result<Config, ConfigError> {
    load_with(yaml, &[])
}

fn error_text(yaml: &str) -> String {
    load(yaml).err().map(|e| e.to_string()).unwrap_or_default()
}

#[test]
fn empty_config_has_defaults() {
    let c = load("").unwrap();
    assert_eq!(
        c.webhook,
        WebhookSettings {
            enabled: false,
            host: None,
            port: 8644,
            secret: None,
            rate_limit: 30,
            max_body_bytes: 1_048_576,
            script_timeout_secs: 30,
            workers: WorkerSettings::default(),
            connections: ConnectionSettings::default(),
        }
    );
    assert!(c.routes.is_empty());
}

#[test]
fn connection_knobs_are_read() {
    let c = load(
        "platforms:\n  webhook:\n    extra:\n      header_timeout_seconds: 3\n      body_timeout_seconds: 4\n      idle_timeout_seconds: 5\n      max_connections: 6\n      max_body_bytes_in_flight: 7\n",
    )
    .unwrap();
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    assert_eq!(
        c.webhook.connections,
        ConnectionSettings {
            header_timeout_secs: 3,
            body_timeout_secs: 4,
            idle_timeout_secs: 5,
            max_connections: 6,
            max_body_bytes_in_flight: 7,
        }
    );
}

#[test]
fn default_config_loads_without_warnings() {
    let c = load(&default_config_text("abc")).unwrap();
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    assert!(c.webhook.enabled);
    assert_eq!(c.routes.len(), 1);
    assert_eq!(c.routes[0].secret, "abc");
}

#[test]
fn hermes_config_with_other_keys_loads() {
    let yaml = r#"
model: {default: x}
compression: {enabled: true}
platforms:
  telegram: {enabled: true}
  webhook:
    enabled: "yes"
    extra:
      port: "9000"
      secret: g
      routes:
        gh:
          events: [pull_request]
          secert: typo
          prompt: "PR {pull_request.title}"
          filters:
            - field: action
              in: [opened]
"#;
    let c = load(yaml).unwrap();
    assert!(c.webhook.enabled);
    assert_eq!(c.webhook.port, 9000);
    let warnings: Vec<String> = c.warnings.iter().map(|w| w.to_string()).collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(
        c.hermes_only,
        ["compression"],
        "a Hermes key, not an unknown one"
    );
    assert!(
        !warnings.iter().any(|w| w.contains("`model`")),
        "the agent's model block is known"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("secert") && w.contains("did you mean `secret`")),
        "{warnings:?}"
    );
    assert!(
        warnings.iter().any(|w| w.contains(":14:11:")),
        "{warnings:?}"
    );
}

#[test]
fn env_overlay_needs_webhook_enabled() {
    let c = load_with("", &[("WEBHOOK_PORT", "9999"), ("WEBHOOK_SECRET", "s")]).unwrap();
    assert!(!c.webhook.enabled);
    assert_eq!(c.webhook.port, 8644);
    let c = load_with(
        "",
        &[
            ("WEBHOOK_ENABLED", "TRUE"),
            ("WEBHOOK_PORT", "9999"),
            ("WEBHOOK_SECRET", "s"),
        ],
    )
    .unwrap();
    assert!(c.webhook.enabled);
    assert_eq!(
        (c.webhook.port, c.webhook.secret.as_deref()),
        (9999, Some("s"))
    );
    let c = load_with(
        "platforms: {webhook: {enabled: true}}",
        &[("WEBHOOK_ENABLED", "0")],
    )
    .unwrap();
    assert!(c.webhook.enabled);
}

#[test]
fn gateway_platforms_merge_with_top_level_winning() {
    let yaml = "gateway:\n  platforms:\n    webhook:\n      enabled: true\n      extra: {port: 1, rate_limit: 5}\nplatforms:\n  webhook:\n    extra: {port: 2}\n";
    let c = load(yaml).unwrap();
    assert!(c.webhook.enabled);
    assert_eq!((c.webhook.port, c.webhook.rate_limit), (2, 5));
}

#[test]
fn missing_secret_names_line_and_fix() {
    let text = error_text(
        "platforms:\n  webhook:\n    extra:\n      routes:\n        r1:\n          prompt: hi\n",
    );
    assert!(text.contains("config.yaml:5:9:"), "{text}");
    assert!(
        text.contains("platforms.webhook.extra.routes.r1.secret"),
        "{text}"
    );
    assert!(text.contains("set `secret:`"), "{text}");
}

#[test]
fn empty_route_secret_does_not_fall_back() {
    let text = error_text(
        "platforms:\n  webhook:\n    extra:\n      secret: g\n      routes:\n        r1: {secret: ''}\n",
    );
    assert!(text.contains("no secret"), "{text}");
}

#[test]
fn insecure_only_on_loopback() {
    let base = "platforms:\n  webhook:\n    extra:\n      HOST\n      routes:\n        r: {secret: INSECURE_NO_AUTH}\n";
    assert!(error_text(&base.replace("HOST", "")).contains("INSECURE_NO_AUTH is allowed only"));
    assert!(error_text(&base.replace("HOST", "host: 0.0.0.0")).contains("INSECURE_NO_AUTH"));
    assert!(error_text(&base.replace("HOST", "host: '[::1]'")).contains("INSECURE_NO_AUTH"));
    for host in [
        "127.0.0.1",
        "localhost",
        "'::1'",
        " LocalHost ",
        "ip6-loopback",
    ] {
        assert!(
            load(&base.replace("HOST", &format!("host: {host}"))).is_ok(),
            "{host}"
        );
    }
}

#[test]
fn deliver_only_needs_a_real_target() {
    let base = "platforms:\n  webhook:\n    extra:\n      secret: s\n      routes:\n        r: {deliver_only: true DELIVER}\n";
    assert!(error_text(&base.replace(" DELIVER", "")).contains("needs a real target"));
    assert!(
        error_text(&base.replace(" DELIVER", ", deliver: log")).contains("needs a real target")
    );
    assert!(load(&base.replace(" DELIVER", ", deliver: telegram")).is_ok());
}

#[test]
fn bad_types_are_errors_and_bad_filters_warnings() {
    let text = error_text("platforms:\n  webhook:\n    extra:\n      port: abc\n");
    assert!(
        text.contains("config.yaml:4:") && text.contains("port") && text.contains("whole number"),
        "{text}"
    );
    // A filter the spec says never matches is a warning: the route keeps serving.
    for filters in [
        "[{field: a, regex: '(unclosed'}]",
        "[{field: a}]",
        "[5]",
        "oops",
    ] {
        let config = load(&format!(
            "platforms:\n  webhook:\n    extra:\n      secret: s\n      routes:\n        r:\n          filters: {filters}\n"
        ))
        .unwrap();
        let warnings: Vec<String> = config.warnings.iter().map(|w| w.to_string()).collect();
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("config.yaml:7:") && w.contains("routes.r.filters")),
            "{filters}: {warnings:?}"
        );
    }
    let text = error_text(
        "platforms:\n  webhook:\n    extra:\n      secret: s\n      routes:\n        r: {events: 5}\n",
    );
    assert!(
        text.contains("events") && text.contains("list of strings"),
        "{text}"
    );
    let text = error_text(
        "platforms:\n  webhook:\n    extra:\n      secret: s\n      routes:\n        r: {enabled: 'false'}\n",
    );
    assert!(text.contains("only `enabled: false`"), "{text}");
}

#[test]
fn syntax_errors_have_positions() {
    match load("platforms:\n  webhook: [unclosed\n") {
        Err(ConfigError::Syntax { line, .. }) => assert!(line >= 2),
        other => panic!("{other:?}"),
    }
}

#[test]
fn script_timeout_floor_and_multiplex_env() {
    let c = load_with("platforms:\n  webhook:\n    extra: {script_timeout_seconds: 0}\nmultiplex_profiles: true\n", &[("GATEWAY_MULTIPLEX_PROFILES", "off")]).unwrap();
    assert_eq!(c.webhook.script_timeout_secs, 1);
    assert!(!c.multiplex_profiles);
}

#[test]
fn subscriptions_skip_bad_entries() {
    use crate::route::RouteContext;
    use crate::subscriptions::parse_subscriptions;
    let ctx = RouteContext {
        global_secret: Some("g"),
        host: None,
        home: std::path::Path::new("/h"),
    };
    let json = br#"{"ok": {"prompt": "x"}, "clash": {}, "bad": {"secret": "INSECURE_NO_AUTH"}, "log": {"deliver_only": true}}"#;
    let subs =
        parse_subscriptions(std::path::Path::new("/h/subs.json"), json, &["clash"], &ctx).unwrap();
    let names: Vec<&str> = subs.routes.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, vec!["ok"]);
    assert_eq!(subs.skipped.len(), 3);
    assert!(parse_subscriptions(std::path::Path::new("x"), b"[1]", &[], &ctx).is_err());
    assert!(parse_subscriptions(std::path::Path::new("x"), b"{", &[], &ctx).is_err());
}

#[test]
fn worker_settings_are_read_from_extra() {
    let yaml = "platforms:\n  webhook:\n    enabled: true\n    extra:\n      secret: s\n      max_concurrent_runs: 3\n      max_concurrent_runs_per_route: 1\n      retry_initial_seconds: 2\n      retry_max_seconds: 4\n      retry_for_seconds: 60\n      shutdown_grace_seconds: 5\n";
    let c = load_with(yaml, &[]).unwrap();
    assert_eq!(
        c.webhook.workers,
        WorkerSettings {
            max_runs: 3,
            max_runs_per_route: 1,
            retry_initial_secs: 2,
            retry_max_secs: 4,
            retry_for_secs: 60,
            shutdown_grace_secs: 5,
        }
    );
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let err = load_with(
        "platforms:\n  webhook:\n    enabled: true\n    extra: {secret: s, max_concurrent_runs: 0}\n",
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("max_concurrent_runs"), "{err}");
}

#[test]
fn a_hermes_dashboard_block_is_a_finding_that_says_what_herald_serves() {
    let c = load("dashboard:\n  enabled: true\n  port: 9119\n").unwrap();
    let f = c
        .findings
        .iter()
        .find(|f| f.contains("dashboard:"))
        .unwrap();
    assert!(
        f.contains("/dashboard") && f.contains("herald dashboard token"),
        "{f}"
    );
    assert!(load("model: x\n").unwrap().findings.is_empty());
}
