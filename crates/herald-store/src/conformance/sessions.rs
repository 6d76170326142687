//! The session store's checks, run on every backend.

use super::Place;
use crate::sessions::{
    Imported, ImportedMessage, ImportedSession, NewMessage, NewSession, RewindRefused,
    RewindTarget, SearchQuery, StoredResponse, TitleRefused,
};
use crate::{SessionStore, StoreError};
use std::sync::Arc;

/// Every session check, by name.
pub fn session_checks() -> Vec<(&'static str, super::Check)> {
    super::checks_of!(
        append_and_read_back_in_row_order,
        rewind_checks_in_the_protocols_order_and_writes_nothing_when_refused,
        branch_copies_full_rows_and_titles,
        responses_are_an_lru_and_conversations_name_their_latest,
        list_title_undo_and_delete,
        two_instances_share_sessions_and_runs,
        a_session_key_leads_to_its_newest_session,
        an_imported_session_keeps_its_times_title_and_parent_once,
        messages_are_found_by_their_words_best_match_per_session,
    )
}

fn message(role: &str, text: &str) -> NewMessage {
    NewMessage {
        role: role.into(),
        content: Some(text.into()),
        ..Default::default()
    }
}

async fn two_instances_share_sessions_and_runs(place: Arc<dyn Place>) {
    if !place.shared() {
        return;
    }
    let a = place.open_sessions("a").await;
    let b = place.open_sessions("b").await;
    let session = NewSession {
        id: "shared".into(),
        source: "api".into(),
        model: "m".into(),
        ..Default::default()
    };
    a.create_session(session).await.unwrap();
    let first = a.append("shared".into(), user("on a")).await.unwrap();
    let second = b.append("shared".into(), assistant("on b")).await.unwrap();
    let third = a.append("shared".into(), user("on a again")).await.unwrap();
    let history = b.history("shared".into()).await.unwrap();
    let ids: Vec<i64> = history.iter().map(|m| m.id).collect();
    assert_eq!(ids, vec![first, second, third]);
    let run = crate::sessions::RunRow {
        id: "run1".into(),
        session_id: "shared".into(),
        status: "running".into(),
        model: "m".into(),
        ..Default::default()
    };
    a.save_run(run.clone()).await.unwrap();
    assert_eq!(b.run("run1".into()).await.unwrap(), Some(run));
}

fn user(text: &str) -> NewMessage {
    NewMessage {
        role: "user".into(),
        content: Some(text.into()),
        ..Default::default()
    }
}

fn assistant(text: &str) -> NewMessage {
    NewMessage {
        role: "assistant".into(),
        content: Some(text.into()),
        ..Default::default()
    }
}

async fn store_with_turns(place: &Arc<dyn Place>) -> (SessionStore, Vec<i64>) {
    let store = place.open_sessions("one").await;
    store
        .create_session(NewSession {
            id: "s".into(),
            source: "cli".into(),
            model: "m".into(),
            system_prompt: "SYS".into(),
            cwd: "/".into(),
            parent_session_id: None,
            session_key: None,
        })
        .await
        .unwrap();
    let mut users = Vec::new();
    for i in 0..3 {
        users.push(
            store
                .append("s".into(), user(&format!("q{i}")))
                .await
                .unwrap(),
        );
        store.append("s".into(), assistant("a")).await.unwrap();
    }
    (store, users)
}

async fn append_and_read_back_in_row_order(place: Arc<dyn Place>) {
    let (store, users) = store_with_turns(&place).await;
    let h = store.history("s".into()).await.unwrap();
    assert_eq!(h.len(), 6);
    assert_eq!(h[0].id, users[0]);
    assert!(users.windows(2).all(|w| w[0] < w[1]));
    let s = store.session("s".into()).await.unwrap().unwrap();
    assert_eq!(
        (s.system_prompt.as_deref(), s.message_count),
        (Some("SYS"), 6)
    );
    assert_eq!(
        store.latest("cli".into()).await.unwrap().as_deref(),
        Some("s")
    );
    assert!(store.session("nope".into()).await.unwrap().is_none());
}

async fn rewind_checks_in_the_protocols_order_and_writes_nothing_when_refused(
    place: Arc<dyn Place>,
) {
    let (store, users) = store_with_turns(&place).await;
    let ask = |row: Option<i64>, ordinal: Option<u64>, empty: bool| RewindTarget {
        before_row_id: row,
        before_user_ordinal: ordinal,
        confirm_empty: empty,
    };
    let refused = |r: Result<Result<Vec<i64>, RewindRefused>, StoreError>| r.unwrap().unwrap_err();
    assert_eq!(
        refused(store.rewind("s".into(), ask(Some(9999), None, false)).await),
        RewindRefused::StaleRow(9999)
    );
    assert_eq!(
        refused(
            store
                .rewind("s".into(), ask(Some(users[1]), Some(2), false))
                .await
        ),
        RewindRefused::Disagree {
            row: users[1],
            ordinal: 2
        }
    );
    assert_eq!(
        refused(store.rewind("s".into(), ask(None, Some(1), false)).await),
        RewindRefused::RowIdRequired
    );
    assert_eq!(
        refused(
            store
                .rewind("s".into(), ask(Some(users[0]), None, false))
                .await
        ),
        RewindRefused::WouldEmpty
    );
    assert_eq!(
        store.history("s".into()).await.unwrap().len(),
        6,
        "nothing written when refused"
    );
    let survivors = store
        .rewind("s".into(), ask(Some(users[2]), Some(2), false))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(survivors, vec![users[0], users[1]]);
    let live = store.history("s".into()).await.unwrap();
    assert_eq!(live.len(), 4);
    assert_eq!(live[2].id, users[1], "surviving rows keep their ids");
    assert_eq!(
        refused(
            store
                .rewind("s".into(), ask(Some(users[2]), None, false))
                .await
        ),
        RewindRefused::StaleRow(users[2])
    );
    let all = store
        .rewind("s".into(), ask(Some(users[0]), None, true))
        .await
        .unwrap()
        .unwrap();
    assert!(all.is_empty());
    assert_eq!(
        store
            .session("s".into())
            .await
            .unwrap()
            .unwrap()
            .message_count,
        0
    );
}

async fn branch_copies_full_rows_and_titles(place: Arc<dyn Place>) {
    let (store, _) = store_with_turns(&place).await;
    store
        .append(
            "s".into(),
            NewMessage {
                role: "tool".into(),
                content: Some("out".into()),
                tool_call_id: Some("c1".into()),
                tool_name: Some("terminal".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let branch = |id: &str| store.branch("s".into(), id.into(), None);
    assert_eq!(branch("b1").await.unwrap().as_deref(), Some("branch"));
    assert_eq!(branch("b2").await.unwrap().as_deref(), Some("branch #2"));
    assert_eq!(
        store
            .branch("nope".into(), "b3".into(), None)
            .await
            .unwrap(),
        None
    );
    let h = store.history("b1".into()).await.unwrap();
    assert_eq!(h.len(), 7);
    assert_eq!(
        (h[6].tool_call_id.as_deref(), h[6].tool_name.as_deref()),
        (Some("c1"), Some("terminal"))
    );
    let b1 = store.session("b1".into()).await.unwrap().unwrap();
    assert_eq!(
        (b1.system_prompt.as_deref(), b1.parent_session_id.as_deref()),
        (Some("SYS"), Some("s"))
    );
}

async fn responses_are_an_lru_and_conversations_name_their_latest(place: Arc<dyn Place>) {
    let store = place.open_sessions("one").await;
    let resp = |id: &str| StoredResponse {
        id: id.into(),
        conversation: Some("c".into()),
        session_id: "s".into(),
        history: "[]".into(),
        response: "{}".into(),
        ..Default::default()
    };
    for id in ["r1", "r2", "r3"] {
        store.save_response(resp(id), 2).await.unwrap();
    }
    assert!(
        store.response("r1".into()).await.unwrap().is_none(),
        "the least recently used left"
    );
    assert_eq!(
        store.response("r3".into()).await.unwrap().unwrap(),
        resp("r3")
    );
    assert_eq!(
        store
            .latest_response_of("c".into())
            .await
            .unwrap()
            .as_deref(),
        Some("r3")
    );
    store.touch_response("r2".into()).await.unwrap();
    store.save_response(resp("r4"), 2).await.unwrap();
    assert!(
        store.response("r2".into()).await.unwrap().is_some(),
        "a used one stays"
    );
    assert!(store.response("r3".into()).await.unwrap().is_none());
    assert!(store.delete_response("r2".into()).await.unwrap());
    assert!(!store.delete_response("r2".into()).await.unwrap());
}

async fn list_title_undo_and_delete(place: Arc<dyn Place>) {
    let store = place.open_sessions("one").await;
    for id in ["a", "b"] {
        let session = NewSession {
            id: id.into(),
            source: "tui".into(),
            model: "m".into(),
            ..Default::default()
        };
        store.create_session(session).await.unwrap();
    }
    // A subagent's session is found through its parent, not listed.
    let child = NewSession {
        id: "b-child".into(),
        source: "subagent".into(),
        parent_session_id: Some("b".into()),
        ..Default::default()
    };
    store.create_session(child).await.unwrap();
    for (role, text) in [
        ("user", "first   question\nhere"),
        ("assistant", "x"),
        ("user", "again"),
        ("assistant", "y"),
    ] {
        store.append("a".into(), message(role, text)).await.unwrap();
    }
    let listed = store.list(10).await.unwrap();
    assert_eq!(listed.len(), 2);
    let a = listed.iter().find(|s| s.id == "a").unwrap();
    assert_eq!(
        (a.preview.as_str(), a.message_count),
        ("first question here", 4)
    );
    assert_eq!(store.list(1).await.unwrap().len(), 1);
    assert_eq!(
        store.set_title("a".into(), "  Mine ".into()).await.unwrap(),
        Ok("Mine".into())
    );
    assert_eq!(
        store.set_title("b".into(), "Mine".into()).await.unwrap(),
        Err(TitleRefused::Taken("Mine".into()))
    );
    assert_eq!(
        store.set_title("b".into(), " ".into()).await.unwrap(),
        Err(TitleRefused::Empty)
    );
    assert_eq!(
        store.set_title("b".into(), "a\nb".into()).await.unwrap(),
        Err(TitleRefused::Invalid)
    );
    assert_eq!(
        store.set_title("zz".into(), "x".into()).await.unwrap(),
        Err(TitleRefused::NoSession("zz".into()))
    );
    assert_eq!(store.undo("a".into()).await.unwrap(), 2);
    assert_eq!(store.history("a".into()).await.unwrap().len(), 2);
    assert_eq!(store.undo("b".into()).await.unwrap(), 0);
    assert_eq!(
        store
            .usage("a".into())
            .await
            .unwrap()
            .unwrap()
            .model
            .as_deref(),
        Some("m")
    );
    for (role, text) in [
        ("user", "q1"),
        ("assistant", "a1"),
        ("user", "q2"),
        ("assistant", "a2"),
    ] {
        store.append("b".into(), message(role, text)).await.unwrap();
    }
    let summary = message("user", "[summary] q1 and a1");
    let ids = store.compact("b".into(), summary, 2).await.unwrap();
    let after = store.history("b".into()).await.unwrap();
    let texts: Vec<_> = after.iter().map(|m| m.content.clone().unwrap()).collect();
    assert_eq!(texts, ["[summary] q1 and a1", "q2", "a2"]);
    assert_eq!(after.iter().map(|m| m.id).collect::<Vec<_>>(), ids);
    assert_eq!(
        store
            .session("b".into())
            .await
            .unwrap()
            .unwrap()
            .message_count,
        3
    );
    assert!(store.delete_session("a".into()).await.unwrap());
    assert!(!store.delete_session("a".into()).await.unwrap());
    assert!(store.session("a".into()).await.unwrap().is_none());
    assert!(store.history("a".into()).await.unwrap().is_empty());
}

/// A chat platform's session key finds the newest session stored under it (`/new`
/// starts another under the same key); a key never stored finds none.
async fn a_session_key_leads_to_its_newest_session(place: Arc<dyn Place>) {
    let store = place.open_sessions("one").await;
    let key = "agent:main:telegram:dm:42";
    assert_eq!(store.keyed(key.into()).await.unwrap(), None);
    for id in ["first", "second"] {
        let session = NewSession {
            id: id.into(),
            source: "telegram".into(),
            session_key: Some(key.into()),
            ..Default::default()
        };
        store.create_session(session).await.unwrap();
        // started_at has a resolution of the clock; keep the two apart.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let other = NewSession {
        id: "other".into(),
        source: "telegram".into(),
        session_key: Some("agent:main:telegram:dm:43".into()),
        ..Default::default()
    };
    store.create_session(other).await.unwrap();
    assert_eq!(
        store.keyed(key.into()).await.unwrap().as_deref(),
        Some("second")
    );
}

async fn an_imported_session_keeps_its_times_title_and_parent_once(place: Arc<dyn Place>) {
    let store = place.open_sessions("one").await;
    let own = NewSession {
        id: "herald-own".into(),
        source: "cli".into(),
        ..Default::default()
    };
    store.create_session(own).await.unwrap();
    store
        .set_title("herald-own".into(), "Digest".into())
        .await
        .unwrap()
        .unwrap();
    let imported = |id: &str, parent: Option<&str>| {
        ImportedSession {
        session: NewSession {
            id: id.into(),
            source: "cli".into(),
            model: "hermes-model".into(),
            parent_session_id: parent.map(str::to_owned),
            ..Default::default()
        },
        title: Some("Digest".into()),
        started_at: 1_700_000_000.5,
        ended_at: Some(1_700_000_100.0),
        end_reason: Some("user_exit".into()),
        input_tokens: 12,
        output_tokens: 34,
        messages: vec![
            ImportedMessage {
                message: user("what changed?"),
                timestamp: 1_700_000_001.0,
            },
            ImportedMessage {
                message: NewMessage {
                    role: "assistant".into(),
                    tool_calls: Some(
                        r#"[{"id":"c1","type":"function","function":{"name":"read_file","arguments":"{}"}}]"#
                            .into(),
                    ),
                    ..Default::default()
                },
                timestamp: 1_700_000_002.0,
            },
            ImportedMessage {
                message: NewMessage {
                    role: "tool".into(),
                    content: Some("file text".into()),
                    tool_call_id: Some("c1".into()),
                    tool_name: Some("read_file".into()),
                    ..Default::default()
                },
                timestamp: 1_700_000_003.0,
            },
        ],
    }
    };
    let parent = imported("hermes-parent", None);
    assert_eq!(
        store.import_session(parent.clone()).await.unwrap(),
        Imported::Added
    );
    let child = imported("hermes-child", Some("hermes-parent"));
    assert_eq!(store.import_session(child).await.unwrap(), Imported::Added);
    // Again: nothing changes.
    assert_eq!(
        store.import_session(parent).await.unwrap(),
        Imported::AlreadyThere
    );
    let row = store.session("hermes-child".into()).await.unwrap().unwrap();
    assert_eq!(row.parent_session_id.as_deref(), Some("hermes-parent"));
    assert_eq!(row.message_count, 3);
    assert_eq!(row.model.as_deref(), Some("hermes-model"));
    let history = store.history("hermes-parent".into()).await.unwrap();
    assert_eq!(history.len(), 3);
    assert_eq!(history[2].tool_call_id.as_deref(), Some("c1"));
    assert!(
        history[1]
            .tool_calls
            .as_deref()
            .unwrap()
            .contains("read_file")
    );
    let listed = store.list(10).await.unwrap();
    let titles: Vec<_> = listed.iter().filter_map(|s| s.title.clone()).collect();
    assert!(titles.contains(&"Digest".to_owned()));
    assert!(titles.contains(&"Digest #2".to_owned()), "{titles:?}");
    assert!(titles.contains(&"Digest #3".to_owned()), "{titles:?}");
    let parent_row = listed.iter().find(|s| s.id == "hermes-parent").unwrap();
    assert_eq!(parent_row.started_at, 1_700_000_000.5);
    assert_eq!(parent_row.updated_at, 1_700_000_003.0);
    let usage = store.usage("hermes-parent".into()).await.unwrap().unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (12, 34));
}

async fn messages_are_found_by_their_words_best_match_per_session(place: Arc<dyn Place>) {
    let store = place.open_sessions("one").await;
    for (id, texts) in [
        (
            "s-deploy",
            [
                "How do we deploy the lighthouse service?",
                "With the release pipeline.",
            ],
        ),
        (
            "s-cats",
            [
                "My cat is called Tom",
                "Tom is a fine name for a lighthouse keeper's cat.",
            ],
        ),
        ("s-other", ["Nothing to see", "Indeed nothing"]),
    ] {
        let session = NewSession {
            id: id.into(),
            source: "cli".into(),
            ..Default::default()
        };
        store.create_session(session).await.unwrap();
        store.append(id.into(), user(texts[0])).await.unwrap();
        store.append(id.into(), assistant(texts[1])).await.unwrap();
    }
    let q = |text: &str| SearchQuery {
        text: text.into(),
        limit: 5,
        ..Default::default()
    };
    let ids = |hits: &[crate::sessions::SearchHit]| {
        let mut v: Vec<String> = hits.iter().map(|h| h.session_id.clone()).collect();
        v.sort();
        v
    };
    let hits = store.search(q("lighthouse")).await.unwrap().unwrap();
    assert_eq!(ids(&hits), ["s-cats", "s-deploy"], "{hits:?}");
    assert!(hits.iter().all(|h| h.snippet.contains(">>>")), "{hits:?}");
    let hits = store
        .search(q("release OR nothing"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ids(&hits), ["s-deploy", "s-other"]);
    let hits = store.search(q("tom cat")).await.unwrap().unwrap();
    assert_eq!(ids(&hits), ["s-cats"], "every word, by default");
    let only_users = SearchQuery {
        roles: vec!["user".into()],
        ..q("lighthouse")
    };
    let hits = store.search(only_users).await.unwrap().unwrap();
    assert_eq!(ids(&hits), ["s-deploy"]);
    assert_eq!(hits[0].role, "user");
    let elsewhere = SearchQuery {
        exclude: Some("s-deploy".into()),
        ..q("lighthouse")
    };
    assert_eq!(
        ids(&store.search(elsewhere).await.unwrap().unwrap()),
        ["s-cats"]
    );
    // A message written after a search is found by the next one.
    store
        .append("s-other".into(), user("the lighthouse again"))
        .await
        .unwrap();
    let hits = store.search(q("lighthouse")).await.unwrap().unwrap();
    assert_eq!(hits.len(), 3);
    // Text the query syntax cannot read is searched word by word.
    let hits = store.search(q("\"tom")).await.unwrap();
    assert!(hits.is_ok(), "{hits:?}");
    let limited = SearchQuery {
        limit: 1,
        ..q("lighthouse")
    };
    assert_eq!(store.search(limited).await.unwrap().unwrap().len(), 1);
}
