//! First contact with the command line (issue 16): values starting with `-`, help and
//! overview, a closed pipe, `gateway status`, `webhook test` on any route, `setup`.

use super::support::*;
use std::process::{Command, Stdio};

#[test]
fn option_values_may_start_with_a_hyphen() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        config_with_routes("        other: {}\n"),
    )
    .unwrap();
    let (code, out, err) = run_cli(
        home.path(),
        &[
            "webhook",
            "subscribe",
            "github-issues",
            "--deliver",
            "telegram",
            "--deliver-chat-id",
            "-100123456789",
            "--prompt",
            "-v is not a flag here",
            "--events",
            "-odd",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let stored: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(home.path().join("webhook_subscriptions.json")).unwrap(),
    )
    .unwrap();
    let entry = &stored["github-issues"];
    assert_eq!(entry["deliver_extra"]["chat_id"], "-100123456789");
    assert_eq!(entry["prompt"], "-v is not a flag here");
    assert_eq!(entry["events"][0], "-odd");
    // A chat prompt too (no provider configured: the error is about the model, not -q).
    let (code, _, err) = run_cli(home.path(), &["chat", "-q", "-hello"]);
    assert_ne!(code, 2, "{err}");
    assert!(!err.contains("unexpected argument"), "{err}");
    // --toolsets stays a usage error, and nothing is written.
    let before = std::fs::read(home.path().join("webhook_subscriptions.json")).unwrap();
    let (code, _, err) = run_cli(
        home.path(),
        &["webhook", "subscribe", "x", "--toolsets", "terminal"],
    );
    assert_eq!(code, 2, "{err}");
    assert_eq!(
        std::fs::read(home.path().join("webhook_subscriptions.json")).unwrap(),
        before
    );
}

#[test]
fn bare_herald_prints_an_overview_and_help_opens_with_it() {
    let home = tempfile::tempdir().unwrap();
    let (code, out, _) = run_cli(home.path(), &[]);
    assert_eq!(code, 0);
    assert!(
        out.starts_with("herald turns events into agent work"),
        "{out}"
    );
    assert!(out.contains("herald gateway run"), "{out}");
    assert!(out.contains("herald gateway status"), "{out}");
    let (code, help, _) = run_cli(home.path(), &["--help"]);
    assert_eq!(code, 0);
    assert!(
        help.starts_with("herald turns events into agent work"),
        "{help}"
    );
    assert!(!help.contains("The herald binary"), "{help}");
    assert!(help.contains("Usage: herald"), "{help}");
}

#[test]
fn every_positional_argument_has_a_description() {
    let home = tempfile::tempdir().unwrap();
    let commands: &[&[&str]] = &[
        &["inbox", "show"],
        &["inbox", "replay"],
        &["webhook", "subscribe"],
        &["webhook", "remove"],
        &["webhook", "test"],
    ];
    for command in commands {
        let mut args = command.to_vec();
        args.push("--help");
        let (_, help, _) = run_cli(home.path(), &args);
        let section: Vec<&str> = help
            .lines()
            .skip_while(|l| *l != "Arguments:")
            .skip(1)
            .take_while(|l| !l.is_empty())
            .collect();
        assert!(!section.is_empty(), "{command:?}: {help}");
        for line in section {
            let described = line.trim().split_once("  ").map(|(_, d)| d.trim());
            assert!(
                described.is_some_and(|d| !d.is_empty()),
                "{command:?}: {line:?}"
            );
        }
    }
}

#[test]
fn output_into_a_closed_pipe_exits_quietly() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.yaml"), config_with_routes("")).unwrap();
    // Enough subscriptions that `webhook list` writes more than a pipe holds.
    let mut subs = serde_json::Map::new();
    for i in 0..3000 {
        subs.insert(
            format!("route-{i}"),
            serde_json::json!({"events": [], "secret": "s", "prompt": "p", "deliver": "log",
                "description": "x".repeat(40)}),
        );
    }
    std::fs::write(
        home.path().join("webhook_subscriptions.json"),
        serde_json::to_string(&subs).unwrap(),
    )
    .unwrap();
    let mut child = Command::new(BIN)
        .args(["webhook", "list"])
        .env("HERALD_HOME", home.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read one line, then hang up, as `| head -1` does.
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 16];
    std::io::Read::read_exact(&mut stdout, &mut first).unwrap();
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.is_empty(), "{err}");
}

#[test]
fn gateway_status_reports_a_running_gateway_and_its_inbox() {
    let home = tempfile::tempdir().unwrap();
    let (code, out, _) = run_cli(home.path(), &["gateway", "status"]);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("Gateway: not running"), "{out}");
    let mut h = Herald::start(&config_with_routes("        r: {}\n"));
    let (code, out, err) = h.cli(&["gateway", "status"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!("Gateway: running (pid {}", h.child.id())),
        "{out}"
    );
    assert!(out.contains(&h.base), "{out}");
    assert!(out.contains("Inbox: empty"), "{out}");
    assert_eq!(h.terminate(), Some(0));
    let (code, out, _) = h.cli(&["gateway", "status"]);
    assert_eq!(code, 3, "{out}");
    // A gateway that died without cleaning up is not reported as running.
    let mut h = Herald::start(&config_with_routes("        r: {}\n"));
    h.kill9();
    let (code, out, _) = h.cli(&["gateway", "status"]);
    assert_eq!(code, 3, "{out}");
}

#[test]
fn subscribe_before_any_config_says_how_to_get_one() {
    let home = tempfile::tempdir().unwrap();
    let (code, out, _) = run_cli(home.path(), &["webhook", "subscribe", "x"]);
    assert_eq!(code, 1);
    assert!(out.contains("Webhook platform is not enabled"), "{out}");
    assert!(out.contains("herald gateway run"), "{out}");
    assert!(out.contains("herald gateway setup"), "{out}");
    assert!(!out.contains("Enable it in"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_test_sends_the_routes_event_and_explains_the_answer() {
    let config = config_with_routes(
        "        github-pr:\n          events: [pull_request, issues]\n          deliver: log\n          prompt: hi\n        filtered:\n          filters: {field: action, equals: opened}\n          prompt: hi\n        tg:\n          deliver_only: true\n          deliver: telegram\n          prompt: hi\n          deliver_extra: {chat_id: '1'}\n",
    );
    let h = Herald::start_with(&config, &[("TELEGRAM_BOT_TOKEN", "")]);
    h.point_cli_here();
    // A config.yaml route, sent its first listed event.
    let (code, out, err) = h.cli(&["webhook", "test", "github-pr"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Response (202)"), "{out}");
    let inbox = h.inbox();
    assert_eq!(inbox[0]["event_type"], "pull_request", "{inbox:?}");
    // --event overrides; an ignored event says why.
    let (code, out, _) = h.cli(&["webhook", "test", "github-pr", "--event", "push"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("\"status\":\"ignored\""), "{out}");
    assert!(
        out.contains("Why: the event `push` is not in the route's events (pull_request, issues)"),
        "{out}"
    );
    let (_, out, _) = h.cli(&["webhook", "test", "filtered"]);
    assert!(
        out.contains("Why: the route's `filters` did not match"),
        "{out}"
    );
    // A 502 names the reason from the delivery record; the body is the spec's.
    let (code, out, _) = h.cli(&["webhook", "test", "tg"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("Response (502)"), "{out}");
    assert!(
        out.contains("Delivery failed: ") && out.contains("TELEGRAM_BOT_TOKEN"),
        "{out}"
    );
    // Neither a subscription nor a route.
    let (code, out, _) = h.cli(&["webhook", "test", "nope"]);
    assert_eq!(code, 1);
    assert!(
        out.contains("No subscription or config.yaml route named 'nope'."),
        "{out}"
    );
    assert!(
        out.contains("  Routes: ") && out.contains("github-pr") && out.contains("filtered"),
        "the valid names are listed: {out}"
    );
    // `webhook list` shows config.yaml's routes too.
    let (code, out, _) = h.cli(&["webhook", "list"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("route(s) in "), "{out}");
    assert!(out.contains("◆ github-pr") && out.contains("◆ tg"), "{out}");
}

#[test]
fn setup_asks_for_the_model_and_prints_a_request_to_try() {
    let home = tempfile::tempdir().unwrap();
    // enable, port, secret, target, provider, base URL, model, key
    let answers =
        "y\n8650\nmy-secret-value\nnone\nendpoint\nhttp://127.0.0.1:9/v1\nqwen3\nsk-local\n";
    let (code, text) = super::setup::setup(home.path(), answers);
    assert_eq!(code, 0, "{text}");
    let config = std::fs::read_to_string(home.path().join("config.yaml")).unwrap();
    assert!(config.contains("provider: endpoint"), "{config}");
    assert!(
        config.contains("base_url: http://127.0.0.1:9/v1"),
        "{config}"
    );
    assert!(config.contains("qwen3"), "{config}");
    let env = std::fs::read_to_string(home.path().join(".env")).unwrap();
    assert!(env.contains("ENDPOINT_API_KEY=sk-local"), "{env}");
    assert!(text.contains("platforms.webhook.extra.secret"), "{text}");
    assert!(
        text.contains("curl -i http://127.0.0.1:8650/webhooks/example"),
        "{text}"
    );
    // The printed request works as written: its secret extraction finds the secret.
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("SECRET=$("))
        .unwrap();
    let shell = format!("{}; printf %s \"$SECRET\"", line.trim());
    let got = Command::new("sh").args(["-c", &shell]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&got.stdout), "my-secret-value");
    // The model block is one herald selects.
    let (_, _, err) = run_cli(home.path(), &["chat", "-q", "hi"]);
    assert!(err.contains("127.0.0.1:9"), "{err}");
}

#[test]
fn setup_from_hermes_copies_the_hermes_home_and_leaves_it_untouched() {
    let hermes = tempfile::tempdir().unwrap();
    let h = hermes.path();
    std::fs::write(h.join("config.yaml"), config_with_routes("        r: {}\n")).unwrap();
    std::fs::write(h.join(".env"), "TELEGRAM_BOT_TOKEN=x\n").unwrap();
    std::fs::write(h.join("webhook_subscriptions.json"), "{}").unwrap();
    std::fs::write(h.join("SOUL.md"), "You are kind.").unwrap();
    for dir in ["scripts", "skills/review", "plugins/p"] {
        std::fs::create_dir_all(h.join(dir)).unwrap();
    }
    std::fs::write(h.join("scripts/s.py"), "print(1)").unwrap();
    std::fs::write(h.join("skills/review/SKILL.md"), "# Review").unwrap();
    std::fs::write(h.join("plugins/p/plugin.yaml"), "name: p").unwrap();
    std::fs::write(h.join("state.db"), "not a database").unwrap();
    std::fs::create_dir_all(h.join("logs")).unwrap();
    std::fs::write(h.join("logs/agent.log"), "a line").unwrap();
    std::fs::write(h.join("auth.json"), "{}").unwrap();
    let before = list_tree(h);

    let parent = tempfile::tempdir().unwrap();
    let home = parent.path().join("herald-home");
    // The first start on a fresh home says the Hermes home was found, and stops.
    let mut child = Command::new(BIN)
        .args(["gateway", "run"])
        .env("HERALD_HOME", &home)
        .env("HERMES_HOME", h)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut first,
    )
    .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(first.contains("found a Hermes home"), "{first}");
    assert!(
        !home.exists(),
        "the first start writes nothing beside a Hermes home"
    );

    let out = Command::new(BIN)
        .args(["setup", "--from-hermes"])
        .env("HERALD_HOME", &home)
        .env("HERMES_HOME", h)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // Everything is copied, and a state.db that cannot be read says so and fails.
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("state.db: not imported: cannot read"),
        "{text}"
    );
    assert!(text.contains("  logs: Hermes's own logs"), "{text}");
    assert!(
        text.contains("  auth.json: credentials of `hermes login`"),
        "{text}"
    );
    assert!(
        text.contains("Hermes's agent tools: the ten browser_* tools"),
        "{text}"
    );
    let kept_report = std::fs::read_to_string(home.join("hermes-migration.txt")).unwrap();
    assert!(text.starts_with(&kept_report), "{kept_report}");
    let carried = text.split("Carried:\n").nth(1).unwrap();
    for name in [
        "config.yaml",
        ".env",
        "webhook_subscriptions.json",
        "SOUL.md",
        "scripts/s.py",
        "skills/review/SKILL.md",
        "plugins/p/plugin.yaml",
    ] {
        assert!(home.join(name).is_file(), "{name}");
        assert!(carried.contains(&format!("  {name}\n")), "{name}: {text}");
    }
    assert!(!home.join("state.db").exists());
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(home.join(".env"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(list_tree(h), before, "the Hermes home is untouched");
    // A second copy keeps what is there.
    std::fs::write(home.join("SOUL.md"), "mine").unwrap();
    let out = Command::new(BIN)
        .args(["setup", "--from-hermes", h.to_str().unwrap()])
        .env("HERALD_HOME", &home)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Kept:\n") && text.contains("  SOUL.md (already in the herald home"),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(home.join("SOUL.md")).unwrap(),
        "mine"
    );
}

/// Every file under `dir` with its content, for before/after comparisons.
pub(super) fn list_tree(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.display().to_string(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// A file of the repository, as a new user reads it.
fn repo_file(path: &str) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::read_to_string(root.join(path)).unwrap()
}

#[test]
fn the_docs_a_new_user_reads_say_what_the_issue_asks() {
    let readme = repo_file("README.md");
    let top: Vec<&str> = readme.lines().take(6).collect();
    assert!(
        top.iter()
            .any(|l| l.starts_with("cargo run --release -p herald-cli -- gateway run"))
    );
    assert!(top.iter().any(|l| l.starts_with("scripts/test")));
    for needle in [
        "cargo install --path crates/herald-cli --locked",
        "A five-minute tour",
        "Payload URL",
        "Content type",
        "TELEGRAM_BOT_TOKEN",
        "herald inbox list",
        "docs/performance.md",
        "herald setup --from-hermes",
        "is **not** safe while\nHermes runs",
    ] {
        assert!(readme.contains(needle), "README lacks {needle:?}");
    }
    assert!(
        !readme.contains("<!-- PERF-START -->"),
        "the benchmark narrative moved"
    );
    assert!(repo_file("docs/performance.md").contains("<!-- PERF-START -->"));
    assert!(
        !repo_file("docs/webhook.md").contains("shared/"),
        "no file outside the repo"
    );
    let ops = repo_file("docs/operations.md");
    for needle in [
        "[Service]",
        "ProtectSystem=strict",
        "reverse_proxy",
        "proxy_pass",
        ".backup",
        "VACUUM INTO",
        "## Upgrading",
        "--log-format json",
        "/health/detailed",
    ] {
        assert!(ops.contains(needle), "docs/operations.md lacks {needle:?}");
    }
}

#[test]
fn the_readme_tour_route_pastes_under_the_generated_routes() {
    let home = tempfile::tempdir().unwrap();
    let (code, text) = super::setup::setup(home.path(), "");
    assert_eq!(code, 0, "{text}");
    let readme = repo_file("README.md");
    let tour = readme
        .split("```yaml\n")
        .find(|block| block.contains("github-issues:"))
        .and_then(|block| block.split("```").next())
        .unwrap();
    let config_path = home.path().join("config.yaml");
    let mut config = std::fs::read_to_string(&config_path).unwrap();
    assert!(
        config.trim_end().ends_with("deliver: log"),
        "the example route ends the file"
    );
    config.push_str(tour);
    std::fs::write(&config_path, config).unwrap();
    let (code, out, _) = run_cli(home.path(), &["config", "check"]);
    assert_eq!(code, 0, "{out}");
    let (_, out, _) = run_cli(home.path(), &["webhook", "list"]);
    assert!(
        out.contains("◆ github-issues") && out.contains("◆ example"),
        "{out}"
    );
}
