//! Hermes 0.19.0's own Ink TUI (the bundle its wheel ships, run by node) in a
//! pseudo-terminal against `herald rpc`: a prompt, Tab completion, `/help` and `/model`,
//! with no "unknown method" or "error:" anywhere on the screen; and a delegation, whose
//! child the TUI draws in its `/agents` spawn tree from herald's `subagent.*` events.

use super::plugins::hermes_python;
use super::rpc::rpc_home;
use super::support::BIN;
use herald_test_support::{FakeProvider, Scripted};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The TUI bundle of the installed hermes-agent.
fn tui_bundle() -> PathBuf {
    let (python, path) = hermes_python();
    let mut cmd = Command::new(python);
    cmd.args([
        "-c",
        "import hermes_cli, os; print(os.path.dirname(hermes_cli.__file__))",
    ]);
    if let Some(p) = path {
        cmd.env("PYTHONPATH", p);
    }
    let out = cmd.output().unwrap();
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let entry = Path::new(&dir).join("tui_dist/entry.js");
    assert!(entry.is_file(), "no TUI bundle at {}", entry.display());
    entry
}

/// Runs the pty script against `herald rpc` on `home` (`mode`: its second scenario);
/// the test fails with the screen unless the script says `tui ok`.
fn run_tui(home: &Path, mode: Option<&str>) {
    let node = Command::new("node").arg("--version").output();
    assert!(
        node.is_ok_and(|o| o.status.success()),
        "this test needs node (scripts/test installs Debian's nodejs)"
    );
    let work = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/tui_pty.py");
    let out = Command::new("python3")
        .arg(script)
        .args([
            BIN,
            &home.display().to_string(),
            &tui_bundle().display().to_string(),
            &work.path().display().to_string(),
        ])
        .args(mode)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    println!("{stdout}");
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("tui ok"), "{stdout}\n{stderr}");
}

#[test]
fn the_hermes_tui_prompts_completes_and_lists_commands_against_herald_rpc() {
    let provider = FakeProvider::start(vec![]);
    provider.set_fallback(Scripted::text("Teal."));
    let home = rpc_home(&provider.base_url, "");
    run_tui(home.path(), None);
}

#[test]
fn the_hermes_tui_draws_a_delegations_subagent_from_herald_rpc() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[(
            "d1",
            "delegate_task",
            r#"{"goal": "scout: map the folder"}"#,
        )]),
        Scripted::text("Scouted."),
    ]);
    provider.push_when(
        "YOUR TASK:\nscout",
        Scripted::tool_calls(&[("s1", "terminal", r#"{"command": "sleep 5; ls"}"#)]),
    );
    provider.push_when("YOUR TASK:\nscout", Scripted::text("scout mapped it"));
    let home = rpc_home(&provider.base_url, "");
    run_tui(home.path(), Some("delegation"));
}
