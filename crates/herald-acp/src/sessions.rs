//! Opening ACP sessions (acp.md §2): `session/new`, `load`, `resume` and `fork`, each
//! answered with the session's modes, config options and models.

use crate::edits::EditGate;
use crate::wire::{Models, WithModels};
use crate::{AcpServer, AcpSession, internal, modes};
use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ForkSessionRequest, ForkSessionResponse, LoadSessionResponse, McpServer, NewSessionRequest,
    NewSessionResponse, ResumeSessionResponse, SessionConfigOption, SessionModeState,
};
use herald_session::model_options::configured_models;
use herald_session::{LiveError, LiveId, SessionError};
use std::path::Path;
use std::sync::Arc;

type AcpResult<T> = Result<T, agent_client_protocol::Error>;

/// What every opening answer carries about a session.
pub struct Described {
    pub modes: SessionModeState,
    pub options: Vec<SessionConfigOption>,
    pub models: Models,
}

impl AcpServer {
    /// The modes, config options and models of `live` as they are now.
    pub(crate) fn describe(&self, live: &AcpSession) -> Described {
        let policy = live.wire.gate.policy();
        let model = live.conversation.model();
        let offered = configured_models(self.host.runtime());
        Described {
            modes: modes::mode_state(policy),
            options: modes::config_options(policy, &model, &offered),
            models: Models::new(&model, &offered),
        }
    }

    pub(crate) async fn new_session(
        &self,
        request: &NewSessionRequest,
        cx: &ConnectionTo<Client>,
    ) -> AcpResult<WithModels<NewSessionResponse>> {
        let gate = EditGate::new(cx.clone(), self.host.runtime().approvals.answer_within());
        let options = self.options(&request.cwd, &gate, &request.mcp_servers);
        let wire = Self::wire(gate, &request.mcp_servers);
        let opened = self.sessions.open(LiveId::Stored, options, wire).await;
        let live = made_live(opened).map_err(not_live)?;
        let d = self.describe(&live);
        let inner = NewSessionResponse::new(live.id.clone())
            .modes(d.modes)
            .config_options(d.options);
        Ok(WithModels {
            inner,
            models: d.models,
        })
    }

    /// The live session of `id`, else the stored one resumed; `None` when there is
    /// none of that id.
    pub(crate) async fn load(
        &self,
        id: &str,
        cwd: &Path,
        servers: &[McpServer],
        cx: &ConnectionTo<Client>,
    ) -> AcpResult<Option<Arc<AcpSession>>> {
        if let Some(live) = self.session(id) {
            return Ok(Some(live));
        }
        let gate = EditGate::new(cx.clone(), self.host.runtime().approvals.answer_within());
        let options = self.options(cwd, &gate, servers);
        let wire = Self::wire(gate, servers);
        let resumed = self
            .sessions
            .resume(LiveId::Stored, id, options, wire)
            .await;
        match made_live(resumed) {
            Ok(live) => Ok(Some(live)),
            Err(LiveError::Session(SessionError::NotFound(_))) => Ok(None),
            Err(e) => Err(not_live(e)),
        }
    }

    /// [`AcpServer::load`], or a new session of that id when there is none.
    pub(crate) async fn resume(
        &self,
        id: &str,
        cwd: &Path,
        servers: &[McpServer],
        cx: &ConnectionTo<Client>,
    ) -> AcpResult<Arc<AcpSession>> {
        if let Some(live) = self.load(id, cwd, servers, cx).await? {
            return Ok(live);
        }
        let gate = EditGate::new(cx.clone(), self.host.runtime().approvals.answer_within());
        let mut options = self.options(cwd, &gate, servers);
        options.id = Some(id.to_owned());
        let wire = Self::wire(gate, servers);
        let opened = self.sessions.open(LiveId::Stored, options, wire).await;
        made_live(opened).map_err(not_live)
    }

    /// A new session holding a copy of the parent's history; `None` when there is no
    /// such parent.
    pub(crate) async fn fork(
        &self,
        request: &ForkSessionRequest,
        cx: &ConnectionTo<Client>,
    ) -> AcpResult<Option<Arc<AcpSession>>> {
        let parent = request.session_id.to_string();
        let gate = EditGate::new(cx.clone(), self.host.runtime().approvals.answer_within());
        if let Some(live) = self.session(&parent) {
            gate.set_policy(live.wire.gate.policy());
        }
        let options = self.options(&request.cwd, &gate, &request.mcp_servers);
        let wire = Self::wire(gate, &request.mcp_servers);
        let branched = self
            .sessions
            .branch(LiveId::Stored, &parent, None, options, wire)
            .await;
        match made_live(branched.map(|(live, _title)| live)) {
            Ok(live) => Ok(Some(live)),
            Err(LiveError::Session(SessionError::NotFound(_))) => Ok(None),
            Err(e) => Err(not_live(e)),
        }
    }

    /// The answer to `session/load` or `session/resume` for `live`.
    pub(crate) fn loaded(&self, live: &AcpSession) -> WithModels<LoadSessionResponse> {
        let d = self.describe(live);
        WithModels {
            inner: LoadSessionResponse::new()
                .modes(d.modes)
                .config_options(d.options),
            models: d.models,
        }
    }

    pub(crate) fn resumed(&self, live: &AcpSession) -> WithModels<ResumeSessionResponse> {
        let d = self.describe(live);
        WithModels {
            inner: ResumeSessionResponse::new()
                .modes(d.modes)
                .config_options(d.options),
            models: d.models,
        }
    }

    /// The answer to `session/fork`: the new id (`""` when the parent is unknown).
    pub(crate) fn forked(&self, live: Option<&AcpSession>) -> WithModels<ForkSessionResponse> {
        let Some(live) = live else {
            let models = Models {
                current_model_id: String::new(),
                available_models: Vec::new(),
            };
            return WithModels {
                inner: ForkSessionResponse::new(""),
                models,
            };
        };
        let d = self.describe(live);
        WithModels {
            inner: ForkSessionResponse::new(live.id.clone())
                .modes(d.modes)
                .config_options(d.options),
            models: d.models,
        }
    }
}

/// A session just made live: its edit gate knows its stored id and folder.
fn made_live(made: Result<Arc<AcpSession>, LiveError>) -> Result<Arc<AcpSession>, LiveError> {
    let live = made?;
    let session = live.conversation.session();
    live.wire.gate.attach(session.id(), session.cwd());
    Ok(live)
}

/// What the client is told when no session was made live.
fn not_live(e: LiveError) -> agent_client_protocol::Error {
    match e {
        LiveError::Cap(cap) => crate::refused(cap),
        LiveError::Session(e) => internal(e.told()),
    }
}
