//! People talking to the Discord bot, against a fake Discord speaking the real wire
//! formats (the REST API and the gateway WebSocket: Hello, Identify, READY,
//! MESSAGE_CREATE, INTERACTION_CREATE, Heartbeat ACK, Resume, Reconnect, Invalid
//! Session), with herald's own clients, store and conversations in the path.

use super::agent_runs::agent_config;
use super::support::*;
use herald_test_support::discord::{BOT_ID, FakeDiscord, TOKEN};
use herald_test_support::{FakeProvider, Scripted};
use serde_json::json;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

fn config(provider: &FakeProvider) -> String {
    agent_config(&provider.base_url, "", "        r: {prompt: 'x'}\n")
}

fn env(discord: &FakeDiscord) -> Vec<(&'static str, String)> {
    vec![
        ("DISCORD_BOT_TOKEN", TOKEN.into()),
        ("DISCORD_BASE_URL", discord.base_url.clone()),
        ("DISCORD_ALLOWED_USERS", "11".into()),
    ]
}

fn start(config: &str, vars: &[(&'static str, String)]) -> Herald {
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Herald::start_with(config, &vars)
}

fn start_in(home: tempfile::TempDir, vars: &[(&'static str, String)]) -> Herald {
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Herald::start_in(home, &vars)
}

async fn connected(discord: &FakeDiscord, identifies: u64) {
    wait_for(WAIT, "the gateway connection", || {
        let (live, _, ids, _) = discord.connections();
        (live == 1 && ids >= identifies).then_some(())
    })
    .await;
    // READY reaches herald right after Identify.
    std::thread::sleep(Duration::from_millis(200));
}

fn session_keys(h: &Herald) -> Vec<String> {
    let db = rusqlite::Connection::open(h.home().join("state.db")).unwrap();
    let mut keys: Vec<String> = db
        .prepare("SELECT session_key FROM sessions WHERE source = 'discord'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    keys.sort();
    keys
}

/// A DM is answered with Hermes's reactions; in a server channel a message without a
/// mention is left alone, a mention opens a thread (named from the message) and is
/// answered there, and a later message in that thread needs no mention. Sessions have
/// Hermes's keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dms_and_mentions_are_answered_and_a_mention_opens_a_thread() {
    let provider = FakeProvider::start(vec![
        Scripted::text("hello in private"),
        Scripted::text("in the thread"),
        Scripted::text("still here"),
    ]);
    let discord = FakeDiscord::start();
    discord.text_channel("500");
    discord.set_interactions_endpoint("https://elsewhere.example/interactions");
    let h = start(&config(&provider), &env(&discord));
    connected(&discord, 1).await;
    let log = h.log_once_it_has("Interactions Endpoint URL");
    assert!(log.contains("elsewhere.example"), "{log}");
    // `config check` asks Discord too, and names it as a finding.
    let vars = env(&discord);
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (code, out, _) = run_cli_with(h.home(), &["config", "check"], &vars);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("finding: discord: the application's Interactions Endpoint URL https://elsewhere.example/interactions is not one herald serves"),
        "{out}"
    );
    let dm = discord.dm("400", "11", "hi there");
    assert_eq!(discord.wait_posted("400", 1, WAIT), ["hello in private"]);
    let reacted = |m: &str| {
        discord
            .calls()
            .into_iter()
            .filter(|(_, p, _)| p.contains(&format!("/messages/{m}/reactions/")))
            .map(|(method, p, _)| format!("{method} {}", p.split("/reactions/").nth(1).unwrap()))
            .collect::<Vec<_>>()
    };
    let marks = wait_for(WAIT, "the reactions", || {
        let r = reacted(&dm);
        (r.len() >= 3).then_some(r)
    })
    .await;
    assert_eq!(marks, ["PUT 👀/@me", "DELETE 👀/@me", "PUT ✅/@me"]);
    discord.guild("500", "11", "just chatting");
    let mention = discord.guild("500", "11", &format!("<@{BOT_ID}> fix the build please"));
    // The thread has the message's id; the answer goes there, not to the channel.
    assert_eq!(discord.wait_posted(&mention, 1, WAIT), ["in the thread"]);
    let (_, opened) = discord.wait_call(
        "POST",
        &format!("/channels/500/messages/{mention}/threads"),
        WAIT,
        |_| true,
    );
    assert_eq!(opened["name"], "fix the build please");
    assert_eq!(opened["auto_archive_duration"], 1440);
    discord.guild(&mention, "11", "and one more thing");
    assert_eq!(discord.wait_posted(&mention, 2, WAIT)[1], "still here");
    std::thread::sleep(Duration::from_millis(500));
    assert!(discord.posted("500").is_empty(), "{:?}", discord.calls());
    assert_eq!(provider.requests().len(), 3);
    let asked = provider.requests()[1].body.to_string();
    assert!(
        asked.contains("fix the build please") && !asked.contains(BOT_ID),
        "{asked}"
    );
    assert!(!asked.contains("chatting"), "{asked}");
    assert_eq!(
        session_keys(&h),
        [
            "agent:main:discord:dm:400".to_owned(),
            format!("agent:main:discord:thread:{mention}:{mention}")
        ]
    );
}

fn rm(call: &str, file: &std::path::Path) -> Scripted {
    let args = json!({"command": format!("rm -f {}", file.display())}).to_string();
    Scripted::tool_calls(&[(call, "terminal", args.as_str())])
}

/// A command that needs approval is asked with buttons; the press is answered within
/// Discord's three seconds (a deferred update), a stranger's press does nothing, and
/// the message is edited to the decision without its buttons. A long answer is split
/// at 2,000 characters; a 429 is waited out and the answer sent once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_by_button_long_answers_and_rate_limits() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("one.txt");
    std::fs::write(&file, "x").unwrap();
    let long = "word ".repeat(1_000);
    let provider = FakeProvider::start(vec![
        rm("c1", &file),
        Scripted::text("removed"),
        Scripted::text(&long),
        Scripted::text("after the wait"),
    ]);
    let discord = FakeDiscord::start();
    let _h = start(&config(&provider), &env(&discord));
    connected(&discord, 1).await;
    discord.dm("400", "11", "clean up");
    let (_, asked) = discord.wait_call("POST", "/channels/400/messages", WAIT, |b| {
        b.get("components").is_some()
    });
    let buttons = asked["components"][0]["components"]
        .as_array()
        .unwrap()
        .clone();
    let labels: Vec<&str> = buttons
        .iter()
        .map(|b| b["label"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        ["Allow Once", "Allow Session", "Always Allow", "Deny"]
    );
    let once = buttons[0]["custom_id"].as_str().unwrap().to_owned();
    let message = asked["_id"].as_str().unwrap().to_owned();
    discord.press("400", &message, "66", &once, false);
    std::thread::sleep(Duration::from_millis(500));
    assert!(file.exists());
    discord.press("400", &message, "11", &once, false);
    assert_eq!(discord.wait_posted("400", 2, WAIT)[1], "removed");
    assert!(!file.exists());
    let (_, deferred) = discord.wait_call("POST", "/interactions/", WAIT, |_| true);
    assert_eq!(deferred["type"], 6);
    let (_, edited) = discord.wait_call(
        "PATCH",
        &format!("/channels/400/messages/{message}"),
        WAIT,
        |_| true,
    );
    assert!(
        edited["content"].as_str().unwrap().contains("Ann"),
        "{edited}"
    );
    assert_eq!(edited["components"], json!([]));
    discord.dm("400", "11", "say a lot");
    let parts = discord.wait_posted("400", 5, WAIT);
    assert!(
        parts[2..].iter().all(|p| p.chars().count() <= 2_000),
        "{parts:?}"
    );
    assert_eq!(parts[2..].join("").matches("word").count(), 1_000);
    discord.flood(1, 1.5);
    discord.dm("400", "11", "once more");
    let started = std::time::Instant::now();
    let all = discord.wait_posted("400", parts.len() + 1, WAIT);
    assert_eq!(all.last().unwrap(), "after the wait");
    assert!(started.elapsed() >= Duration::from_millis(1_500));
}

/// The connection is replaced without losing or repeating a message: Reconnect (op 7)
/// resumes and the events sent meanwhile are replayed and answered once; a connection
/// whose heartbeats go unacknowledged is closed before the next resumes (never two at
/// once, counted); a restart resumes the kept session and Discord's replay is answered
/// once; close 4014 is reported and not retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_replaced_and_resumed_without_a_lost_or_double_answer() {
    let provider = FakeProvider::start(vec![]);
    provider.set_fallback(Scripted::text("answer"));
    let discord = FakeDiscord::start();
    let h = start(&config(&provider), &env(&discord));
    connected(&discord, 1).await;
    discord.reconnect();
    discord.dm("400", "11", "during the reconnect");
    assert_eq!(discord.wait_posted("400", 1, WAIT).len(), 1);
    wait_for(WAIT, "the resume", || {
        (discord.connections().3 >= 1).then_some(())
    })
    .await;
    discord.silence();
    discord.dm("400", "11", "into a zombie");
    assert_eq!(discord.wait_posted("400", 2, WAIT).len(), 2);
    // The zombie is noticed at the next heartbeat, closed, and the session resumed.
    wait_for(WAIT, "the zombie replaced", || {
        (discord.connections().3 >= 2).then_some(())
    })
    .await;
    let (_, most, identifies, _) = discord.connections();
    assert_eq!(most, 1, "two connections were open at once");
    assert_eq!(identifies, 1);
    assert!(h.log_once_it_has("zombie").contains("zombie"));
    // A restart resumes the kept session; what came meanwhile is replayed.
    let home = h.into_home();
    wait_for(WAIT, "the connection to close", || {
        (discord.connections().0 == 0).then_some(())
    })
    .await;
    discord.dm("400", "11", "while you were restarting");
    let h = start_in(home, &env(&discord));
    assert_eq!(discord.wait_posted("400", 3, WAIT).len(), 3);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(discord.posted("400").len(), 3);
    assert_eq!(
        discord.connections().2,
        1,
        "the restart resumed rather than identified"
    );
    assert_eq!(provider.requests().len(), 3);
    // Close 4014: reported, not retried.
    discord.refuse_intents(true);
    discord.expire_session();
    discord.reconnect();
    wait_for(WAIT, "the refused intent in gateway status", || {
        let (_, status, _) = h.cli(&["gateway", "status"]);
        status.contains("MESSAGE CONTENT INTENT").then_some(())
    })
    .await;
    let before = discord.calls().len();
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(discord.connections().0, 0);
    assert!(discord.calls().len() <= before + 1);
}

/// kill -9 mid-turn: answered once after the restart; a stop longer than Discord keeps
/// the session: the messages it never replays are read back from the channel and
/// answered once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_cut_by_kill_9_and_messages_missed_in_a_long_stop_are_answered_once() {
    let provider = FakeProvider::start(vec![
        Scripted::Delayed(
            Duration::from_secs(30),
            Box::new(Scripted::text("too late")),
        ),
        Scripted::text("after the crash"),
        Scripted::text("read back"),
    ]);
    let discord = FakeDiscord::start();
    let mut h = start(&config(&provider), &env(&discord));
    connected(&discord, 1).await;
    discord.dm("400", "11", "long question");
    wait_for(WAIT, "the turn to reach the provider", || {
        (!provider.requests().is_empty()).then_some(())
    })
    .await;
    h.kill9();
    let home = h.into_home();
    let h = start_in(home, &env(&discord));
    assert_eq!(discord.wait_posted("400", 1, WAIT), ["after the crash"]);
    let home = h.into_home();
    wait_for(WAIT, "the connection to close", || {
        (discord.connections().0 == 0).then_some(())
    })
    .await;
    discord.expire_session();
    discord.missed("400", "11", "did you miss me?");
    let _h = start_in(home, &env(&discord));
    assert_eq!(discord.wait_posted("400", 2, WAIT)[1], "read back");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(discord.posted("400").len(), 2, "{:?}", discord.calls());
    assert_eq!(provider.requests().len(), 3);
}

/// An attachment comes in (fetched from Discord's CDN, saved, its text inlined) and an
/// answer's `MEDIA:` line goes out as a file in the channel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attachments_come_in_and_files_go_out() {
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("report.pdf"), b"%PDF-1.7 the report").unwrap();
    let answer = format!("Here it is.\nMEDIA:{}/report.pdf", work.path().display());
    let provider = FakeProvider::start(vec![Scripted::text(&answer)]);
    let discord = FakeDiscord::start();
    let config = format!(
        "terminal:\n  cwd: {}\n{}",
        work.path().display(),
        config(&provider)
    );
    let _h = start(&config, &env(&discord));
    connected(&discord, 1).await;
    discord.dm_with_file("400", "11", "summarize", "notes.md", "text/markdown");
    assert_eq!(discord.wait_posted("400", 1, WAIT)[0], "Here it is.");
    let asked = provider.requests()[0].body.to_string();
    assert!(asked.contains("[Content of notes.md]"), "{asked}");
    assert!(asked.contains("contents of notes.md"), "{asked}");
    let (_, sent) = discord.wait_call("POST", "/channels/400/messages", WAIT, |b| {
        b["multipart"]
            .as_str()
            .is_some_and(|m| m.contains("%PDF-1.7 the report"))
    });
    assert!(sent["multipart"].as_str().unwrap().contains("report.pdf"));
}

/// A Hermes home with a Discord block and `DISCORD_*` in its `.env`, moved with
/// `herald setup --from-hermes`, answers on Discord with no further change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hermes_home_with_discord_answers_after_the_migration() {
    let provider = FakeProvider::start(vec![Scripted::text("hello from herald")]);
    let discord = FakeDiscord::start();
    discord.text_channel("500");
    let hermes = tempfile::tempdir().unwrap();
    let config = format!(
        "model:\n  default: fake-model\n  base_url: {}\nplatforms:\n  discord:\n    enabled: true\n    extra:\n      base_url: {}\ndiscord:\n  require_mention: true\n  reactions: false\n",
        provider.base_url, discord.base_url
    );
    std::fs::write(hermes.path().join("config.yaml"), config).unwrap();
    std::fs::write(
        hermes.path().join(".env"),
        format!("DISCORD_BOT_TOKEN={TOKEN}\nDISCORD_ALLOWED_USERS=11\n"),
    )
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let (code, out, err) = run_cli_with(
        home.path(),
        &["setup", "--from-hermes", hermes.path().to_str().unwrap()],
        &[],
    );
    assert_eq!(code, 0, "{out}{err}");
    let (_, check, _) = run_cli(home.path(), &["config", "check"]);
    assert!(
        check.contains("note: discord: herald answers people who write to the bot"),
        "{check}"
    );
    let _h = Herald::start_in(home, &[]);
    connected(&discord, 1).await;
    discord.dm("400", "11", "are you there?");
    assert_eq!(discord.wait_posted("400", 1, WAIT), ["hello from herald"]);
    discord.guild("500", "11", "no mention here");
    std::thread::sleep(Duration::from_millis(1500));
    assert!(discord.posted("500").is_empty());
    assert!(
        !discord
            .calls()
            .iter()
            .any(|(_, p, _)| p.contains("/reactions/"))
    );
}

/// The application commands (the door's, with an `args` text) are synced at the first
/// start and not again while they are unchanged; a slash command is answered within
/// three seconds (a word only its user sees) and runs as the typed command would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_commands_are_synced_once_and_run() {
    let provider = FakeProvider::start(vec![Scripted::text("hello")]);
    let discord = FakeDiscord::start();
    let h = start(&config(&provider), &env(&discord));
    connected(&discord, 1).await;
    let (_, synced) = discord.wait_call("PUT", "/applications/1/commands", WAIT, |_| true);
    let names: Vec<&str> = synced
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"new") && names.contains(&"approve"),
        "{names:?}"
    );
    discord.dm("400", "11", "hi");
    assert_eq!(discord.wait_posted("400", 1, WAIT), ["hello"]);
    discord.command("400", "11", "new", "");
    let (_, ack) = discord.wait_call("POST", "/interactions/", WAIT, |b| b["type"] == 4);
    assert_eq!(ack["data"]["flags"], 64);
    let posted = discord.wait_posted("400", 2, WAIT);
    assert!(posted[1].contains("New session"), "{posted:?}");
    // A restart with the same commands syncs nothing.
    let home = h.into_home();
    wait_for(WAIT, "the connection to close", || {
        (discord.connections().0 == 0).then_some(())
    })
    .await;
    let _h = start_in(home, &env(&discord));
    wait_for(WAIT, "the second start", || {
        (discord.connections().0 == 1).then_some(())
    })
    .await;
    std::thread::sleep(Duration::from_secs(2));
    let puts = discord
        .calls()
        .iter()
        .filter(|(m, p, _)| m == "PUT" && p.starts_with("/applications/"))
        .count();
    assert_eq!(puts, 1);
}
