//! The ACP server (acp.md) for IDEs: protocol version 1 on the `agent-client-protocol`
//! crate, stdio. A front door on the session host: each ACP session is a session of
//! [`Host`]; prompts are its runs, streamed as `session/update` notifications, and the
//! host's approval requests become `session/request_permission` calls.

mod edits;
mod listing;
mod modes;
mod permission;
mod prompt;
mod sessions;
mod settings;
mod slash;
pub mod tools;
mod wire;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, AuthMethod, AuthMethodAgent, AuthMethodTerminal, AuthenticateRequest,
    AuthenticateResponse, CancelNotification, Implementation, InitializeRequest,
    InitializeResponse, ListSessionsRequest, PromptCapabilities, PromptRequest,
    SessionCapabilities, SessionForkCapabilities, SessionListCapabilities,
    SessionResumeCapabilities, SetSessionConfigOptionRequest, SetSessionModeRequest,
};
use agent_client_protocol::{Agent, Client, ConnectTo};
use edits::EditGate;
use herald_session::{Answers, Host, Observer, RunHandle, Session, SessionOptions};
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

/// Where ACP sessions say they come from.
pub const SOURCE: &str = "acp";
/// Sessions one connection keeps open at most (a client that opens more is refused).
pub const MAX_SESSIONS: usize = 256;
/// The terminal auth method: run the binary with `--setup`.
pub const SETUP_METHOD: &str = "hermes-setup";

/// An ACP session: the host's session (replaced by `/reset`), its turn in progress,
/// the prompts queued behind it, and its edit approval gate.
pub struct AcpSession {
    /// The ACP session id (the first host session's id).
    id: String,
    session: Mutex<Session>,
    run: Mutex<Option<RunHandle>>,
    queued: Mutex<std::collections::VecDeque<String>>,
    cancelled: AtomicBool,
    /// The prompt `session/cancel` stopped last (an idle `/steer` sends it again).
    interrupted: Mutex<Option<String>>,
    gate: Arc<EditGate>,
    /// Config options herald does not act on, as the client set them.
    other_options: Mutex<HashMap<String, String>>,
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
        let method = method.to_ascii_lowercase();
        self.provider
            .as_ref()
            .is_some_and(|p| method == SETUP_METHOD || method == p.to_ascii_lowercase())
    }

    /// How an ACP session in `cwd` is opened: asked by request, with its edit gate.
    fn options(&self, cwd: &std::path::Path, gate: &Arc<EditGate>) -> SessionOptions {
        let mut o = SessionOptions::new(SOURCE, self.tool_names.clone(), Answers::ByRequest);
        o.cwd = Some(cwd.to_path_buf()).filter(|c| c.is_dir());
        o.observers = vec![gate.clone() as Arc<dyn Observer>];
        o
    }

    /// Refuses a session past the cap.
    fn room(&self) -> Result<(), agent_client_protocol::Error> {
        match lock(&self.sessions).len() >= MAX_SESSIONS {
            true => Err(agent_client_protocol::Error::invalid_request()
                .data(format!("too many open sessions (at most {MAX_SESSIONS})"))),
            false => Ok(()),
        }
    }

    fn add(
        &self,
        session: Session,
        gate: Arc<EditGate>,
    ) -> Result<Arc<AcpSession>, agent_client_protocol::Error> {
        self.room()?;
        gate.attach(session.id(), session.cwd());
        let entry = Arc::new(AcpSession {
            id: session.id().to_owned(),
            session: Mutex::new(session),
            run: Mutex::new(None),
            queued: Mutex::new(std::collections::VecDeque::new()),
            cancelled: AtomicBool::new(false),
            interrupted: Mutex::new(None),
            gate,
            other_options: Mutex::new(HashMap::new()),
        });
        lock(&self.sessions).insert(entry.id.clone(), entry.clone());
        Ok(entry)
    }

    fn session(&self, id: &str) -> Option<Arc<AcpSession>> {
        lock(&self.sessions).get(id).cloned()
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

fn internal(e: impl std::fmt::Display) -> agent_client_protocol::Error {
    agent_client_protocol::Error::internal_error().data(e.to_string())
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
                async move |request: AuthenticateRequest, responder, _cx| {
                    let answer = match s.authenticates(&request.method_id.to_string()) {
                        true => Ok(AuthenticateResponse::new()),
                        false => Err(agent_client_protocol::Error::auth_required()
                            .data("no provider credential resolves: run `herald acp --setup`")),
                    };
                    responder.respond_with_result(answer)
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
                    let answer = s.load(&r.session_id.to_string(), &r.cwd, &cx).await;
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
                    let answer = s.resume(&r.session_id.to_string(), &r.cwd, &cx).await;
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
                    cx.spawn(async move {
                        let answer = prompt::run(&server, request, &conn).await;
                        responder.respond(answer)
                    })
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let s = server.clone();
                async move |request: ListSessionsRequest, responder, _cx| {
                    responder.respond(listing::list(&s, &request))
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let s = server.clone();
                async move |request: SetSessionModeRequest, responder, cx: Cx| {
                    responder.respond_with_result(s.set_mode(&request, &cx))
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let s = server.clone();
                async move |request: SetSessionConfigOptionRequest, responder, _cx| {
                    responder.respond_with_result(s.set_config_option(&request))
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let s = server.clone();
                async move |request: wire::SetModel, responder, _cx| {
                    let answer = match s.session(&request.session_id) {
                        None => Ok(wire::SetModelAnswer(None)),
                        Some(live) => s
                            .switch_model(&live, &request.model_id)
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
                    s.cancel(&n.session_id.to_string());
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(transport)
        .await
}
