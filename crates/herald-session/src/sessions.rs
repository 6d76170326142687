//! Writing sessions to `state.db` for every front door, from one thread: sessions
//! created, messages appended as a turn goes, and finished webhook runs (written in
//! batches, one transaction each). Callers hand a write over and go on; keeping a
//! session never slows or fails a turn or a delivery. Also the one conversion between
//! stored rows and messages.

use herald_protocol::{ChatMessage, Role};
use herald_store::sessions::{NewMessage, NewSession, RunRecord, SessionDb, StoredMessage};
use std::path::Path;
use std::sync::mpsc;

/// Most queued writes handled at once (runs in them share one transaction).
const MAX_BATCH: usize = 256;

/// A session's header, as created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionHeader {
    pub id: String,
    /// `cli`, `webhook`, ...
    pub source: String,
    pub model: String,
    pub system_prompt: String,
    pub cwd: String,
}

/// A finished run: its session and every message it added.
pub struct KeptRun {
    pub session: SessionHeader,
    pub messages: Vec<ChatMessage>,
}

enum Write {
    Create(SessionHeader),
    Append {
        session: String,
        message: ChatMessage,
    },
    Run(KeptRun),
}

/// The sending side; dropping every clone lets the thread finish what is queued.
#[derive(Clone)]
pub struct SessionWriter {
    tx: mpsc::Sender<Write>,
}

impl SessionWriter {
    /// Opens `state.db` and starts the writer thread; join the handle to wait for the
    /// last writes after every writer is dropped.
    pub fn start(path: &Path) -> std::io::Result<(SessionWriter, std::thread::JoinHandle<()>)> {
        let db = SessionDb::open(path).map_err(std::io::Error::other)?;
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("herald-sessions".into())
            .spawn(move || run(db, &rx))?;
        Ok((SessionWriter { tx }, thread))
    }

    pub fn create(&self, session: SessionHeader) {
        self.send(Write::Create(session));
    }

    pub fn append(&self, session: &str, message: ChatMessage) {
        self.send(Write::Append {
            session: session.to_owned(),
            message,
        });
    }

    /// Queues a finished run to be kept (its session is created with it).
    pub fn keep(&self, run: KeptRun) {
        self.send(Write::Run(run));
    }

    fn send(&self, write: Write) {
        if self.tx.send(write).is_err() {
            tracing::warn!("the session writer has stopped; a session write is lost");
        }
    }
}

fn run(mut db: SessionDb, rx: &mpsc::Receiver<Write>) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(w) => batch.push(w),
                Err(_) => break,
            }
        }
        let mut runs: Vec<KeptRun> = Vec::new();
        for write in batch {
            match write {
                Write::Run(r) => runs.push(r),
                other => {
                    keep_runs(&mut db, &std::mem::take(&mut runs));
                    write_one(&mut db, other);
                }
            }
        }
        keep_runs(&mut db, &runs);
    }
}

fn keep_runs(db: &mut SessionDb, runs: &[KeptRun]) {
    if runs.is_empty() {
        return;
    }
    let records: Vec<RunRecord<'_>> = runs
        .iter()
        .map(|r| RunRecord {
            session: new_session(&r.session),
            messages: r.messages.iter().map(message_row).collect(),
        })
        .collect();
    if let Err(e) = db.record_runs(&records) {
        tracing::warn!(runs = records.len(), error = %e, "cannot keep sessions");
    }
}

fn write_one(db: &mut SessionDb, write: Write) {
    let outcome = match write {
        Write::Create(s) => db
            .create_session(&s.id, &s.source, &s.model, &s.system_prompt, &s.cwd)
            .map(|_| ()),
        Write::Append { session, message } => {
            db.append(&session, &message_row(&message)).map(|_| ())
        }
        Write::Run(_) => Ok(()),
    };
    if let Err(e) = outcome {
        tracing::warn!(error = %e, "could not write to the session store");
    }
}

fn new_session(s: &SessionHeader) -> NewSession<'_> {
    NewSession {
        id: &s.id,
        source: &s.source,
        model: &s.model,
        system_prompt: &s.system_prompt,
        cwd: &s.cwd,
    }
}

/// A message as a row to store.
pub fn message_row(m: &ChatMessage) -> NewMessage<'_> {
    NewMessage {
        role: m.role.as_str(),
        content: m.content.as_deref(),
        tool_call_id: m.tool_call_id.as_deref(),
        tool_calls: (!m.tool_calls.is_empty())
            .then(|| serde_json::to_string(&m.tool_calls).unwrap_or_default()),
        tool_name: m.name.as_deref(),
        reasoning: m.reasoning.as_deref(),
        finish_reason: None,
    }
}

/// Stored rows back into messages (rows of other roles are skipped).
pub fn to_messages(rows: Vec<StoredMessage>) -> Vec<ChatMessage> {
    rows.into_iter()
        .filter_map(|r| {
            let role = match r.role.as_str() {
                "user" => Role::User,
                "assistant" => Role::Assistant,
                "tool" => Role::Tool,
                _ => return None,
            };
            Some(ChatMessage {
                role,
                content: r.content,
                tool_calls: r
                    .tool_calls
                    .and_then(|t| serde_json::from_str(&t).ok())
                    .unwrap_or_default(),
                tool_call_id: r.tool_call_id,
                name: r.tool_name,
                reasoning: None,
            })
        })
        .collect()
}
