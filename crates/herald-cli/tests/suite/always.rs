//! One rule for every "always": answered on an attended surface it is kept apart from
//! `command_allowlist`, tagged with its surface, and applies to attended runs only; a
//! webhook run keeps denying the command, before and after a restart. `shell.exec`
//! passes the same policy.

use super::api::KEY;
use super::support::*;
use herald_test_support::{FakeProvider, Scripted};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// The API listener and one webhook route `r` granted the terminal.
fn config(provider: &str) -> String {
    let routes = "        r:\n          prompt: 'clean {what}'\n          deliver: log\n          toolsets: [terminal]\n";
    let webhook = config_with_routes(routes).replace("platforms:\n", "");
    format!(
        "model:\n  default: fake-model\n  base_url: {provider}\nagent:\n  api_max_retries: 1\ncommand_allowlist: ['echo *']\nplatforms:\n  api_server:\n    enabled: true\n    extra:\n      port: 0\n      key: {KEY}\n{webhook}"
    )
}

/// The listeners' bases (`api`, `webhook`), as the gateway records them.
pub(super) async fn bases(h: &Herald) -> (String, String) {
    let file = h.home().join("gateway.json");
    let state: Value = wait_for(Duration::from_secs(10), "gateway.json", || {
        serde_json::from_str(&std::fs::read_to_string(&file).ok()?).ok()
    })
    .await;
    let at = |k: &str| state[k][0].as_str().unwrap().to_owned();
    (at("api"), at("webhook"))
}

pub(super) async fn api(method: &str, url: String, body: Option<Value>) -> Value {
    let mut r = http_client(Duration::from_secs(30))
        .request(method.parse().unwrap(), url)
        .header("Authorization", format!("Bearer {KEY}"));
    if let Some(b) = body {
        r = r.json(&b);
    }
    r.send().await.unwrap().json().await.unwrap()
}

/// Polls a run until its status is one of `states`.
pub(super) async fn until(api_base: &str, run: &str, states: &[&str]) -> Value {
    let started = Instant::now();
    loop {
        let s = api("GET", format!("{api_base}/v1/runs/{run}"), None).await;
        if states.contains(&s["status"].as_str().unwrap_or_default()) {
            return s;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{s}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Starts an API run on `input` and waits until it asks for an approval; its id.
pub(super) async fn run_waiting_for_approval(api_base: &str, input: &str) -> String {
    let started = api(
        "POST",
        format!("{api_base}/v1/runs"),
        Some(json!({"input": input})),
    )
    .await;
    let run = started["run_id"].as_str().unwrap().to_owned();
    until(api_base, &run, &["waiting_for_approval"]).await;
    run
}

fn rm(dir: &std::path::Path, name: &str) -> Scripted {
    let path = dir.join(name);
    std::fs::create_dir_all(&path).unwrap();
    let args = json!({"command": format!("rm -rf {}", path.display())});
    Scripted::tool_calls(&[("c1", "terminal", &args.to_string())])
}

#[tokio::test]
async fn an_always_given_on_an_attended_surface_never_reaches_a_webhook_run() {
    let dirs = tempfile::tempdir().unwrap();
    let provider = FakeProvider::start(vec![rm(dirs.path(), "a"), Scripted::text("removed a")]);
    let h = Herald::start(&config(&provider.base_url));
    let (api_base, _) = bases(&h).await;

    // The API's run asks; "always" answers it.
    let run = run_waiting_for_approval(&api_base, "clean a").await;
    let answer = json!({"choice": "always"});
    let resolved = api(
        "POST",
        format!("{api_base}/v1/runs/{run}/approval"),
        Some(answer),
    )
    .await;
    assert_eq!(resolved["resolved"], 1, "{resolved}");
    until(&api_base, &run, &["completed"]).await;
    assert!(!dirs.path().join("a").exists());
    let config_text = std::fs::read_to_string(h.home().join("config.yaml")).unwrap();
    assert!(!config_text.contains("recursive"), "{config_text}");
    let kept: Value = serde_json::from_str(
        &std::fs::read_to_string(h.home().join("approvals_always.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(kept["always"][0]["pattern"], "recursive or forced delete");
    assert_eq!(kept["always"][0]["surface"], "api_server");

    // After a restart: a webhook payload steering the model to `rm -rf` is denied.
    let mut h = h;
    h.terminate();
    let h = Herald::start_in(h.into_home(), &[]);
    let (api_base, webhook_base) = bases(&h).await;
    provider.push(rm(dirs.path(), "b"));
    provider.push(Scripted::text("could not"));
    let asked = provider.requests().len();
    let body = r#"{"what": "b"}"#;
    let status = http_client(Duration::from_secs(10))
        .post(format!("{webhook_base}/webhooks/r"))
        .header("x-github-event", "push")
        .header(
            "x-hub-signature-256",
            herald_webhook::verify::sign::github(SECRET, body.as_bytes()),
        )
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 202);
    let second = wait_for(
        Duration::from_secs(15),
        "the webhook run's second call",
        || provider.requests().get(asked + 1).cloned(),
    )
    .await;
    let result = second.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .unwrap()["content"]
        .to_string();
    assert!(result.contains("No human can approve"), "{result}");
    assert!(dirs.path().join("b").exists(), "the webhook run deleted b");

    // An attended run is not asked again.
    provider.push(rm(dirs.path(), "c"));
    provider.push(Scripted::text("removed c"));
    let started = api(
        "POST",
        format!("{api_base}/v1/runs"),
        Some(json!({"input": "clean c"})),
    )
    .await;
    let run = started["run_id"].as_str().unwrap().to_owned();
    let end = until(
        &api_base,
        &run,
        &["completed", "waiting_for_approval", "failed"],
    )
    .await;
    assert_eq!(end["status"], "completed", "{end}");
    assert!(!dirs.path().join("c").exists());
}

#[tokio::test]
async fn the_tui_s_shell_commands_pass_the_profile_s_one_policy() {
    use super::rpc::{Piped, rpc_home};
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(work.path().join("build")).unwrap();
    let extra = format!(
        "terminal:\n  cwd: {}\napprovals:\n  deny: ['touch *']\ncommand_allowlist: ['rm -rf build']\n",
        work.path().display()
    );
    let home = rpc_home("http://127.0.0.1:9/v1", &extra);
    herald_config::always_approvals::add(
        &home.path().join("approvals_always.json"),
        "world-writable permissions",
        "tui",
    )
    .unwrap();
    let mut rpc = Piped::start(home.path());
    let c = &mut rpc.client;
    // A deny rule holds here too (it ran before).
    assert_eq!(
        c.code("shell.exec", json!({"command": "touch x"})).await,
        4005
    );
    assert!(!work.path().join("x").exists());
    // The allowlist and an attended "always" let their commands run (they were refused).
    let ok = c
        .call("shell.exec", json!({"command": "rm -rf build"}))
        .await;
    assert_eq!(ok["code"], 0, "{ok}");
    assert!(!work.path().join("build").exists());
    std::fs::write(work.path().join("f"), "").unwrap();
    let ok = c
        .call("shell.exec", json!({"command": "chmod 777 f"}))
        .await;
    assert_eq!(ok["code"], 0, "{ok}");
    // What none of them lets through is still refused, the floor always.
    assert_eq!(
        c.code("shell.exec", json!({"command": "sudo true"})).await,
        4005
    );
    assert_eq!(
        c.code("shell.exec", json!({"command": "rm -rf /"})).await,
        4005
    );
}
