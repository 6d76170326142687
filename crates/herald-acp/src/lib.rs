//! The ACP server (acp.md) for IDEs: protocol version 1 on the `agent-client-protocol`
//! crate, stdio. A front door on the session host: each ACP session is a session of
//! [`Host`]; prompts are its runs, streamed as `session/update` notifications, and the
//! host's approval requests become `session/request_permission` calls.

mod listing;
mod permission;
mod prompt;
mod slash;
pub mod tools;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, AuthMethod, AuthMethodAgent, AuthMethodTerminal, AuthenticateRequest,
    AuthenticateResponse, CancelNotification, Implementation, InitializeRequest,
    InitializeResponse, ListSessionsRequest, LoadSessionRequest, LoadSessionResponse,
    NewSessionRequest, NewSessionResponse, PromptCapabilities, PromptRequest, ResumeSessionRequest,
    ResumeSessionResponse, SessionCapabilities, SessionListCapabilities, SessionResumeCapabilities,
};
use agent_client_protocol::{Agent, Client, ConnectTo};
use herald_session::{Answers, Host, RunHandle, Session, SessionOptions};
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

/// Where ACP sessions say they come from.
pub const SOURCE: &str = "acp";
/// Sessions one connection keeps open at most (a client that opens more is refused).
pub const MAX_SESSIONS: usize = 256;
/// The terminal auth method: run the binary with `--setup`.
pub const SETUP_METHOD: &str = "hermes-setup";

/// An ACP session: the host's session (replaced by `/reset`), its turn in progress and
/// the prompts queued behind it.
pub struct AcpSession {
    /// The ACP session id (the first host session's id).
    id: String,
    session: Mutex<Session>,
    run: Mutex<Option<RunHandle>>,
    queued: Mutex<std::collections::VecDeque<String>>,
    cancelled: AtomicBool,
}

impl AcpSession {
    pub fn session(&self) -> Session {
        lock(&self.session).clone()
    }

    fn busy(&self) -> bool {
        self.session().running().is_some()
    }
}

/// The ACP server over one session host.
pub struct AcpServer {
    host: Arc<Host>,
    tool_names: Vec<String>,
    /// The provider whose credentials resolved, if any (an auth method of its own).
    provider: Option<String>,
    sessions: Mutex<HashMap<String, Arc<AcpSession>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl AcpServer {
    pub fn new(
        host: Arc<Host>,
        tool_names: Vec<String>,
        provider: Option<String>,
    ) -> Arc<AcpServer> {
        Arc::new(AcpServer {
            host,
            tool_names,
            provider,
            sessions: Mutex::new(HashMap::new()),
        })
    }

    fn initialize(&self, _request: &InitializeRequest) -> InitializeResponse {
        let mut methods = vec![AuthMethod::Terminal(
            AuthMethodTerminal::new(SETUP_METHOD, "Set up herald (provider and model)")
                .args(vec!["acp".to_owned(), "--setup".to_owned()]),
        )];
        if let Some(p) = &self.provider {
            methods.push(AuthMethod::Agent(AuthMethodAgent::new(
                p.clone(),
                format!("{p} runtime credentials"),
            )));
        }
        let capabilities = AgentCapabilities::new()
            .load_session(true)
            .prompt_capabilities(PromptCapabilities::new().image(true))
            .session_capabilities(
                SessionCapabilities::new()
                    .list(SessionListCapabilities::new())
                    .resume(SessionResumeCapabilities::new()),
            );
        InitializeResponse::new(ProtocolVersion::V1)
            .agent_capabilities(capabilities)
            .auth_methods(methods)
            .agent_info(Implementation::new(
                "hermes-agent",
                env!("CARGO_PKG_VERSION"),
            ))
    }

    /// `hermes-setup` or the resolved provider's name (any case) when a credential
    /// resolves; anything else is not an authentication.
    fn authenticates(&self, method: &str) -> bool {
        let method = method.to_ascii_lowercase();
        self.provider
            .as_ref()
            .is_some_and(|p| method == SETUP_METHOD || method == p.to_ascii_lowercase())
    }

    fn options(&self, cwd: &std::path::Path) -> SessionOptions {
        let mut o = SessionOptions::new(SOURCE, self.tool_names.clone(), Answers::ByRequest);
        o.cwd = Some(cwd.to_path_buf()).filter(|c| c.is_dir());
        o
    }

    fn add(&self, session: Session) -> Result<Arc<AcpSession>, agent_client_protocol::Error> {
        if lock(&self.sessions).len() >= MAX_SESSIONS {
            return Err(agent_client_protocol::Error::invalid_request()
                .data(format!("too many open sessions (at most {MAX_SESSIONS})")));
        }
        let entry = Arc::new(AcpSession {
            id: session.id().to_owned(),
            session: Mutex::new(session),
            run: Mutex::new(None),
            queued: Mutex::new(std::collections::VecDeque::new()),
            cancelled: AtomicBool::new(false),
        });
        lock(&self.sessions).insert(entry.id.clone(), entry.clone());
        Ok(entry)
    }

    fn session(&self, id: &str) -> Option<Arc<AcpSession>> {
        lock(&self.sessions).get(id).cloned()
    }

    async fn new_session(
        &self,
        request: &NewSessionRequest,
    ) -> Result<String, agent_client_protocol::Error> {
        let session = self
            .host
            .open_session(self.options(&request.cwd))
            .await
            .map_err(|e| agent_client_protocol::Error::internal_error().data(e.to_string()))?;
        Ok(self.add(session)?.id.clone())
    }

    /// Resumes a stored session; `None` when there is none of that id.
    async fn load(&self, request: &LoadSessionRequest) -> Option<Arc<AcpSession>> {
        let id = request.session_id.to_string();
        if let Some(live) = self.session(&id) {
            return Some(live);
        }
        let session = self
            .host
            .resume_session(&id, self.options(&request.cwd))
            .await
            .ok()?;
        self.add(session).ok()
    }

    /// Resumes a stored session, or opens a new one of that id when there is none.
    async fn resume(
        &self,
        request: &ResumeSessionRequest,
    ) -> Result<Arc<AcpSession>, agent_client_protocol::Error> {
        let id = request.session_id.to_string();
        if let Some(live) = self.session(&id) {
            return Ok(live);
        }
        let resumed = self
            .host
            .resume_session(&id, self.options(&request.cwd))
            .await;
        let session = match resumed {
            Ok(s) => s,
            Err(herald_session::SessionError::NotFound(_)) => {
                let mut options = self.options(&request.cwd);
                options.id = Some(id);
                self.host.open_session(options).await.map_err(|e| {
                    agent_client_protocol::Error::internal_error().data(e.to_string())
                })?
            }
            Err(e) => {
                return Err(agent_client_protocol::Error::internal_error().data(e.to_string()));
            }
        };
        self.add(session)
    }

    fn cancel(&self, id: &str) {
        if let Some(s) = self.session(id) {
            s.cancelled.store(true, std::sync::atomic::Ordering::SeqCst);
            if let Some(run) = lock(&s.run).clone() {
                run.interrupt();
            }
        }
    }
}

/// Serves ACP on `transport` (stdio for `herald acp`) until the client goes away.
pub async fn serve(
    server: Arc<AcpServer>,
    transport: impl ConnectTo<Agent>,
) -> Result<(), agent_client_protocol::Error> {
    let (s1, s2, s3, s4, s5, s6) = (
        server.clone(),
        server.clone(),
        server.clone(),
        server.clone(),
        server.clone(),
        server.clone(),
    );
    let (s7, s8) = (server.clone(), server);
    Agent
        .v1()
        .name("herald")
        .on_receive_request(
            async move |request: InitializeRequest, responder, _cx| {
                responder.respond(s1.initialize(&request))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: AuthenticateRequest, responder, _cx| {
                if s2.authenticates(&request.method_id.to_string()) {
                    responder.respond(AuthenticateResponse::new())
                } else {
                    responder.respond_with_error(
                        agent_client_protocol::Error::auth_required()
                            .data("no provider credential resolves: run `herald acp --setup`"),
                    )
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest,
                        responder,
                        cx: agent_client_protocol::v1::ConnectionTo<Client>| {
                match s3.new_session(&request).await {
                    Ok(id) => {
                        responder.respond(NewSessionResponse::new(id.clone()))?;
                        prompt::offer_commands(&id, &cx);
                        Ok(())
                    }
                    Err(e) => responder.respond_with_error(e),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: LoadSessionRequest,
                        responder,
                        cx: agent_client_protocol::v1::ConnectionTo<Client>| {
                let Some(live) = s4.load(&request).await else {
                    return responder.respond_with_error(
                        agent_client_protocol::Error::invalid_params()
                            .data(format!("no session {}", request.session_id)),
                    );
                };
                prompt::replay(&live, &cx);
                responder.respond(LoadSessionResponse::new())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest,
                        responder,
                        cx: agent_client_protocol::v1::ConnectionTo<Client>| {
                let server = s5.clone();
                let conn = cx.clone();
                cx.spawn(async move {
                    let answer = prompt::run(&server, request, &conn).await;
                    responder.respond(answer)
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ListSessionsRequest, responder, _cx| {
                responder.respond(listing::list(&s7, &request))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ResumeSessionRequest,
                        responder,
                        cx: agent_client_protocol::v1::ConnectionTo<Client>| {
                match s8.resume(&request).await {
                    Ok(live) => {
                        prompt::replay(&live, &cx);
                        responder.respond(ResumeSessionResponse::new())
                    }
                    Err(e) => responder.respond_with_error(e),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |n: CancelNotification, _cx| {
                s6.cancel(&n.session_id.to_string());
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(transport)
        .await
}
