//! Scheduled events (issue 49): `herald schedule` makes and changes jobs in the home's
//! `cron/jobs.json`; the running gateway's scheduler commits each tick to the inbox once
//! and the worker runs and delivers it like a webhook event.

use super::agent_runs::agent_config;
use super::support::*;
use herald_test_support::{FakeProvider, Scripted};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_added_and_run_from_the_cli_fires_once_and_is_delivered() {
    let provider = FakeProvider::start(vec![Scripted::text("Digest: two merges.")]);
    let h = Herald::start(&agent_config(&provider.base_url, "", ""));
    let home = h.home().to_path_buf();
    let (code, out, err) = run_cli(
        &home,
        &[
            "schedule",
            "add",
            "every 1h",
            "Summarise the repository's day",
            "--name",
            "digest",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("Added job "), "{out}");
    let (code, out, _) = run_cli(&home, &["schedule", "run", "digest"]);
    assert_eq!(code, 0, "{out}");
    let listed = wait_for(Duration::from_secs(30), "the job's run", || {
        let (_, out, _) = run_cli(&home, &["inbox", "list"]);
        (out.contains("schedule:") && out.contains("delivered")).then_some(out)
    })
    .await;
    assert_eq!(listed.matches("schedule:").count(), 1, "{listed}");
    let asked = provider.requests()[0].body["messages"].to_string();
    assert!(asked.contains("Summarise the repository's day"), "{asked}");
    // A scheduled run has no clarify and no memory (Hermes's rule).
    let offered = provider.requests()[0].body["tools"].to_string();
    assert!(offered.contains("\"terminal\""), "{offered}");
    assert!(
        !offered.contains("\"clarify\"") && !offered.contains("\"memory\""),
        "{offered}"
    );
    assert!(h.log().contains("Digest: two merges."), "{}", h.log());
    let (_, list, _) = run_cli(&home, &["schedule", "list"]);
    assert!(list.contains("digest  every 60m, next "), "{list}");
    assert!(list.contains(", last "), "{list}");
    // Paused, it is listed only with --all; removed, it is gone.
    let (code, _, _) = run_cli(&home, &["schedule", "pause", "digest"]);
    assert_eq!(code, 0);
    let (_, list, _) = run_cli(&home, &["schedule", "list"]);
    assert!(list.contains("No scheduled jobs"), "{list}");
    let (_, list, _) = run_cli(&home, &["schedule", "list", "--all"]);
    assert!(list.contains("digest  every 60m, paused"), "{list}");
    let (code, _, _) = run_cli(&home, &["schedule", "remove", "digest"]);
    assert_eq!(code, 0);
    let (code, _, err) = run_cli(&home, &["schedule", "remove", "digest"]);
    assert_eq!(code, 1);
    assert!(err.contains("no job has the id or name 'digest'"), "{err}");
    // Bad input is refused with Hermes's words.
    let (code, _, err) = run_cli(&home, &["schedule", "add", "whenever", "x"]);
    assert_eq!(code, 1);
    assert!(err.contains("Invalid schedule 'whenever'"), "{err}");
    let (code, _, err) = run_cli(
        &home,
        &["schedule", "add", "every 1h", "then rm -rf / for fun"],
    );
    assert_eq!(code, 1);
    assert!(err.contains("'destructive_root_rm'"), "{err}");
    assert_eq!(provider.requests().len(), 1, "one tick, one run");
}
