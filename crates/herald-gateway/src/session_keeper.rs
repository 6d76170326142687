//! Keeps finished webhook runs as sessions in `state.db` (source `webhook`) from one
//! thread of its own, writing every run that is waiting in one transaction. Workers hand
//! a run over and go on; keeping sessions never slows or fails a delivery.

use herald_protocol::ChatMessage;
use herald_store::sessions::{NewMessage, NewSession, RunRecord, SessionDb};
use std::path::Path;
use std::sync::mpsc;

/// Most runs written in one transaction.
const MAX_BATCH: usize = 256;

/// A finished run.
pub struct KeptRun {
    pub session: String,
    pub model: String,
    pub system_prompt: String,
    pub cwd: String,
    pub messages: Vec<ChatMessage>,
}

/// The sending side; dropping every clone lets the thread finish what is queued.
#[derive(Clone)]
pub struct SessionKeeper {
    tx: mpsc::Sender<KeptRun>,
}

impl SessionKeeper {
    /// Opens `state.db` and starts the keeper thread; join the handle to wait for the
    /// last writes after every keeper is dropped.
    pub fn start(path: &Path) -> std::io::Result<(SessionKeeper, std::thread::JoinHandle<()>)> {
        let db = SessionDb::open(path).map_err(std::io::Error::other)?;
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("herald-sessions".into())
            .spawn(move || run(db, rx))?;
        Ok((SessionKeeper { tx }, thread))
    }

    /// Queues a run to be kept.
    pub fn keep(&self, run: KeptRun) {
        if self.tx.send(run).is_err() {
            tracing::warn!("the session keeper has stopped; a webhook run is not kept");
        }
    }
}

fn run(mut db: SessionDb, rx: mpsc::Receiver<KeptRun>) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(r) => batch.push(r),
                Err(_) => break,
            }
        }
        let records: Vec<RunRecord<'_>> = batch.iter().map(record).collect();
        if let Err(e) = db.record_runs(&records) {
            tracing::warn!(runs = records.len(), error = %e, "cannot keep webhook sessions");
        }
    }
}

fn record(run: &KeptRun) -> RunRecord<'_> {
    RunRecord {
        session: NewSession {
            id: &run.session,
            source: "webhook",
            model: &run.model,
            system_prompt: &run.system_prompt,
            cwd: &run.cwd,
        },
        messages: run
            .messages
            .iter()
            .map(|m| NewMessage {
                role: m.role.as_str(),
                content: m.content.as_deref(),
                tool_call_id: m.tool_call_id.as_deref(),
                tool_calls: (!m.tool_calls.is_empty())
                    .then(|| serde_json::to_string(&m.tool_calls).unwrap_or_default()),
                tool_name: m.name.as_deref(),
                reasoning: m.reasoning.as_deref(),
                finish_reason: None,
            })
            .collect(),
    }
}
