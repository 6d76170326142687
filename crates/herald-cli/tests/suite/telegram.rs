//! People talking to the Telegram bot, against a fake Bot API speaking the real wire
//! format, with herald's own client, store and conversations in the path.

use super::agent_runs::agent_config;
use super::support::*;
use herald_test_support::telegram::{FakeTelegram, TOKEN};
use herald_test_support::{FakeProvider, Scripted};
use serde_json::json;
use std::time::Duration;

pub(super) const WAIT: Duration = Duration::from_secs(30);

pub(super) fn config(provider: &FakeProvider) -> String {
    agent_config(&provider.base_url, "", "        r: {prompt: 'x'}\n")
}

pub(super) fn env<'a>(tg: &'a FakeTelegram, users: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("TELEGRAM_BOT_TOKEN", TOKEN),
        ("TELEGRAM_BASE_URL", tg.base_url.as_str()),
        ("TELEGRAM_ALLOWED_USERS", users),
    ]
}

fn user_texts(provider: &FakeProvider) -> Vec<String> {
    provider
        .requests()
        .iter()
        .map(|r| {
            r.body["messages"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|m| m["role"] == "user")
                .map(|m| m["content"].to_string())
                .collect::<Vec<_>>()
                .join(" | ")
        })
        .collect()
}

/// A DM is answered in its chat; two users have two sessions (the second user's turn
/// does not see the first's); `/new` starts a new session for the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_is_answered_and_each_user_has_a_session_of_their_own() {
    let provider = FakeProvider::start(vec![
        Scripted::text("hello seven"),
        Scripted::text("hello eight"),
        Scripted::text("again seven"),
        Scripted::text("fresh seven"),
    ]);
    let tg = FakeTelegram::start();
    let h = Herald::start_with(&config(&provider), &env(&tg, "7,8"));
    tg.dm(7, "hi from seven");
    assert_eq!(tg.wait_texts(7, 1, WAIT), ["hello seven"]);
    tg.dm(8, "hi from eight");
    assert_eq!(tg.wait_texts(8, 1, WAIT), ["hello eight"]);
    tg.dm(7, "and again");
    assert_eq!(tg.wait_texts(7, 2, WAIT)[1], "again seven");
    let asked = user_texts(&provider);
    assert!(!asked[1].contains("seven"), "{asked:?}");
    assert!(
        asked[2].contains("hi from seven") && asked[2].contains("and again"),
        "{asked:?}"
    );
    tg.dm(7, "/new");
    assert!(tg.wait_texts(7, 3, WAIT)[2].contains("New session"));
    tg.dm(7, "who am I");
    assert_eq!(tg.wait_texts(7, 4, WAIT)[3], "fresh seven");
    let asked = user_texts(&provider);
    assert!(!asked[3].contains("and again"), "{asked:?}");
    // The sessions are kept under Hermes's keys: seven's two (before and after /new)
    // and eight's.
    let db = rusqlite::Connection::open(h.home().join("state.db")).unwrap();
    let mut keys: Vec<String> = db
        .prepare("SELECT session_key FROM sessions WHERE source = 'telegram' ORDER BY started_at")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "agent:main:telegram:dm:7",
            "agent:main:telegram:dm:7",
            "agent:main:telegram:dm:8"
        ]
    );
    // `herald gateway status` says when the bot last checked for updates.
    let status = wait_for(WAIT, "the bot's state in gateway status", || {
        let (_, out, _) = h.cli(&["gateway", "status"]);
        (out.contains("Bot: telegram (long polling), last checked for updates 20")
            && out.contains("5 updates stored"))
        .then_some(out)
    })
    .await;
    assert!(status.contains("5 updates stored"), "{status}");
}

/// Updates sent while herald was stopped are answered after it starts; the same
/// update delivered twice is answered once; a user not allowed is not answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_queued_while_down_are_answered_once_and_strangers_are_not() {
    let provider = FakeProvider::start(vec![Scripted::text("first"), Scripted::text("second")]);
    provider.set_fallback(Scripted::text("more"));
    let tg = FakeTelegram::start();
    let one = tg.dm(7, "while you were out");
    tg.dm(7, "and this too");
    tg.dm(99, "let me in");
    // Queued: the backlog is answered in order (in `interrupt` mode the second would
    // stop the first, as it does when both come while herald runs).
    let config = format!("display:\n  busy_input_mode: queue\n{}", config(&provider));
    let _h = Herald::start_with(&config, &env(&tg, "7"));
    // Answers only (a busy note may come when the door took the second message as new).
    let answers = || -> Vec<String> {
        let texts = tg.texts_to(7);
        texts.into_iter().filter(|t| !t.starts_with('⏳')).collect()
    };
    tg.wait_texts(7, 2, WAIT);
    wait_for(WAIT, "both answers", || {
        (answers().len() == 2).then_some(())
    })
    .await;
    assert_eq!(answers(), ["first", "second"]);
    let update = json!({"message": {"message_id": 1, "chat": {"id": 7, "type": "private"}, "from": {"id": 7, "is_bot": false, "first_name": "U"}, "text": "while you were out"}});
    tg.repeat(one, update);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(answers().len(), 2, "{:?}", tg.texts_to(7));
    assert!(tg.texts_to(99).is_empty());
    assert_eq!(provider.requests().len(), 2);
}

/// kill -9 while a turn runs: after the restart the message is answered, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_cut_off_by_kill_9_is_answered_once_after_restart() {
    let provider = FakeProvider::start(vec![
        Scripted::Delayed(
            Duration::from_secs(30),
            Box::new(Scripted::text("too late")),
        ),
        Scripted::text("after the restart"),
    ]);
    let tg = FakeTelegram::start();
    let mut h = Herald::start_with(&config(&provider), &env(&tg, "7"));
    tg.dm(7, "long question");
    wait_for(WAIT, "the turn to reach the provider", || {
        (!provider.requests().is_empty()).then_some(())
    })
    .await;
    h.kill9();
    let home = h.into_home();
    let _h = Herald::start_in(home, &env(&tg, "7"));
    assert_eq!(tg.wait_texts(7, 1, WAIT), ["after the restart"]);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(tg.texts_to(7).len(), 1);
}

/// In a group with `TELEGRAM_REQUIRE_MENTION`, a message without a mention is left
/// alone and one with `@bot` is answered; a 429 is waited out and the answer sent once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_answers_mentions_only_and_a_flood_is_waited_out() {
    let provider = FakeProvider::start(vec![Scripted::text("at your service")]);
    let tg = FakeTelegram::start();
    let mut vars = env(&tg, "7");
    vars.push(("TELEGRAM_REQUIRE_MENTION", "true"));
    let _h = Herald::start_with(&config(&provider), &vars);
    tg.group(-100, 7, "just chatting");
    tg.flood(1, 1);
    tg.group(-100, 7, "@herald_test_bot help me");
    assert_eq!(tg.wait_texts(-100, 1, WAIT), ["at your service"]);
    assert_eq!(provider.requests().len(), 1);
    let asked = user_texts(&provider);
    assert!(
        asked[0].contains("help me") && !asked[0].contains("chatting"),
        "{asked:?}"
    );
}

/// A 9,000-character answer with emoji and a code block arrives in parts Telegram
/// accepts (the fake refuses more than 4,096 UTF-16 units), nothing lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_answer_is_split_into_parts_telegram_accepts() {
    let mut long = String::new();
    for i in 0..300 {
        long.push_str(&format!("Paragraph {i} 😀 with **bold** words.\n\n"));
    }
    long.push_str("```rust\nfn main() {}\n```\n");
    let provider = FakeProvider::start(vec![Scripted::text(&long)]);
    let tg = FakeTelegram::start();
    let _h = Herald::start_with(&config(&provider), &env(&tg, "7"));
    tg.dm(7, "write a lot");
    let until = std::time::Instant::now() + WAIT;
    let parts = loop {
        let t = tg.texts_to(7);
        if t.iter().any(|p| p.contains("fn main")) {
            break t;
        }
        assert!(
            std::time::Instant::now() < until,
            "{:?}",
            tg.calls()
                .iter()
                .map(|(m, b)| (m, b.to_string().chars().take(300).collect::<String>()))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(parts.len() >= 3, "{}", parts.len());
    let all = parts.join("\n");
    for i in [0, 150, 299] {
        assert!(all.contains(&format!("Paragraph {i} 😀")), "{i}");
    }
    let sent = tg.calls();
    assert!(
        sent.iter()
            .all(|(m, b)| m != "sendMessage" || b["parse_mode"] == "HTML")
    );
}

/// With no allow-list, a stranger in private gets a pairing code; once the owner
/// approves it with `herald pairing approve`, they are answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stranger_pairs_and_is_answered_once_approved() {
    let provider = FakeProvider::start(vec![Scripted::text("welcome aboard")]);
    let tg = FakeTelegram::start();
    let vars = vec![
        ("TELEGRAM_BOT_TOKEN", TOKEN),
        ("TELEGRAM_BASE_URL", tg.base_url.as_str()),
    ];
    let h = Herald::start_with(&config(&provider), &vars);
    tg.dm(55, "hello?");
    let said = tg.wait_texts(55, 1, WAIT).remove(0);
    assert!(said.contains("pairing code"), "{said}");
    let code: String = said
        .split("pairing code: <code>")
        .nth(1)
        .and_then(|rest| rest.split("</code>").next())
        .unwrap_or_default()
        .to_owned();
    assert_eq!(code.len(), 8, "{said}");
    assert!(provider.requests().is_empty());
    let (status, out, err) = h.cli(&["pairing", "approve", "telegram", &code]);
    assert_eq!(status, 0, "{out}{err}");
    assert!(out.contains("Approved!"), "{out}");
    let (_, listed, _) = h.cli(&["pairing", "list"]);
    assert!(listed.contains("55"), "{listed}");
    tg.dm(55, "now?");
    assert_eq!(tg.wait_texts(55, 2, WAIT)[1], "welcome aboard");
    let mode = std::fs::metadata(h.home().join("platforms/pairing/telegram-approved.json"))
        .unwrap()
        .permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o600
    );
}

fn rm(call: &str, file: &std::path::Path) -> Scripted {
    let args = json!({"command": format!("rm -f {}", file.display())}).to_string();
    Scripted::tool_calls(&[(call, "terminal", args.as_str())])
}

/// A command that needs approval is asked with buttons: "Allow Once" lets it run and
/// the message says who decided; "Deny" keeps it from running; a button pressed
/// after a restart says the approval expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_are_answered_by_buttons_and_expire_honestly() {
    let dir = tempfile::tempdir().unwrap();
    let (one, two) = (dir.path().join("one.txt"), dir.path().join("two.txt"));
    std::fs::write(&one, "x").unwrap();
    std::fs::write(&two, "x").unwrap();
    let provider = FakeProvider::start(vec![
        rm("c1", &one),
        Scripted::text("removed"),
        rm("c2", &two),
        Scripted::text("kept it"),
    ]);
    let tg = FakeTelegram::start();
    let h = Herald::start_with(&config(&provider), &env(&tg, "7"));
    tg.dm(7, "clean up");
    let asked = wait_for(WAIT, "the approval buttons", || {
        tg.button_messages(7).first().cloned()
    })
    .await;
    let (message, data) = asked;
    assert_eq!(data.len(), 4, "{data:?}");
    let once = data.iter().find(|d| d.ends_with(":o")).unwrap().clone();
    tg.click(7, message, &once);
    assert_eq!(tg.wait_texts(7, 2, WAIT).last().unwrap(), "removed");
    assert!(!one.exists());
    wait_for(WAIT, "the decided edit", || {
        tg.calls()
            .iter()
            .any(|(m, b)| {
                m == "editMessageText"
                    && b["message_id"] == json!(message)
                    && b["text"]
                        .as_str()
                        .unwrap_or("")
                        .contains("Approved once by U")
            })
            .then_some(())
    })
    .await;
    assert!(tg.calls().iter().any(|(m, _)| m == "answerCallbackQuery"));
    tg.dm(7, "and that one");
    let (second, data) = wait_for(WAIT, "the second buttons", || {
        tg.button_messages(7).get(1).cloned()
    })
    .await;
    let deny = data.iter().find(|d| d.ends_with(":d")).unwrap().clone();
    tg.click(7, second, &deny);
    assert_eq!(tg.wait_texts(7, 4, WAIT).last().unwrap(), "kept it");
    assert!(two.exists());
    // After a restart the old button is answered honestly.
    let home = h.into_home();
    let _h = Herald::start_in(home, &env(&tg, "7"));
    tg.click(7, second, &deny);
    wait_for(WAIT, "the expired edit", || {
        tg.calls()
            .iter()
            .any(|(m, b)| {
                m == "editMessageText" && b["text"].as_str().unwrap_or("").contains("expired")
            })
            .then_some(())
    })
    .await;
}

/// Webhook mode: herald sets the webhook with its secret; a request with the wrong
/// secret is refused before anything is stored, one with the right secret is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_mode_takes_only_requests_with_the_secret() {
    let provider = FakeProvider::start(vec![Scripted::text("via webhook")]);
    let tg = FakeTelegram::start();
    let mut vars = env(&tg, "7");
    vars.push(("TELEGRAM_WEBHOOK_URL", "https://bot.example.com/tg/hook"));
    vars.push(("TELEGRAM_WEBHOOK_SECRET", "s3cret-token"));
    let h = Herald::start_with(&config(&provider), &vars);
    let set = wait_for(WAIT, "setWebhook", || {
        tg.calls().into_iter().find(|(m, _)| m == "setWebhook")
    })
    .await;
    assert_eq!(set.1["secret_token"], "s3cret-token");
    assert_eq!(set.1["drop_pending_updates"], false);
    let update = json!({"update_id": 5, "message": {"message_id": 1, "date": 1, "chat": {"id": 7, "type": "private"}, "from": {"id": 7, "is_bot": false, "first_name": "U"}, "text": "hi"}});
    let client = http_client(Duration::from_secs(10));
    let wrong = client
        .post(h.url("/tg/hook"))
        .header("x-telegram-bot-api-secret-token", "nope")
        .json(&update)
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    assert!(h.inbox().is_empty());
    // A hostile client: no secret and a body that never comes. It is refused at once,
    // its body never awaited.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut raw = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    let head = format!(
        "POST /tg/hook HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n",
        h.addr()
    );
    raw.write_all(head.as_bytes()).await.unwrap();
    let mut answer = vec![0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(5), raw.read(&mut answer))
        .await
        .expect("answered without the body")
        .unwrap();
    assert!(String::from_utf8_lossy(&answer[..n]).starts_with("HTTP/1.1 401"));
    let right = client
        .post(h.url("/tg/hook"))
        .header("x-telegram-bot-api-secret-token", "s3cret-token")
        .json(&update)
        .send()
        .await
        .unwrap();
    assert_eq!(right.status(), 200);
    assert_eq!(tg.wait_texts(7, 1, WAIT), ["via webhook"]);
    assert_eq!(tg.polls(), 0, "webhook mode never polls");
}

/// A message sent while a turn runs follows `display.busy_input_mode` as Hermes's
/// gateway does: `interrupt` (the default) stops the turn and answers the new
/// message; `queue` answers both in order; `steer` puts it into the running turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_messages_interrupt_queue_or_steer() {
    let slow =
        |text: &str| Scripted::Delayed(Duration::from_secs(3), Box::new(Scripted::text(text)));
    for (mode, first_answer) in [("interrupt", None), ("queue", Some("first done"))] {
        let provider = FakeProvider::start(vec![slow("first done"), Scripted::text("second done")]);
        let tg = FakeTelegram::start();
        let config = format!("display:\n  busy_input_mode: {mode}\n{}", config(&provider));
        let _h = Herald::start_with(&config, &env(&tg, "7"));
        tg.dm(7, "first");
        wait_for(WAIT, "the first turn", || {
            (!provider.requests().is_empty()).then_some(())
        })
        .await;
        tg.dm(7, "second");
        let want: Vec<&str> = first_answer.into_iter().chain(["second done"]).collect();
        let texts = wait_for(WAIT, "the answers", || {
            let t = tg.texts_to(7);
            t.iter().any(|x| x == "second done").then_some(t)
        })
        .await;
        let ack = if mode == "queue" {
            "⏳ Queued"
        } else {
            "⚡ Interrupting"
        };
        assert!(texts[0].starts_with(ack), "{mode}: {texts:?}");
        let answers: Vec<&str> = texts[1..].iter().map(String::as_str).collect();
        assert_eq!(answers, want, "{mode}");
    }
    let provider = FakeProvider::start(vec![
        Scripted::Delayed(
            Duration::from_secs(2),
            Box::new(Scripted::tool_calls(&[(
                "c1",
                "terminal",
                r#"{"command": "echo hi"}"#,
            )])),
        ),
        Scripted::text("steered done"),
    ]);
    let tg = FakeTelegram::start();
    let config = format!("display:\n  busy_input_mode: steer\n{}", config(&provider));
    let _h = Herald::start_with(&config, &env(&tg, "7"));
    tg.dm(7, "first");
    wait_for(WAIT, "the first call", || {
        (!provider.requests().is_empty()).then_some(())
    })
    .await;
    tg.dm(7, "also mention cats");
    let texts = tg.wait_texts(7, 2, WAIT);
    assert!(texts[0].starts_with("⏩ Steered"), "{texts:?}");
    assert_eq!(texts[1], "steered done");
    let last = provider.requests().last().unwrap().body["messages"].to_string();
    assert!(last.contains("also mention cats"), "{last}");
}

/// A photo reaches the provider as an image part (a data URL of the file Telegram
/// keeps), with its caption as the text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_photo_reaches_the_provider_as_an_image_part() {
    let provider = FakeProvider::start(vec![Scripted::text("a cat")]);
    let tg = FakeTelegram::start();
    let _h = Herald::start_with(&config(&provider), &env(&tg, "7"));
    let jpeg = b"\xff\xd8\xff\xe0fake-jpeg-bytes";
    tg.photo(7, jpeg, "what is this?");
    assert_eq!(tg.wait_texts(7, 1, WAIT), ["a cat"]);
    let body = provider.requests()[0].body["messages"].to_string();
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(jpeg);
    assert!(
        body.contains(&format!("data:image/jpeg;base64,{encoded}")),
        "{body}"
    );
    assert!(body.contains("what is this?"), "{body}");
}

/// A `clarify` question is asked in the chat and the next message answers it (a
/// number picks a choice); `/queue TEXT` while a turn runs gets a turn and an answer
/// of its own; answers reply to the message they answer (`reply_to_mode: first`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clarify_queue_and_replies_work_in_a_chat() {
    let ask = json!({"question": "Which colour?", "choices": ["red", "blue"]}).to_string();
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("c1", "clarify", ask.as_str())]),
        Scripted::Delayed(
            Duration::from_secs(2),
            Box::new(Scripted::text("blue it is")),
        ),
        Scripted::text("queued answer"),
    ]);
    let tg = FakeTelegram::start();
    let _h = Herald::start_with(&config(&provider), &env(&tg, "7"));
    tg.dm(7, "paint it");
    let asked = tg.wait_texts(7, 1, WAIT);
    assert!(
        asked[0].contains("Which colour?") && asked[0].contains("2. blue"),
        "{asked:?}"
    );
    tg.dm(7, "2");
    wait_for(WAIT, "the clarify answer", || {
        (provider.requests().len() == 2).then_some(())
    })
    .await;
    let second = provider.requests()[1].body["messages"].to_string();
    assert!(second.contains("blue"), "{second}");
    tg.dm(7, "/queue and one more thing");
    let texts = tg.wait_texts(7, 3, WAIT);
    assert_eq!(texts[1..], ["blue it is", "queued answer"], "{texts:?}");
    let asked_id = tg
        .calls()
        .iter()
        .find(|(m, b)| m == "sendMessage" && b["text"] == "blue it is")
        .map(|(_, b)| b["reply_parameters"]["message_id"].clone())
        .unwrap();
    assert!(
        asked_id.is_i64(),
        "the answer replies to the message: {asked_id}"
    );
}

/// A Hermes home with a Telegram block, moved with `herald setup --from-hermes`,
/// answers on Telegram with no further change (no webhook listener, no API: the bot
/// alone).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hermes_home_with_a_telegram_block_answers_after_the_migration() {
    let provider = FakeProvider::start(vec![Scripted::text("hello from herald")]);
    let tg = FakeTelegram::start();
    let hermes = tempfile::tempdir().unwrap();
    let config = format!(
        "model:\n  default: fake-model\n  base_url: {}\nplatforms:\n  telegram:\n    enabled: true\n    extra:\n      base_url: {}\ntelegram:\n  require_mention: true\n",
        provider.base_url, tg.base_url
    );
    std::fs::write(hermes.path().join("config.yaml"), config).unwrap();
    std::fs::write(
        hermes.path().join(".env"),
        format!("TELEGRAM_BOT_TOKEN={TOKEN}\nTELEGRAM_ALLOWED_USERS=7\n"),
    )
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let (code, out, err) = run_cli_with(
        home.path(),
        &["setup", "--from-hermes", hermes.path().to_str().unwrap()],
        &[],
    );
    assert_eq!(code, 0, "{out}{err}");
    let h = Herald::start_in(home, &[]);
    assert!(
        h.log()
            .contains("herald answers people who write to the bot"),
        "{}",
        h.log()
    );
    tg.dm(7, "are you there?");
    assert_eq!(tg.wait_texts(7, 1, WAIT), ["hello from herald"]);
    // require_mention is for groups: a group message without a mention is left alone.
    tg.group(-5, 7, "no mention here");
    std::thread::sleep(Duration::from_millis(1500));
    assert!(tg.texts_to(-5).is_empty());
}
