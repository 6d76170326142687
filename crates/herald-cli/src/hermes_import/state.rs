//! A Hermes home's `state.db` brought into herald's session store (SQLite's `state.db`
//! in the herald home, or the shared PostgreSQL store when `store.url` is set): its
//! sessions with their messages, and its `gateway_routing` table, so the chat doors
//! continue each chat in the session Hermes had it in. Importing again adds only what
//! is new.

use super::report::Report;
use anyhow::Context;
use herald_config::{Config, Home};
use herald_store::hermes_state::HermesState;
use herald_store::sessions::Imported;
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// What one import brought.
#[derive(Default)]
struct Counts {
    added: usize,
    messages: usize,
    already: usize,
    keys: usize,
}

/// Imports `from`'s `state.db`, if it has one, as `config.store` keeps sessions.
pub fn import(
    from: &Path,
    home: &Home,
    config: &Config,
    report: &mut Report,
) -> anyhow::Result<()> {
    let db = from.join("state.db");
    if !db.is_file() {
        return Ok(());
    }
    let scratch = home.root().join(".herald-hermes-state");
    let hermes = HermesState::open(&db, &scratch)
        .with_context(|| format!("cannot read {}", db.display()))?;
    let rt = crate::stores::runtime()?;
    let (counts, other_scopes, location) = rt.block_on(async {
        let store = herald_app::stores::open_sessions(&config.store, home, home, None)
            .await
            .context("cannot open herald's session store")?;
        let (routes, other_scopes) = hermes.routing()?;
        let counts = copy_sessions(&hermes, &store, &routes).await?;
        anyhow::Ok((counts, other_scopes, store.location()))
    })?;
    report.converted.push(format!(
        "state.db: {} sessions with {} messages into herald's session store ({location}); `herald chat -c` and `--resume ID`, RPC `session.list` and ACP's session list find them",
        counts.added, counts.messages
    ));
    if counts.keys > 0 {
        report.converted.push(format!(
            "state.db gateway_routing: {} chats (session key to session) continue in the same session through herald's chat doors",
            counts.keys
        ));
    }
    if counts.already > 0 {
        report.kept.push(format!(
            "state.db: {} sessions imported before",
            counts.already
        ));
    }
    if other_scopes > 0 {
        report.left_behind.push((
            "state.db gateway_routing".into(),
            format!(
                "{other_scopes} entries of other Hermes profiles (a multiplexing gateway's); their chats start new sessions in herald"
            ),
        ));
    }
    Ok(())
}

/// Copies every session (parents first), a routed key kept only on the session
/// `gateway_routing` names for it.
async fn copy_sessions(
    hermes: &HermesState,
    store: &herald_store::SessionStore,
    routes: &[(String, String)],
) -> anyhow::Result<Counts> {
    let sessions = hermes.sessions()?;
    let ids: HashSet<String> = sessions.iter().map(|s| s.session.id.clone()).collect();
    let routed: HashMap<String, String> = routes
        .iter()
        .filter(|(_, id)| ids.contains(id))
        .map(|(key, id)| (id.clone(), key.clone()))
        .collect();
    let routed_keys: HashSet<String> = routed.values().cloned().collect();
    let mut counts = Counts {
        keys: routed.len(),
        ..Counts::default()
    };
    for mut s in sessions {
        if let Some(key) = routed.get(&s.session.id) {
            s.session.session_key = Some(key.clone());
        } else if s
            .session
            .session_key
            .as_deref()
            .is_some_and(|k| routed_keys.contains(k))
        {
            // An earlier session of a routed chat: the chat continues in the routed one.
            s.session.session_key = None;
        }
        s.messages = hermes.messages(&s.session.id)?;
        let n = s.messages.len();
        match store.import_session(s).await? {
            Imported::Added => {
                counts.added += 1;
                counts.messages += n;
            }
            Imported::AlreadyThere => counts.already += 1,
        }
    }
    Ok(counts)
}
