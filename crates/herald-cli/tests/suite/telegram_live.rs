//! What a Telegram chat sees besides answers: files in (saved, inlined, named) and out
//! (`MEDIA:` lines from allowed folders only), the answer streaming into one edited
//! message, tool progress, and flood control stopping the edits.

use super::support::*;
use super::telegram::{WAIT, config, env};
use herald_test_support::telegram::FakeTelegram;
use herald_test_support::{FakeProvider, Scripted};
use serde_json::{Value, json};
use std::time::Duration;

/// The text of the last user message of provider request `i`.
fn last_user_text(provider: &FakeProvider, i: usize) -> String {
    let body = &provider.requests()[i].body;
    let user = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap()
        .clone();
    match &user["content"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn calls_of(tg: &FakeTelegram, method: &str) -> Vec<Value> {
    tg.calls()
        .into_iter()
        .filter(|(m, _)| m == method)
        .map(|(_, b)| b)
        .collect()
}

/// A text document is saved in the session's folder and inlined; a voice note is
/// saved and named; an answer's `MEDIA:` lines send files from `terminal.cwd` (a photo
/// and a document, uploaded), and a file outside the allowed folders is refused with a
/// word in the chat, its bytes never uploaded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_come_in_saved_and_go_out_from_allowed_folders_only() {
    let work = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("chart.png"), b"\x89PNG fake chart").unwrap();
    std::fs::write(work.path().join("report.pdf"), b"%PDF-1.7 the report").unwrap();
    std::fs::write(outside.path().join("secret.txt"), b"TOP-SECRET-KEY").unwrap();
    let answer = format!(
        "Here is what I made.\nMEDIA:{w}/chart.png\nMEDIA:{w}/report.pdf\nMEDIA:{o}/secret.txt",
        w = work.path().display(),
        o = outside.path().display()
    );
    let provider = FakeProvider::start(vec![Scripted::text(&answer), Scripted::text("heard")]);
    let tg = FakeTelegram::start();
    let config = format!(
        "terminal:\n  cwd: {}\n{}",
        work.path().display(),
        config(&provider)
    );
    let h = Herald::start_with(&config, &env(&tg, "7"));
    tg.file(
        7,
        "document",
        "notes.md",
        "text/markdown",
        b"# Plan\nship it",
        "summarize",
    );
    let texts = tg.wait_texts(7, 2, WAIT);
    assert_eq!(texts[0], "Here is what I made.", "{texts:?}");
    assert!(
        texts[1].contains("Could not send:\nsecret.txt: it is not a file"),
        "{texts:?}"
    );
    let asked = last_user_text(&provider, 0);
    assert!(
        asked.contains("[Content of notes.md]:\n# Plan\nship it"),
        "{asked}"
    );
    assert!(asked.ends_with("summarize"), "{asked}");
    let saved_dir = h.home().join("chat-files");
    assert!(asked.contains(&saved_dir.display().to_string()), "{asked}");
    let photos = calls_of(&tg, "sendPhoto");
    assert_eq!(photos.len(), 1, "{photos:?}");
    assert_eq!(photos[0]["photo"]["file_name"], "chart.png");
    assert_eq!(photos[0]["chat_id"], json!(7));
    let docs = calls_of(&tg, "sendDocument");
    assert_eq!(docs.len(), 1, "{docs:?}");
    assert_eq!(docs[0]["document"]["text"], "%PDF-1.7 the report");
    let all = format!("{:?}", tg.calls());
    assert!(!all.contains("TOP-SECRET-KEY"), "{all}");
    // A voice note: saved (only its owner reads it) and named to the model.
    tg.file(7, "voice", "v.ogg", "audio/ogg", b"OggS fake voice", "");
    assert_eq!(tg.wait_texts(7, 3, WAIT)[2], "heard");
    let asked = last_user_text(&provider, 1);
    assert!(asked.contains("The user sent a voice message"), "{asked}");
    assert!(asked.contains("No transcription is configured"), "{asked}");
    let saved = std::fs::read_dir(&saved_dir)
        .unwrap()
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .map(|f| f.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("voice.ogg"))
        .expect("the voice note is saved");
    assert_eq!(std::fs::read(&saved).unwrap(), b"OggS fake voice");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&saved).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

/// With `streaming.enabled` the answer grows in one message (sent plain with the
/// cursor, edited, and finally edited to the formatted answer); `tool_progress: all`
/// shows the tools called in a message of their own. When flood control answers the
/// edits again and again, they stop and the answer comes whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_streams_into_one_message_until_floods_stop_the_edits() {
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("todo.txt"), b"ship").unwrap();
    let read = json!({"path": work.path().join("todo.txt")}).to_string();
    let parts = ["The ", "answer ", "grows ", "slowly ", "and ", "ends."];
    let gap = Duration::from_millis(300);
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("c1", "read_file", read.as_str())]),
        Scripted::Trickle(Scripted::text_events(&parts), gap),
        Scripted::Trickle(Scripted::text_events(&parts), gap),
    ]);
    let tg = FakeTelegram::start();
    let config = format!(
        "streaming:\n  enabled: true\n  edit_interval: 0.2\n  buffer_threshold: 4\ndisplay:\n  platforms:\n    telegram:\n      tool_progress: all\n{}",
        config(&provider)
    );
    let _h = Herald::start_with(&config, &env(&tg, "7"));
    tg.dm(7, "what is on my list?");
    let done = wait_for(WAIT, "the final edit", || {
        calls_of(&tg, "editMessageText")
            .into_iter()
            .find(|b| b["parse_mode"] == "HTML")
    })
    .await;
    assert_eq!(done["text"], "The answer grows slowly and ends.");
    let sent = tg.texts_to(7);
    assert!(sent.iter().any(|t| t == "⚙️ read_file"), "{sent:?}");
    let preview = tg
        .calls()
        .into_iter()
        .find(|(m, b)| m == "sendMessage" && b["text"].as_str().unwrap_or("").ends_with(" ▉"))
        .map(|(_, b)| b)
        .expect("a preview with the cursor");
    assert!(preview.get("parse_mode").is_none(), "{preview}");
    assert_eq!(done["message_id"], preview["_message_id"]);
    let edits = calls_of(&tg, "editMessageText");
    assert!(edits.len() >= 2, "the preview grew: {edits:?}");
    // The answer is not sent a second time.
    assert!(!sent.iter().any(|t| t.contains("ends.")), "{sent:?}");

    // Floods on every edit: three strikes stop the edits, the answer comes whole and
    // the stale preview goes.
    let edits_before = edits.len();
    tg.flood_edits(50, 1);
    tg.dm(7, "again");
    let texts = wait_for(WAIT, "the whole answer", || {
        let t = tg.texts_to(7);
        t.iter()
            .any(|x| x == "The answer grows slowly and ends.")
            .then_some(t)
    })
    .await;
    let attempts = calls_of(&tg, "editMessageText").len() - edits_before;
    assert!(attempts <= 3, "edits stop after three floods: {attempts}");
    assert!(!calls_of(&tg, "deleteMessage").is_empty(), "{texts:?}");
}

/// The bot's state is on `/health/detailed` (connected, the last update, the updates
/// stored, flood waits, sends waiting per chat) and in the metrics; with
/// `TELEGRAM_REACTIONS` the message is marked 👀 while its turn runs, then 👍.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bot_is_shown_in_health_and_metrics() {
    let provider = FakeProvider::start(vec![Scripted::text("pong")]);
    let tg = FakeTelegram::start();
    let config = format!(
        "metrics:\n  enabled: true\n  token: scrape-token-123\n{}",
        config(&provider)
    );
    let mut vars = env(&tg, "7");
    vars.push(("TELEGRAM_REACTIONS", "true"));
    let h = Herald::start_with(&config, &vars);
    // The first answer meets flood control once, and waits it out.
    tg.flood(1, 1);
    tg.dm(7, "ping");
    // The fake records the refused call too.
    assert_eq!(tg.wait_texts(7, 2, WAIT), ["pong", "pong"]);
    let mut answered = None;
    for _ in 0..300 {
        let (status, body) = h.get("/health/detailed").await;
        if body.contains("\"delivered\":1") {
            answered = Some((status, body));
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, body) = answered.expect("the message is answered");
    // The last reaction follows the answer.
    let marks = wait_for(WAIT, "the reactions", || {
        let marks: Vec<Value> = calls_of(&tg, "setMessageReaction")
            .into_iter()
            .map(|b| b["reaction"][0]["emoji"].clone())
            .collect();
        (marks.len() == 2).then_some(marks)
    })
    .await;
    assert_eq!(marks, [json!("👀"), json!("👍")]);
    assert_eq!(status, 200, "{body}");
    let health: Value = serde_json::from_str(&body).unwrap();
    let bot = &health["bots"][0];
    assert_eq!(bot["platform"], "telegram", "{health}");
    assert_eq!(bot["receiving"], "long polling");
    assert_eq!(bot["connected"], true);
    assert_eq!(bot["received"], 1);
    assert_eq!(bot["flood_waits"], 1);
    assert_eq!(bot["poll_restarts"], 0);
    assert_eq!(bot["waiting_sends"], 0, "{health}");
    assert!(bot["last_update_ms"].as_i64().unwrap() > 1_700_000_000_000);
    let scraped = http_client(Duration::from_secs(10))
        .get(h.url("/metrics"))
        .header("Authorization", "Bearer scrape-token-123")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "herald_bot_connected{platform=\"telegram\"} 1",
        "herald_bot_updates_total{platform=\"telegram\"} 1",
        "herald_bot_flood_waits_total{platform=\"telegram\"} 1",
        "herald_bot_poll_restarts_total{platform=\"telegram\"} 0",
    ] {
        assert!(scraped.contains(line), "{line} in:\n{scraped}");
    }
}
