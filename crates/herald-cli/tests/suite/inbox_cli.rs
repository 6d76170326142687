//! `herald inbox list|show` against a real inbox.

use super::support::*;
use reqwest::StatusCode;

#[tokio::test]
async fn list_and_show() {
    let h = Herald::start(&config_with_routes(
        "        a: {prompt: 'hello {x}'}\n        b: {}\n",
    ));
    for (route, id) in [("a", "one"), ("b", "two"), ("a", "three")] {
        let (s, _) = h.github(route, "push", r#"{"x": "world"}"#, Some(id)).await;
        assert_eq!(s, StatusCode::ACCEPTED);
    }
    let (code, out, _) = h.cli(&["inbox", "list"]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("ID")
            && lines[0].contains("STATE")
            && lines[0].contains("DELIVERY ID"),
        "{out}"
    );
    assert_eq!(lines.len(), 4, "{out}");
    assert!(
        lines[1].contains("three") && lines[1].contains("queued"),
        "{out}"
    );

    let (code, out, _) = h.cli(&["inbox", "list", "--route", "a", "--json"]);
    assert_eq!(code, 0);
    let items: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    let ids: Vec<&str> = items
        .iter()
        .map(|i| i["delivery_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["three", "one"]);

    let (code, out, _) = h.cli(&["inbox", "list", "--state", "dead"]);
    assert_eq!((code, out.trim()), (0, "No inbox entries."));

    let id = items[1]["id"].as_i64().unwrap().to_string();
    let (code, out, _) = h.cli(&["inbox", "show", &id]);
    assert_eq!(code, 0);
    assert!(
        out.contains("route:         a")
            && out.contains("hello world")
            && out.contains("delivery id:   one"),
        "{out}"
    );
    let (code, out, _) = h.cli(&["inbox", "show", &id, "--json"]);
    assert_eq!(code, 0);
    let item: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(item["payload"], serde_json::json!({"x": "world"}));
    assert_eq!(item["state"], "queued");

    let (code, _, err) = h.cli(&["inbox", "show", "999999"]);
    assert_eq!(code, 1);
    assert!(err.contains("no inbox entry with id 999999"), "{err}");
    let (code, _, _) = h.cli(&["inbox", "show", "not-a-number"]);
    assert_eq!(code, 2);
}

#[test]
fn empty_home_lists_nothing() {
    let home = tempfile::tempdir().unwrap();
    let (code, out, _) = run_cli(home.path(), &["inbox", "list"]);
    assert_eq!((code, out.trim()), (0, "No inbox entries."));
}

#[tokio::test]
async fn show_says_a_queued_event_waits_for_a_model_and_a_delivered_one_has_no_zero_count() {
    // No model: the event waits, and `show` says for what.
    let h = Herald::start(&config_with_routes("        a: {prompt: 'hi'}\n"));
    let (s, _) = h.github("a", "push", "{}", Some("w-1")).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    let id = h.inbox()[0]["id"].as_i64().unwrap().to_string();
    let (code, out, _) = h.cli(&["inbox", "show", &id]);
    assert_eq!(code, 0);
    assert!(
        out.contains("state:         queued (waiting for a model: "),
        "{out}"
    );
    assert!(!out.contains("deliveries:    0"), "{out}");
    drop(h);
    // With a model the answer is delivered: its record has the count, no `0 attempt(s)`.
    let provider = herald_test_support::FakeProvider::start(vec![]);
    provider.set_fallback(herald_test_support::Scripted::text("done"));
    let h = Herald::start(&super::agent_runs::agent_config(
        &provider.base_url,
        "",
        "        a: {prompt: 'hi', deliver: log}\n",
    ));
    let (s, _) = h.github("a", "push", "{}", Some("d-1")).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    let start = std::time::Instant::now();
    let id = loop {
        let inbox = h.inbox();
        if inbox[0]["state"] == "delivered" {
            break inbox[0]["id"].as_i64().unwrap().to_string();
        }
        assert!(start.elapsed().as_secs() < 20, "{inbox:?}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let (_, out, _) = h.cli(&["inbox", "show", &id]);
    assert!(out.contains("state:         delivered\n"), "{out}");
    assert!(!out.contains("deliveries:    0 attempt(s)"), "{out}");
    assert!(
        out.contains("delivery: delivered to log after 1 attempt(s)"),
        "{out}"
    );
}

#[tokio::test]
async fn a_queued_event_is_cancelled_then_replayed_and_purged_when_cancelled() {
    // No model: the events wait in the inbox.
    let h = Herald::start(&config_with_routes("        a: {prompt: 'hi'}\n"));
    for d in ["x-1", "x-2"] {
        assert_eq!(
            h.github("a", "push", "{}", Some(d)).await.0,
            StatusCode::ACCEPTED
        );
    }
    let id_of =
        |d: &str| h.inbox().iter().find(|i| i["delivery_id"] == d).unwrap()["id"].to_string();
    let (first, second) = (id_of("x-1"), id_of("x-2"));
    let (code, out, err) = h.cli(&["inbox", "cancel", &first, "--json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.trim(),
        format!(r#"{{"id":{first},"state":"cancelled"}}"#)
    );
    let (code, _, err) = h.cli(&["inbox", "cancel", &first]);
    assert_eq!(code, 1);
    assert!(err.contains("is cancelled; only a queued entry"), "{err}");
    let (code, _, err) = h.cli(&["inbox", "cancel", "987654"]);
    assert_eq!(code, 1);
    assert!(err.contains("no inbox entry with id 987654"), "{err}");
    let (_, out, _) = h.cli(&["inbox", "list", "--state", "cancelled", "--json"]);
    assert!(out.contains("x-1") && !out.contains("x-2"), "{out}");
    let (_, detailed) = h.get("/health/detailed").await;
    assert!(detailed.contains(r#""cancelled":1"#), "{detailed}");
    // Replayed, it waits again; cancelled again, a purge removes it.
    let (code, _, err) = h.cli(&["inbox", "replay", &first]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(h.cli(&["inbox", "cancel", &first]).0, 0);
    let (code, out, err) = h.cli(&[
        "inbox",
        "purge",
        "--state",
        "cancelled",
        "--older-than",
        "0s",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(r#""removed":1"#), "{out}");
    let left: Vec<String> = h.inbox().iter().map(|i| i["id"].to_string()).collect();
    assert_eq!(left, [second]);
}
