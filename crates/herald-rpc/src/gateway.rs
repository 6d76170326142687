//! The dispatcher's state: the live sessions of this process (a short hex id each,
//! backed by a stored session), each belonging to the connection that made it live
//! (created, resumed or activated it): its events go there, and only that connection
//! may act on it. Another connection may take it over (`session.activate`) once its
//! owner has closed.

use crate::errors::RpcError;
use crate::outbox::{Out, Outbox};
use herald_session::conversation::lock;
use herald_session::{Conversations, Host, LiveError, LiveId, SessionError, SessionOptions};
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// What the gateway adds to a live conversation: the client its events go to.
pub struct Wire {
    sink: Mutex<Outbox>,
    pub close_on_disconnect: bool,
    /// The connections open now (shared with the gateway).
    open: Arc<Mutex<HashSet<u64>>>,
}

/// What the gateway keeps of a session closed at the cap: whose it was.
#[derive(Debug, Clone, Copy)]
pub struct Memo {
    owner: u64,
    close_on_disconnect: bool,
}

impl herald_session::DoorWire for Wire {
    const DOOR: herald_session::Door = herald_session::Door::Rpc;
    type Memo = Memo;
    fn client_present(&self) -> bool {
        lock(&self.open).contains(&self.owner())
    }
    fn memo(&self) -> Memo {
        Memo {
            owner: self.owner(),
            close_on_disconnect: self.close_on_disconnect,
        }
    }
}

impl Wire {
    pub fn sink(&self) -> Outbox {
        lock(&self.sink).clone()
    }

    /// The connection the session belongs to.
    pub fn owner(&self) -> u64 {
        lock(&self.sink).conn
    }

    pub fn bind(&self, outbox: Outbox) {
        *lock(&self.sink) = outbox;
    }

    /// Sends an event of this session to the client it is bound to.
    pub async fn emit(&self, out: Out) {
        let sink = self.sink();
        let _ = sink.send(out).await;
    }
}

/// A session live in this process (a short hex id), bound to a client.
pub type Live = herald_session::Live<Wire>;

/// The JSON-RPC gateway over one session host.
pub struct Gateway {
    pub host: Arc<Host>,
    live: Conversations<Wire>,
    next_conn: AtomicU64,
    /// The connections open now.
    open: Arc<Mutex<HashSet<u64>>>,
    /// The tools a session is offered.
    pub tool_names: Vec<String>,
}

impl Gateway {
    /// At exit: the live sessions finalized for the plugins (`on_session_finalize`).
    pub async fn finalize_sessions(&self) {
        self.live.finalize_all().await;
    }

    pub fn new(host: Arc<Host>, tool_names: Vec<String>) -> Arc<Gateway> {
        let gw = Arc::new(Gateway {
            live: Conversations::new(host.clone()),
            host,
            next_conn: AtomicU64::new(1),
            open: Arc::new(Mutex::new(HashSet::new())),
            tool_names,
        });
        gw.watch_jobs();
        gw
    }

    /// A new client's outbox and the receiving end its writer drains.
    pub fn connect(&self) -> (Outbox, crate::outbox::Outgoing) {
        let conn = self.next_conn.fetch_add(1, Ordering::Relaxed);
        lock(&self.open).insert(conn);
        Outbox::new(conn)
    }

    /// Refuses, as if it did not exist (4001, so ids cannot be probed), a call that
    /// names a live session of another connection: `session.activate` may take over
    /// one whose connection has closed; every other method may touch only its own.
    pub fn check_owner(&self, method: &str, id: Option<&str>, conn: u64) -> Result<(), RpcError> {
        let Some(live) = id.and_then(|id| self.live.get(id)) else {
            return Ok(());
        };
        let owner = live.wire.owner();
        let taken_over = method == "session.activate" && !lock(&self.open).contains(&owner);
        match owner == conn || taken_over {
            true => Ok(()),
            false => Err(RpcError::no_session()),
        }
    }

    /// The live sessions of connection `conn`, oldest first.
    pub fn sessions_of(&self, conn: u64) -> Vec<Arc<Live>> {
        let mut own = self.live.all();
        own.retain(|l| l.wire.owner() == conn);
        own
    }

    /// Opens a new session live, bound to `outbox` (at the cap an idle one is closed
    /// first); 4090 only when every live session runs a turn.
    pub async fn open_live(
        &self,
        options: SessionOptions,
        outbox: &Outbox,
        close_on_disconnect: bool,
    ) -> Result<Arc<Live>, RpcError> {
        let wire = self.wire(outbox.clone(), close_on_disconnect);
        let opened = self.live.open(LiveId::Short, options, wire).await;
        Ok(made_live(opened.map_err(|e| live_error(e, None))?))
    }

    /// Makes the stored session `stored` live again, bound to `outbox`.
    pub async fn resume_live(
        &self,
        stored: &str,
        options: SessionOptions,
        outbox: &Outbox,
        close_on_disconnect: bool,
    ) -> Result<Arc<Live>, RpcError> {
        let wire = self.wire(outbox.clone(), close_on_disconnect);
        let resumed = self.live.resume(LiveId::Short, stored, options, wire).await;
        Ok(made_live(resumed.map_err(|e| live_error(e, Some(stored)))?))
    }

    /// Branches `parent`'s session into a new live one bound to `outbox`; its title.
    pub async fn branch_live(
        &self,
        parent: &str,
        name: Option<String>,
        options: SessionOptions,
        outbox: &Outbox,
    ) -> Result<(Arc<Live>, String), RpcError> {
        let wire = self.wire(outbox.clone(), true);
        let branched = self
            .live
            .branch(LiveId::Short, parent, name, options, wire)
            .await;
        let (live, title) = branched.map_err(|e| match e {
            LiveError::Session(e) => RpcError::new(RpcError::PERSIST_FAILED, e.told()),
            cap => live_error(cap, None),
        })?;
        Ok((made_live(live), title))
    }

    fn wire(&self, outbox: Outbox, close_on_disconnect: bool) -> Wire {
        Wire {
            sink: Mutex::new(outbox),
            close_on_disconnect,
            open: self.open.clone(),
        }
    }

    /// Reopens the session `id` names when it was closed at the cap and the caller is
    /// its client (or takes it over with `session.activate` once that client has
    /// gone), so the client never sees it missing.
    pub async fn reopen_closed(
        &self,
        method: &str,
        id: Option<&str>,
        outbox: &Outbox,
    ) -> Result<(), RpcError> {
        let Some(id) = id else {
            return Ok(());
        };
        let Some(closed) = self.live.closed(id) else {
            return Ok(());
        };
        let owner = closed.memo.owner;
        let taken_over = method == "session.activate" && !lock(&self.open).contains(&owner);
        if owner != outbox.conn && !taken_over {
            return Ok(());
        }
        let options = crate::sessions::options(self, None)?;
        let wire = self.wire(outbox.clone(), closed.memo.close_on_disconnect);
        let reopened = self.live.reopen(id, options, wire).await;
        if let Some(live) = reopened.map_err(|e| RpcError::session(e, RpcError::FAILED))? {
            made_live(live);
        }
        Ok(())
    }

    /// The live session `id` names; 4001 otherwise.
    pub fn live(&self, id: Option<&str>) -> Result<Arc<Live>, RpcError> {
        id.and_then(|id| self.live.get(id))
            .ok_or_else(RpcError::no_session)
    }

    /// Drops a live session (its turn interrupted); false when it was not live.
    pub fn close(&self, id: &str) -> bool {
        self.live.close(id)
    }

    /// Whether a stored session is live here.
    pub fn is_live_stored(&self, stored: &str) -> bool {
        self.live.holding(stored).is_some()
    }

    /// Tells a live session when a background process its turn started ends
    /// (`status.update`, kind `process`).
    fn watch_jobs(self: &Arc<Self>) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut notices = self.host.runtime().jobs.subscribe();
        let gw = Arc::downgrade(self);
        rt.spawn(async move {
            use tokio::sync::broadcast::error::RecvError;
            loop {
                let notice = match notices.recv().await {
                    Ok(n) => n,
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => break,
                };
                let Some(gw) = gw.upgrade() else { break };
                if let Some(live) = gw.live.holding(&notice.session_id) {
                    let payload = crate::events::StatusUpdate {
                        kind: "process",
                        text: notice.describe(),
                    };
                    let frame = crate::frame::event("status.update", Some(&live.id), Some(payload));
                    live.wire.emit(Out::Frame(frame)).await;
                }
            }
        });
    }

    /// A client went away: its sessions opened with `close_on_disconnect` close, and
    /// then the others may be taken over.
    pub fn disconnected(&self, conn: u64) {
        let gone: Vec<String> = self
            .sessions_of(conn)
            .into_iter()
            .filter(|l| l.wire.close_on_disconnect)
            .map(|l| l.id.clone())
            .collect();
        for id in gone {
            self.close(&id);
        }
        self.live
            .forget_closed(|m| m.owner == conn && m.close_on_disconnect);
        lock(&self.open).remove(&conn);
    }
}

/// A conversation just made live: its stream carried to its client from now on.
fn made_live(live: Arc<Live>) -> Arc<Live> {
    tokio::spawn(crate::turns::pump(live.clone()));
    live
}

/// What a client is told when no session was made live: 4090 at the cap, 4007 for a
/// stored session that is not there.
fn live_error(e: LiveError, stored: Option<&str>) -> RpcError {
    match (e, stored) {
        (LiveError::Cap(cap), _) => RpcError::new(RpcError::LIVE_CAP, cap.to_string()),
        (LiveError::Session(SessionError::NotFound(_)), Some(stored)) => RpcError::new(
            RpcError::STORED_NOT_FOUND,
            format!("session not found: {stored}"),
        ),
        (LiveError::Session(e), _) => RpcError::session(e, RpcError::FAILED),
    }
}
