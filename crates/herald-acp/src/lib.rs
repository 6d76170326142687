//! The ACP server (acp.md) for IDEs: protocol version 1 on the `agent-client-protocol`
//! crate, stdio. A front door on the session host: each ACP session is a live
//! [`herald_session::Conversation`] of the [`Host`]; prompts are its runs, streamed as `session/update` notifications, and the
//! host's approval requests become `session/request_permission` calls.

mod edits;
mod listing;
mod mcp_servers;
mod modes;
mod permission;
mod prompt;
mod sessions;
mod settings;
mod slash;
pub mod stdio_lines;
pub mod tools;
mod wire;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, AuthMethod, AuthMethodAgent, AuthMethodTerminal, AuthenticateResponse,
    CancelNotification, Implementation, InitializeRequest, InitializeResponse, ListSessionsRequest,
    PromptCapabilities, PromptRequest, SessionCapabilities, SessionForkCapabilities,
    SessionListCapabilities, SessionResumeCapabilities, SetSessionConfigOptionRequest,
    SetSessionModeRequest,
};
use agent_client_protocol::{Agent, Client, ConnectTo};
use edits::EditGate;
use herald_session::conversation::lock;
use herald_session::{Answers, Conversations, Host, Observer, SessionOptions};
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

/// Where ACP sessions say they come from.
pub const SOURCE: &str = "acp";
/// The terminal auth method: run the binary with `--setup`.
pub const SETUP_METHOD: &str = "hermes-setup";

/// What ACP adds to a live conversation: the cancel flag of its prompt, its edit
/// approval gate and the config options herald does not act on.
pub struct AcpWire {
    cancelled: AtomicBool,
    gate: Arc<EditGate>,
    /// Config options herald does not act on, as the client set them.
    other_options: Mutex<HashMap<String, String>>,
    /// The MCP servers the client gave the session (to reopen it with them).
    servers: Vec<agent_client_protocol::v1::schema::McpServer>,
}

/// What ACP keeps of a session closed at the cap: where it worked, the client's MCP
/// servers and its edit mode (ACP has one client per process: it is always there).
#[derive(Clone)]
pub struct AcpMemo {
    cwd: std::path::PathBuf,
    servers: Vec<agent_client_protocol::v1::schema::McpServer>,
    policy: modes::EditPolicy,
}

impl herald_session::DoorWire for AcpWire {
    const DOOR: herald_session::Door = herald_session::Door::Acp;
    type Memo = AcpMemo;
    fn memo(&self) -> AcpMemo {
        AcpMemo {
            cwd: self.gate.cwd(),
            servers: self.servers.clone(),
            policy: self.gate.policy(),
        }
    }
}

/// An ACP session: a live conversation of the host (its id the first stored session's).
pub type AcpSession = herald_session::Live<AcpWire>;

/// The ACP server over one session host.
pub struct AcpServer {
    host: Arc<Host>,
    tool_names: Vec<String>,
    /// The provider whose credentials resolved, if any (an auth method of its own).
    provider: Option<String>,
    /// The open sessions, at most `max_live_sessions` (past it the least recently used idle
    /// one is closed, and reopened when prompted).
    sessions: Conversations<AcpWire>,
}

impl AcpServer {
    /// At exit: the open sessions finalized for the plugins (`on_session_finalize`).
    pub async fn finalize_sessions(&self) {
        self.sessions.finalize_all().await;
    }

    pub fn new(
        host: Arc<Host>,
        tool_names: Vec<String>,
        provider: Option<String>,
    ) -> Arc<AcpServer> {
        Arc::new(AcpServer {
            sessions: Conversations::new(host.clone()),
            host,
            tool_names,
            provider,
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
            .mcp_capabilities(mcp_servers::capabilities())
            .session_capabilities(
                SessionCapabilities::new()
                    .fork(SessionForkCapabilities::new())
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
        let method = method.trim().to_ascii_lowercase();
        self.provider
            .as_ref()
            .is_some_and(|p| method == SETUP_METHOD || method == p.to_ascii_lowercase())
    }

    /// How an ACP session in `cwd` is opened: asked by request, with its edit gate.
    fn options(
        &self,
        cwd: &std::path::Path,
        gate: &Arc<EditGate>,
        servers: &[agent_client_protocol::v1::schema::McpServer],
    ) -> SessionOptions {
        let mut o = SessionOptions::new(SOURCE, self.tool_names.clone(), Answers::ByRequest);
        o.own_mcp = mcp_servers::settings_of(servers);
        o.cwd = Some(cwd.to_path_buf()).filter(|c| c.is_dir());
        o.observers = vec![gate.clone() as Arc<dyn Observer>];
        o.edits = Some(gate.clone() as Arc<dyn herald_session::EditRule>);
        o
    }

    fn wire(
        gate: Arc<EditGate>,
        servers: &[agent_client_protocol::v1::schema::McpServer],
    ) -> AcpWire {
        AcpWire {
            cancelled: AtomicBool::new(false),
            gate,
            other_options: Mutex::new(HashMap::new()),
            servers: servers.to_vec(),
        }
    }

    fn session(&self, id: &str) -> Option<Arc<AcpSession>> {
        self.sessions.get(id)
    }

    /// The live session `id`, reopened when it was closed at the cap (the client still
    /// holds its id, so it never sees it missing).
    async fn session_or_reopen(
        &self,
        id: &str,
        cx: &agent_client_protocol::v1::ConnectionTo<Client>,
    ) -> Option<Arc<AcpSession>> {
        if let Some(live) = self.session(id) {
            return Some(live);
        }
        let memo = self.sessions.closed(id)?.memo;
        let gate = EditGate::new(cx.clone(), self.host.runtime().approvals.answer_within());
        gate.set_policy(memo.policy);
        let options = self.options(&memo.cwd, &gate, &memo.servers);
        let wire = Self::wire(gate.clone(), &memo.servers);
        match self.sessions.reopen(id, options, wire).await {
            Ok(Some(live)) => {
                gate.attach(
                    live.conversation.session().id(),
                    live.conversation.session().cwd(),
                );
                Some(live)
            }
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(session = id, error = %e, "acp: cannot reopen a session closed at the cap");
                None
            }
        }
    }

    async fn cancel(&self, id: &str) {
        if let Some(s) = self.session(id) {
            s.wire
                .cancelled
                .store(true, std::sync::atomic::Ordering::SeqCst);
            let _ = s.conversation.submit(herald_session::Op::Cancel).await;
        }
    }
}

pub(crate) fn refused(e: herald_session::CapReached) -> agent_client_protocol::Error {
    agent_client_protocol::Error::invalid_request().data(e.to_string())
}

fn internal(e: impl std::fmt::Display) -> agent_client_protocol::Error {
    agent_client_protocol::Error::internal_error().data(e.to_string())
}

/// Serves ACP on this process's stdin and stdout (`herald acp`) until the client goes
/// away, its lines framed by [`stdio_lines`].
pub async fn serve_stdio(server: Arc<AcpServer>) -> Result<(), agent_client_protocol::Error> {
    stdio_lines::serve(server).await
}

/// Serves ACP on `transport` (stdio for `herald acp`) until the client goes away.
pub async fn serve(
    server: Arc<AcpServer>,
    transport: impl ConnectTo<Agent>,
) -> Result<(), agent_client_protocol::Error> {
    type Cx = agent_client_protocol::v1::ConnectionTo<Client>;
    Agent
        .v1()
        .name("herald")
        .on_receive_request(
            {
                let s = server.clone();
                async move |request: InitializeRequest, responder, _cx| {
                    responder.respond(s.initialize(&request))
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let s = server.clone();
                async move |request: wire::Authenticate, responder, _cx| {
                    let authenticated = s.authenticates(&request.0.method_id.to_string());
                    responder.respond(wire::AuthenticateAnswer(
                        authenticated.then(AuthenticateResponse::new),
                    ))
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let s = server.clone();
                async move |request: wire::NewSession, responder, cx: Cx| {
                    let answer = s.new_session(&request.0, &cx).await;
                    let id = answer.as_ref().ok().map(|a| a.inner.session_id.to_string());
                    responder
                        .respond_with_result(answer.map(|a| wire::NewSessionAnswer(Some(a))))?;
                    if let Some(id) = id {
                        prompt::offer_commands(&id, &cx);
                    }
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let s = server.clone();
                async move |request: wire::LoadSession, responder, cx: Cx| {
                    let r = &request.0;
                    let answer = s
                        .load(&r.session_id.to_string(), &r.cwd, &r.mcp_servers, &cx)
                        .await;
                    let answer = answer.map(|live| {
                        live.map(|live| {
                            prompt::replay(&live, &cx);
                            s.loaded(&live)
                        })
                    });
                    responder.respond_with_result(answer.map(wire::LoadSessionAnswer))
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let s = server.clone();
                async move |request: wire::ResumeSession, responder, cx: Cx| {
                    let r = &request.0;
                    let answer = s
                        .resume(&r.session_id.to_string(), &r.cwd, &r.mcp_servers, &cx)
                        .await;
                    let answer = answer.map(|live| {
                        prompt::replay(&live, &cx);
                        wire::ResumeSessionAnswer(Some(s.resumed(&live)))
                    });
                    responder.respond_with_result(answer)
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let s = server.clone();
                async move |request: wire::ForkSession, responder, cx: Cx| {
                    let answer = s.fork(&request.0, &cx).await;
                    let answer =
                        answer.map(|live| wire::ForkSessionAnswer(Some(s.forked(live.as_deref()))));
                    responder.respond_with_result(answer)
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let s = server.clone();
                async move |request: PromptRequest, responder, cx: Cx| {
                    let server = s.clone();
                    let conn = cx.clone();
                    let span = herald_trace::span!(
                        "acp.prompt",
                        session_id = %request.session_id.0
                    );
                    cx.spawn(tracing::Instrument::instrument(
                        async move {
                            let answer = prompt::run(&server, request, &conn).await;
                            responder.respond(answer)
                        },
                        span,
                    ))
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let s = server.clone();
                async move |request: ListSessionsRequest, responder, _cx| {
                    responder.respond(listing::list(&s, &request).await)
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let s = server.clone();
                async move |request: SetSessionModeRequest, responder, cx: Cx| {
                    s.session_or_reopen(&request.session_id.to_string(), &cx)
                        .await;
                    responder.respond_with_result(s.set_mode(&request, &cx))
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let s = server.clone();
                async move |request: SetSessionConfigOptionRequest, responder, cx: Cx| {
                    s.session_or_reopen(&request.session_id.to_string(), &cx)
                        .await;
                    responder.respond_with_result(s.set_config_option(&request, &cx).await)
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let s = server.clone();
                async move |request: wire::SetModel, responder, cx: Cx| {
                    let answer = match s.session_or_reopen(&request.session_id, &cx).await {
                        None => Ok(wire::SetModelAnswer(None)),
                        Some(live) => s
                            .switch_model(&live, &request.model_id)
                            .await
                            .map(|()| wire::SetModelAnswer(Some(Default::default())))
                            .map_err(|e| agent_client_protocol::Error::invalid_params().data(e)),
                    };
                    responder.respond_with_result(answer)
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            {
                let s = server;
                async move |n: CancelNotification, _cx| {
                    s.cancel(&n.session_id.to_string()).await;
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(transport)
        .await
}
