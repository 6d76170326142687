//! The session host: opens, resumes, branches and rewinds sessions, and starts their
//! turns as runs. Every message a run adds is saved as it happens (after every
//! transform) and comes back to the front door with its row id, so memory and
//! `state.db` hold the same conversation.

use crate::answers::{Pending, RequestApprover, RequestClarifier, Step};
use crate::approvals::Attendance;
use crate::edit_approvals::{EditApprover, EditRule};
use crate::prompt;
use crate::runs::{RunCell, RunEventKind, RunHandle, RunRegistry, RunState, RunStatus};
use crate::runtime::Runtime;
use crate::sessions::{SessionError, message_row, to_message};
use herald_agent::TurnProgress;
use herald_agent::tool::Clarifier;
use herald_agent::{
    Agent, AgentConfig, AgentEvent, Approvals, Approver, Observer, Plugins, Tool, TurnResult,
};
use herald_llm::flow::Flow;
use herald_llm::{Endpoint, LlmClient};
use herald_protocol::{ChatMessage, UserInput};
use herald_store::SessionStore;
use herald_store::sessions::{NewSession, RewindTarget, StoredResponse};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, watch};

/// The key of `model_config` that keeps a session's `/model` switch (its spec).
const MODEL_SWITCH_KEY: &str = "herald_model_switch";

mod admin;
mod relay;
pub use admin::Compressed;
pub use relay::EventRelay;

/// Most runs a host keeps at once, live or recently finished.
pub const DEFAULT_MAX_RUNS: usize = 1024;

pub(crate) use herald_store::now_secs;

/// Who answers a session's approval and clarify requests.
pub enum Answers {
    /// The front door answers as it is asked (a terminal).
    Local {
        approver: Box<dyn Approver>,
        clarifier: Option<Arc<dyn Clarifier>>,
    },
    /// Requests go out as run events and are answered by request id through the
    /// [`RunHandle`] (HTTP, JSON-RPC, ACP).
    ByRequest,
    /// Nobody: a command that needs approval is denied; `clarify` gets no answer.
    Nobody,
}

/// What a session is opened with.
pub struct SessionOptions {
    /// Where it comes from (`cli`, `webhook`, `api` ...), as stored.
    pub source: String,
    /// An id of the caller's (kept if the session exists already); else a new one.
    pub id: Option<String>,
    /// The tools offered (names); the runtime drops what is disabled or unavailable.
    pub tool_names: Vec<String>,
    /// Skills put in the system prompt: (name, body).
    pub preloaded_skills: Vec<(String, String)>,
    /// The working folder; else `terminal.cwd`, else the process's.
    pub cwd: Option<PathBuf>,
    pub answers: Answers,
    /// Over the profile's `agent.max_turns`.
    pub max_iterations: Option<u32>,
    /// Approve everything but the floor and the deny rules (`--yolo`).
    pub yolo: bool,
    /// Added to the system prompt of every API call, never stored (a client's own
    /// system messages).
    pub ephemeral_system: Option<String>,
    /// Whether the session's runs are listed in the host's registry (found by id) and
    /// kept in `state.db`; off where the caller holds the handle and a run's record
    /// lives elsewhere, as a webhook run's inbox entry does.
    pub keep_runs: bool,
    /// Observers of this session only, told after the runtime's.
    pub observers: Vec<Arc<dyn Observer>>,
    /// The edits that run unasked; every other `write_file` and `patch` is put to the
    /// front door as an approval (with [`Answers::ByRequest`]; ACP's modes).
    pub edits: Option<Arc<dyn EditRule>>,
    /// Who the session's turns are for, as plugin hooks' `sender_id` (`""` on the
    /// local doors; `webhook:<route>` for a webhook run, as Hermes names it).
    pub sender_id: String,
    /// A sudo password or a skill's secret is asked for through the run handle (with
    /// [`Answers::ByRequest`]); Hermes's TUI gateway alone does this.
    pub prompts: bool,
    /// Which MCP servers' tools it gets (`None`: the platform's rule,
    /// [`Runtime::mcp_grant`]).
    pub mcp: Option<herald_mcp::McpGrant>,
    /// MCP servers of this session alone (an ACP client's `mcpServers`), started with
    /// it and stopped with it; one named like a config server wins for this session.
    pub own_mcp: Vec<herald_config::McpServerSettings>,
    /// Own servers already running, handed over from the session this one replaces
    /// (ACP's `/new`): used instead of starting `own_mcp`.
    pub own_mcp_pool: Option<Arc<herald_mcp::McpPool>>,
    /// What a child agent of `delegate_task` takes from its parent.
    pub(crate) child: Option<crate::delegation::ChildParts>,
    /// A chat platform's session key, stored with the session so that the key's next
    /// message finds it ([`Host::keyed_session`]).
    pub session_key: Option<String>,
    /// Whose long-term memory the session has: `None`, the home's; a key
    /// (the API's `X-Hermes-Session-Key`), that key's own stores.
    pub memory_scope: Option<String>,
}

impl SessionOptions {
    pub fn new(source: &str, tool_names: Vec<String>, answers: Answers) -> SessionOptions {
        SessionOptions {
            source: source.to_owned(),
            id: None,
            tool_names,
            preloaded_skills: Vec::new(),
            cwd: None,
            answers,
            max_iterations: None,
            yolo: false,
            ephemeral_system: None,
            keep_runs: true,
            observers: Vec::new(),
            edits: None,
            sender_id: String::new(),
            prompts: false,
            mcp: None,
            own_mcp: Vec::new(),
            own_mcp_pool: None,
            child: None,
            session_key: None,
            memory_scope: None,
        }
    }
}

/// A message of a session with its row in `state.db` (`None` when it could not be
/// kept).
#[derive(Debug, Clone, PartialEq)]
pub struct Saved {
    pub row_id: Option<i64>,
    pub message: ChatMessage,
}

struct SessionState {
    history: Vec<Saved>,
    endpoint: Endpoint,
    /// The run in progress, if any (one turn at a time).
    running: Option<String>,
    /// Compressions done while it was live.
    compressions: u32,
    /// USD its turns cost, as the provider reported it, with its subagents' (while
    /// it is live).
    cost_usd: f64,
}

pub(crate) struct SessionInner {
    id: String,
    source: String,
    system_prompt: String,
    tools: Vec<Arc<dyn Tool>>,
    /// Its tools are exactly `tools` (a child agent's, narrowed from its parent's):
    /// no MCP or plugin tools are added.
    fixed_tools: bool,
    cwd: PathBuf,
    max_iterations: u32,
    /// A subagent's: its root run's budget, shared by the whole tree (`None`: each
    /// run is a root with a budget of its own).
    tree_budget: Option<Arc<herald_agent::TreeBudget>>,
    pub(crate) approvals: Arc<Approvals>,
    /// Where it stands in a delegation tree, and whether it may delegate.
    pub(crate) delegation: crate::delegation::Standing,
    /// The host it belongs to (for `delegate_task`).
    host: std::sync::Weak<Host>,
    clarifier: Option<Arc<dyn Clarifier>>,
    pending: Arc<Pending>,
    keep_runs: bool,
    ephemeral_system: Option<String>,
    pub(crate) sender_id: String,
    prompter: Option<Arc<dyn herald_agent::tool::Prompter>>,
    /// The MCP servers whose tools each of its turns is offered (as they are then).
    mcp: herald_mcp::McpGrant,
    /// Its own MCP servers (stopped when the session is dropped).
    own_mcp: Option<Arc<herald_mcp::McpPool>>,
    /// The runtime's MCP tools for this session now.
    runtime: Arc<Runtime>,
    /// Told after the runtime's observers.
    pub(crate) observers: Vec<Arc<dyn Observer>>,
    state: Mutex<SessionState>,
}

/// A live session: cheap to clone; one turn runs at a time.
#[derive(Clone)]
pub struct Session(pub(crate) Arc<SessionInner>);

impl Session {
    /// The session's state; a poisoned lock is taken back, not emptied (no invariant
    /// spans its fields that a panicking holder could have broken half-way).
    fn state(&self) -> std::sync::MutexGuard<'_, SessionState> {
        crate::conversation::lock(&self.0.state)
    }

    pub fn id(&self) -> &str {
        &self.0.id
    }

    pub fn source(&self) -> &str {
        &self.0.source
    }

    /// The folder its tools work in.
    pub fn cwd(&self) -> &std::path::Path {
        &self.0.cwd
    }

    pub fn system_prompt(&self) -> &str {
        &self.0.system_prompt
    }

    /// The names of the tools offered now (MCP tools as their servers stand).
    pub fn tool_names(&self) -> Vec<String> {
        self.tools_now()
            .iter()
            .map(|t| t.name().to_owned())
            .collect()
    }

    /// Its own MCP servers, running (to hand over to a fresh session).
    pub fn own_mcp_pool(&self) -> Option<Arc<herald_mcp::McpPool>> {
        self.0.own_mcp.clone()
    }

    /// The names of the tools offered now, by toolset (MCP tools under
    /// `mcp-<server>`).
    pub fn tools_by_toolset(&self) -> std::collections::BTreeMap<String, Vec<String>> {
        let mut out: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for tool in self.tools_now() {
            let set = tool
                .toolset()
                .unwrap_or_else(|| herald_agent::toolsets::toolset_of(tool.name()).to_owned());
            out.entry(set).or_default().push(tool.name().to_owned());
        }
        out
    }

    /// The tools a turn started now is offered: the session's own, then the MCP
    /// tools its grant allows from the servers connected now.
    pub fn tools_now(&self) -> Vec<Arc<dyn Tool>> {
        let s = &self.0;
        let mut tools = s.tools.clone();
        if s.delegation.may_delegate {
            tools.push(crate::delegation::DelegateTool::offered(
                s.host.clone(),
                &self.0,
            ));
        }
        if s.fixed_tools {
            return tools;
        }
        // `plugin_tools` refused every other plugin tool named like a built-in.
        for p in s.runtime.plugin_tools(&s.mcp) {
            match tools.iter().position(|t| t.name() == p.name) {
                Some(i) if p.replaces => tools[i] = p,
                Some(_) => {}
                None => tools.push(p),
            }
        }
        let mut shadowed = Vec::new();
        if let Some(own) = &s.own_mcp {
            let taken: Vec<String> = tools.iter().map(|t| t.name().to_owned()).collect();
            tools.extend(own.tools(&herald_mcp::McpGrant::All, &taken, &[]));
            shadowed = own.server_names();
        }
        let taken: Vec<String> = tools.iter().map(|t| t.name().to_owned()).collect();
        tools.extend(s.runtime.mcp_tools(&s.mcp, &taken, &shadowed));
        tools
    }

    /// The conversation so far, with row ids.
    pub fn history(&self) -> Vec<Saved> {
        self.state().history.clone()
    }

    /// Reads the history in place (no copy), under the session's lock: keep `f` short.
    pub fn with_history<T>(&self, f: impl FnOnce(&[Saved]) -> T) -> T {
        f(&self.state().history)
    }

    /// How many times the conversation was compressed while it was live.
    pub fn compressions(&self) -> u32 {
        self.state().compressions
    }

    /// What the next request would weigh, roughly: four characters a token over the
    /// system prompt and the history (as Hermes estimates it).
    pub fn context_tokens(&self) -> u64 {
        let history_chars = |history: &[Saved]| {
            history
                .iter()
                .map(|s| {
                    let m = &s.message;
                    m.content.as_ref().map_or(0, String::len)
                        + m.reasoning.as_ref().map_or(0, String::len)
                        + m.tool_calls
                            .iter()
                            .map(|c| c.function.arguments.len())
                            .sum::<usize>()
                })
                .sum::<usize>()
        };
        let chars = self.system_prompt().len() + self.with_history(history_chars);
        u64::try_from(chars / 4).unwrap_or(u64::MAX)
    }

    pub fn endpoint(&self) -> Option<Endpoint> {
        Some(self.state().endpoint.clone())
    }

    /// Switches this session's model (kept for its later turns).
    pub fn set_endpoint(&self, endpoint: Endpoint) {
        self.state().endpoint = endpoint;
    }

    /// What its turns cost in USD while it was live (what the provider reported),
    /// its subagents' included.
    pub fn cost_usd(&self) -> f64 {
        self.state().cost_usd
    }

    /// Adds what a turn or its subagents cost (Hermes rolls a child's cost up into its
    /// parent's; tokens stay each agent's own).
    pub(crate) fn add_cost(&self, usd: f64) {
        if usd.is_finite() && usd > 0.0 {
            self.state().cost_usd += usd;
        }
    }

    /// The id of the run in progress.
    pub fn running(&self) -> Option<String> {
        self.state().running.clone()
    }

    /// Takes a conversation the caller holds (a client that resends its transcript)
    /// as this session's history for its next turn; those messages have no rows.
    pub fn adopt_history(&self, messages: Vec<ChatMessage>) {
        let history = messages
            .into_iter()
            .map(|message| Saved {
                row_id: None,
                message,
            })
            .collect();
        self.set_history(history);
    }

    fn push(&self, saved: Saved) {
        self.state().history.push(saved);
    }

    fn set_history(&self, history: Vec<Saved>) {
        self.state().history = history;
    }
}

/// A rewind as a front door received it (the ordinal as the JSON it came as).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RewindRequest {
    pub truncate_before_row_id: Option<i64>,
    pub truncate_before_user_ordinal: Option<serde_json::Value>,
    pub confirm_truncate: bool,
    pub confirm_empty_truncate: bool,
}

impl RewindRequest {
    /// Checks 1 and 2 of the protocol (form, then confirmation): the target for the
    /// store, or why not.
    fn target(&self) -> Result<RewindTarget, SessionError> {
        let ordinal = match &self.truncate_before_user_ordinal {
            None => None,
            Some(serde_json::Value::Number(n)) if n.is_i64() || n.is_u64() => match n.as_u64() {
                Some(o) => Some(o),
                None => {
                    return Err(SessionError::StaleTarget(format!(
                        "user turn {n} does not exist"
                    )));
                }
            },
            Some(_) => {
                return Err(SessionError::BadRewind(
                    "truncate_before_user_ordinal must be an integer".into(),
                ));
            }
        };
        let has_target = ordinal.is_some() || self.truncate_before_row_id.is_some();
        match (has_target, self.confirm_truncate) {
            (false, true) => Err(SessionError::BadRewind(
                "confirm_truncate needs truncate_before_row_id or truncate_before_user_ordinal"
                    .into(),
            )),
            (false, false) => Err(SessionError::BadRewind("no truncation target".into())),
            (true, false) => Err(SessionError::NotConfirmed),
            (true, true) => Ok(RewindTarget {
                before_row_id: self.truncate_before_row_id,
                before_user_ordinal: ordinal,
                confirm_empty: self.confirm_empty_truncate,
            }),
        }
    }
}

/// The host of one profile's sessions and runs.
pub struct Host {
    /// Itself, for what it hands out that must not keep it alive (a session's
    /// `delegate_task`).
    me: std::sync::Weak<Host>,
    runtime: Arc<Runtime>,
    store: SessionStore,
    client: LlmClient,
    runs: RunRegistry,
    /// Every run started, for stopping them all when the front door exits.
    live: crate::stopping::LiveRuns,
    models: crate::model_options::ModelOptions,
    /// The subagents running now, and whether new ones may start.
    pub(crate) delegations: crate::delegation::Delegations,
    /// How the front door puts a run's events on the wire for another instance that
    /// follows them (set by the door that serves event streams).
    event_relay: std::sync::OnceLock<EventRelay>,
}

/// A new session's folder and tools.
struct Placed {
    cwd: PathBuf,
    tools: Vec<Arc<dyn herald_agent::tool::Tool>>,
    own_mcp: Option<Arc<herald_mcp::McpPool>>,
}

impl Host {
    /// The provider client this host's runs use.
    pub fn client(&self) -> &LlmClient {
        &self.client
    }

    /// What answers an MCP server's sampling requests: this host's model.
    pub fn sampler(&self) -> Arc<dyn herald_mcp::Sampler> {
        Arc::new(crate::mcp_sampling::HostSampler {
            client: self.client.clone(),
            runtime: Arc::downgrade(&self.runtime),
        })
    }

    pub fn new(runtime: Arc<Runtime>, store: SessionStore) -> Arc<Host> {
        Host::with_client(runtime, store, LlmClient::new(), DEFAULT_MAX_RUNS)
    }

    /// A host sharing a provider client (and its connection pool), keeping at most
    /// `max_runs` runs.
    pub fn with_client(
        runtime: Arc<Runtime>,
        store: SessionStore,
        client: LlmClient,
        max_runs: usize,
    ) -> Arc<Host> {
        Arc::new_cyclic(|me| Host {
            me: me.clone(),
            runtime,
            store,
            client,
            runs: RunRegistry::new(max_runs),
            live: crate::stopping::LiveRuns::default(),
            models: crate::model_options::ModelOptions::default(),
            delegations: crate::delegation::Delegations::default(),
            event_relay: std::sync::OnceLock::new(),
        })
    }

    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    /// The model picker's inventory (providers and their models); `refresh` asks every
    /// saved provider again.
    pub async fn model_options(&self, refresh: bool) -> crate::model_options::ModelInventory {
        self.models
            .build(&self.runtime, &self.client, refresh)
            .await
    }

    /// The session store the host writes through.
    pub fn store(&self) -> &SessionStore {
        &self.store
    }

    /// Runs a process that ended left unfinished are marked failed (call at start).
    pub async fn recover(&self) -> Result<usize, SessionError> {
        Ok(self
            .store
            .fail_unfinished_runs("herald stopped before the run finished".into())
            .await?)
    }

    /// Keeps a response of the Responses API, forgetting the least recently used
    /// beyond `keep`.
    pub async fn save_response(&self, r: StoredResponse, keep: usize) -> Result<(), SessionError> {
        Ok(self.store.save_response(r, keep).await?)
    }

    /// A stored response (marked used).
    pub async fn response(&self, id: &str) -> Result<Option<StoredResponse>, SessionError> {
        let found = self.store.response(id.to_owned()).await?;
        if found.is_some() {
            self.store.touch_response(id.to_owned()).await?;
        }
        Ok(found)
    }

    /// Forgets a stored response; whether there was one.
    pub async fn delete_response(&self, id: &str) -> Result<bool, SessionError> {
        Ok(self.store.delete_response(id.to_owned()).await?)
    }

    /// The latest stored response of a named conversation.
    pub async fn latest_response_of(
        &self,
        conversation: &str,
    ) -> Result<Option<String>, SessionError> {
        Ok(self
            .store
            .latest_response_of(conversation.to_owned())
            .await?)
    }

    /// Whether a session with this id is stored.
    pub async fn has_session(&self, id: &str) -> Result<bool, SessionError> {
        Ok(self.store.session(id.to_owned()).await?.is_some())
    }

    /// The most recent session of a source.
    pub async fn latest_session(&self, source: &str) -> Result<Option<String>, SessionError> {
        Ok(self.store.latest(source.to_owned()).await?)
    }

    /// The newest stored session of a chat platform's session key.
    pub async fn keyed_session(&self, key: &str) -> Result<Option<String>, SessionError> {
        Ok(self.store.keyed(key.to_owned()).await?)
    }

    /// Where a session opened with `opts` works: its folder, else `terminal.cwd`,
    /// else the process's.
    fn cwd_of(&self, opts: &SessionOptions) -> PathBuf {
        opts.cwd
            .clone()
            .or_else(|| self.runtime.cwd.clone())
            .unwrap_or_else(|| std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")))
    }

    /// The system prompt of a new session: SOUL.md, the skills index and the folder's
    /// AGENTS.md, read on the blocking pool (built at once when all were read a moment
    /// ago, as under load: a hop to the pool costs more than the build).
    async fn new_prompt(
        &self,
        opts: &SessionOptions,
        placed: &Placed,
    ) -> Result<String, SessionError> {
        let rt = self.runtime.clone();
        let cwd = placed.cwd.clone();
        let names: Vec<String> = placed.tools.iter().map(|t| t.name().to_owned()).collect();
        let preloaded = opts.preloaded_skills.clone();
        let memory_scope = opts.memory_scope.clone();
        let scheduled = opts.source == "cron";
        let fresh = rt.prompt_files_fresh(&cwd);
        let make = move || {
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            let memory = crate::runtime::memory_store(&rt.home, memory_scope.as_deref());
            prompt::session_prompt(&rt, &cwd, &names, &preloaded, &memory, scheduled)
        };
        if fresh {
            return Ok(make());
        }
        tokio::task::spawn_blocking(make)
            .await
            .map_err(|_| SessionError::Store(herald_store::StoreError::WriterGone))
    }

    /// A session that may get MCP tools waits, the first time, up to
    /// `mcp_discovery_timeout` for the servers to come up (Hermes's first-turn wait);
    /// a slower server's tools join a later turn. The session's own servers are
    /// started (and waited for) here.
    async fn discover_mcp(&self, opts: &SessionOptions) -> Option<Arc<herald_mcp::McpPool>> {
        let grant = self.runtime.mcp_grant(opts.mcp.as_ref());
        if let (Some(pool), false) = (self.runtime.mcp(), grant == herald_mcp::McpGrant::Nothing) {
            for own in &opts.own_mcp {
                if pool.names(&own.name) {
                    tracing::warn!(server = %own.name, "the session's own MCP server of this name is used instead of config.yaml's");
                }
            }
            pool.wait_for_discovery().await;
        }
        if let Some(running) = &opts.own_mcp_pool {
            return Some(running.clone());
        }
        if opts.own_mcp.is_empty() {
            return None;
        }
        let settings = herald_config::McpSettings {
            servers: opts.own_mcp.clone(),
            discovery_timeout: self.runtime.mcp_discovery_timeout(),
        };
        let own = herald_mcp::McpPool::start(&settings, Some(self.sampler()));
        own.wait_for_discovery().await;
        Some(own)
    }

    /// Where a session opened with `opts` works and the tools it gets (worked out
    /// once for its prompt and for the session).
    fn place(&self, opts: &SessionOptions, own_mcp: Option<Arc<herald_mcp::McpPool>>) -> Placed {
        let mut tools = self.runtime.tools(&opts.tool_names);
        let search = crate::session_search::SessionSearch {
            store: self.store.clone(),
        };
        if opts.tool_names.iter().any(|n| n == search.name()) && self.runtime.allows(search.name())
        {
            tools.push(Arc::new(search));
        }
        if let Some(scope) = &opts.memory_scope {
            let store = crate::runtime::memory_store(&self.runtime.home, Some(scope));
            for tool in tools.iter_mut().filter(|t| t.name() == "memory") {
                *tool = Arc::new(herald_tools::memory::Memory {
                    store: store.clone(),
                });
            }
        }
        Placed {
            cwd: self.cwd_of(opts),
            tools,
            own_mcp,
        }
    }

    fn build_session(
        &self,
        opts: SessionOptions,
        Placed {
            cwd,
            tools,
            own_mcp,
        }: Placed,
        id: String,
        system_prompt: String,
        history: Vec<Saved>,
    ) -> Session {
        let rt = &self.runtime;
        let pending = Arc::new(Pending::default());
        let mut observers = opts.observers;
        if let (Some(rule), Answers::ByRequest) = (opts.edits, &opts.answers) {
            observers.push(Arc::new(EditApprover {
                pending: pending.clone(),
                rule,
                within: rt.approvals.answer_within(),
            }));
        }
        let by_request = matches!(opts.answers, Answers::ByRequest);
        let (attendance, clarifier) = match opts.answers {
            Answers::Local {
                approver,
                clarifier,
            } => (Attendance::Attended(approver), clarifier),
            Answers::ByRequest => (
                Attendance::Attended(Box::new(RequestApprover(pending.clone()))),
                Some(Arc::new(RequestClarifier(pending.clone())) as Arc<dyn Clarifier>),
            ),
            Answers::Nobody => (Attendance::Unattended, None),
        };
        let mut policy = rt.approvals.clone();
        policy.yolo |= opts.yolo;
        let child = opts.child;
        let approvals = match child.as_ref().map(|c| c.approvals.clone()) {
            Some(parents) => parents,
            None => Arc::new(policy.approvals(attendance, rt.platform.name())),
        };
        let delegation = crate::delegation::Standing::of(child.as_ref(), &opts.tool_names, rt);
        let tools: Vec<Arc<dyn Tool>> = match &child {
            Some(c) => c.tools.clone(),
            None => tools,
        };
        let prompter = (opts.prompts && by_request).then(|| {
            Arc::new(crate::answers::RequestPrompter {
                pending: pending.clone(),
                env_file: rt.home.env_file(),
                sudo: Mutex::new(None),
            }) as Arc<dyn herald_agent::tool::Prompter>
        });
        Session(Arc::new(SessionInner {
            id,
            source: opts.source,
            system_prompt,
            tools,
            fixed_tools: child.is_some(),
            cwd,
            max_iterations: opts.max_iterations.unwrap_or(rt.max_iterations).max(1),
            tree_budget: child.as_ref().map(|c| c.budget.clone()),
            approvals,
            delegation,
            host: self.me.clone(),
            clarifier,
            pending,
            keep_runs: opts.keep_runs,
            ephemeral_system: opts.ephemeral_system.filter(|e| !e.trim().is_empty()),
            sender_id: opts.sender_id,
            prompter,
            mcp: rt.mcp_grant(opts.mcp.as_ref()),
            own_mcp,
            runtime: rt.clone(),
            observers,
            state: Mutex::new(SessionState {
                history,
                endpoint: child.map(|c| c.endpoint).unwrap_or_else(|| rt.endpoint()),
                running: None,
                compressions: 0,
                cost_usd: 0.0,
            }),
        }))
    }

    /// Opens a new session (or, with an id of the caller's that exists, that session
    /// afresh: a webhook event tried again).
    pub async fn open_session(&self, opts: SessionOptions) -> Result<Session, SessionError> {
        let given = opts.id.clone();
        let session_key = opts.session_key.clone();
        let id = given.clone().unwrap_or_else(prompt::new_session_id);
        let own_mcp = self.discover_mcp(&opts).await;
        let placed = self.place(&opts, own_mcp);
        let prompt = self.new_prompt(&opts, &placed).await?;
        let session = self.build_session(opts, placed, id, prompt, Vec::new());
        let header = NewSession {
            id: session.0.id.clone(),
            source: session.0.source.clone(),
            model: session
                .endpoint()
                .map_or_else(|| self.runtime.endpoint().model, |e| e.model),
            system_prompt: session.0.system_prompt.clone(),
            cwd: session.0.cwd.display().to_string(),
            parent_session_id: session.0.delegation.parent_session.clone(),
            session_key,
        };
        match given {
            Some(_) => self.store.ensure_session(header)?,
            None => self.store.create_session(header).await?,
        }
        Ok(session)
    }

    /// Resumes a stored session: its history with row ids and its system prompt byte
    /// for byte.
    pub async fn resume_session(
        &self,
        id: &str,
        opts: SessionOptions,
    ) -> Result<Session, SessionError> {
        let row = self.store.session(id.to_owned()).await?;
        let rows = self.store.history(id.to_owned()).await?;
        let Some(row) = row else {
            return Err(SessionError::NotFound(id.to_owned()));
        };
        let history = saved_history(rows);
        let mut opts = opts;
        if opts.cwd.is_none() {
            opts.cwd = row.cwd.map(PathBuf::from).filter(|p| p.is_dir());
        }
        let own_mcp = self.discover_mcp(&opts).await;
        let placed = self.place(&opts, own_mcp);
        let prompt = match row.system_prompt {
            Some(prompt) => prompt,
            None => self.new_prompt(&opts, &placed).await?,
        };
        let restored = self.restored_model(id, row.model_config.as_deref());
        let session = self.build_session(opts, placed, id.to_owned(), prompt, history);
        if let Some(endpoint) = restored {
            session.set_endpoint(endpoint);
        }
        Ok(session)
    }

    /// Branches a stored session into a new one (a copy of its live rows) and opens it;
    /// returns the new session and its title.
    pub async fn branch_session(
        &self,
        parent: &str,
        name: Option<String>,
        opts: SessionOptions,
    ) -> Result<(Session, String), SessionError> {
        let new_id = prompt::new_session_id();
        let title = self
            .store
            .branch(parent.to_owned(), new_id.clone(), name)
            .await?
            .ok_or_else(|| SessionError::NotFound(parent.to_owned()))?;
        Ok((self.resume_session(&new_id, opts).await?, title))
    }

    /// Rewinds a session before a user turn (the confirmation rules of the gateway
    /// protocol; nothing is written when refused); returns the surviving user rows.
    pub async fn rewind(
        &self,
        session: &Session,
        request: &RewindRequest,
    ) -> Result<Vec<i64>, SessionError> {
        let target = request.target()?;
        if session.running().is_some() {
            return Err(SessionError::Busy(session.id().to_owned()));
        }
        let survivors = self.store.rewind(session.id().to_owned(), target).await??;
        session.set_history(self.history_of(session).await?);
        Ok(survivors)
    }

    /// Switches `session` to the model of `spec` (`provider:model` allowed) for its
    /// later turns, and keeps the switch with the stored session so that resuming it
    /// restores the model (as Hermes keeps it in `model_config`); the model's name.
    pub async fn switch_model(
        &self,
        session: &Session,
        spec: &str,
    ) -> Result<String, crate::SelectError> {
        let endpoint = self.runtime.switch_model(spec)?;
        let model = endpoint.model.clone();
        session.set_endpoint(endpoint);
        if let Err(e) = self.keep_model_switch(session.id(), &model, spec).await {
            tracing::warn!(
                session = session.id(),
                "the model switch is not kept with the session: {e}"
            );
        }
        Ok(model)
    }

    /// Writes a switch into the session's `model_config`, keeping what else is there.
    async fn keep_model_switch(
        &self,
        id: &str,
        model: &str,
        spec: &str,
    ) -> Result<(), herald_store::StoreError> {
        let row = self.store.session(id.to_owned()).await?;
        let mut config = row
            .and_then(|r| r.model_config)
            .and_then(|c| serde_json::from_str::<serde_json::Map<String, Value>>(&c).ok())
            .unwrap_or_default();
        config.insert("model".into(), Value::String(model.to_owned()));
        config.insert(MODEL_SWITCH_KEY.into(), Value::String(spec.to_owned()));
        let config = Value::Object(config).to_string();
        self.store
            .set_model(id.to_owned(), model.to_owned(), config)
            .await?;
        Ok(())
    }

    /// The model a stored session was switched to, chosen again for its resumption;
    /// `None` when it never was, or the switch no longer resolves (then the
    /// configured model serves it, and the log says why).
    fn restored_model(&self, id: &str, model_config: Option<&str>) -> Option<Endpoint> {
        let config: serde_json::Map<String, Value> = serde_json::from_str(model_config?).ok()?;
        let spec = config.get(MODEL_SWITCH_KEY)?.as_str()?;
        match self.runtime.switch_model(spec) {
            Ok(endpoint) => Some(endpoint),
            Err(e) => {
                tracing::warn!(
                    session = id,
                    spec,
                    "the session's model switch is not restored: {e}"
                );
                None
            }
        }
    }

    /// Starts a turn of `session` on `input` as a run; its events are queued from now.
    pub fn start_run(
        self: &Arc<Self>,
        session: &Session,
        input: impl Into<UserInput>,
    ) -> Result<RunHandle, SessionError> {
        self.start_run_as(session, input, prompt::new_run_id(), None)
    }

    /// [`Host::start_run`] with a run id of the caller's (from [`prompt::new_run_id`]),
    /// and the model its status names (`None`: the session's model), e.g. the alias a
    /// request asked for.
    pub fn start_run_as(
        self: &Arc<Self>,
        session: &Session,
        input: impl Into<UserInput>,
        run_id: String,
        model_named: Option<String>,
    ) -> Result<RunHandle, SessionError> {
        let extras = RunExtras {
            run_id,
            model_named,
            ..RunExtras::default()
        };
        self.start_run_with(session, input, extras)
    }

    /// [`Host::start_run`] with what one request adds to its run: the client's own
    /// tools offered beside the session's, a provider `extra_body` for this run.
    pub fn start_run_with(
        self: &Arc<Self>,
        session: &Session,
        input: impl Into<UserInput>,
        extras: RunExtras,
    ) -> Result<RunHandle, SessionError> {
        let RunExtras {
            run_id,
            model_named,
            client_tools,
            tool_policy,
        } = extras;
        let run_id = if run_id.is_empty() {
            prompt::new_run_id()
        } else {
            run_id
        };
        let (history, endpoint) = {
            let mut s = session.state();
            if s.running.is_some() {
                return Err(SessionError::Busy(session.id().to_owned()));
            }
            s.running = Some(run_id.clone());
            let history: Vec<ChatMessage> = s.history.iter().map(|h| h.message.clone()).collect();
            (history, s.endpoint.clone())
        };
        let flow = Arc::new(herald_llm::flow::Flow::default());
        let mut agent = self.agent_for(session, endpoint.clone(), flow.clone());
        agent.config.tools.extend(client_tools);
        agent.config.tool_policy = tool_policy;
        let now = now_secs();
        let (status, _) = watch::channel(RunStatus::queued(
            run_id.clone(),
            session.id().to_owned(),
            model_named.unwrap_or_else(|| endpoint.model.clone()),
            now,
        ));
        let cell = Arc::new(RunCell::new(
            status,
            agent.handle(),
            session.0.pending.clone(),
            flow,
        ));
        let listed = match session.0.keep_runs {
            true => self.runs.insert(run_id.clone(), cell.clone()),
            false => Ok(()),
        };
        if let Err(cap) = listed {
            session.state().running = None;
            return Err(SessionError::TooManyRuns(cap));
        }
        self.live.track(&cell);
        let drive = Drive {
            host: self.clone(),
            session: session.clone(),
            cell: cell.clone(),
        };
        // A child of the caller's span (the worker's entry, the API request).
        let span = herald_trace::span!(
            "agent.run",
            run_id = %run_id,
            session_id = %session.id(),
            door = self.runtime.platform.name(),
        );
        let run = drive.run_guarded(agent, history, input.into());
        tokio::spawn(tracing::Instrument::instrument(run, span));
        Ok(RunHandle { cell })
    }
}

/// What one request adds to its run (all empty: nothing).
#[derive(Default)]
pub struct RunExtras {
    /// The run's id (empty: a new one).
    pub run_id: String,
    /// The model its status names (`None`: the session's).
    pub model_named: Option<String>,
    /// Functions the client runs itself, offered beside the session's tools.
    pub client_tools: Vec<Arc<dyn Tool>>,
    /// How the request asks for tools to be used (`tool_choice`, `parallel_tool_calls`).
    pub tool_policy: herald_agent::client_tool::ToolPolicy,
}

impl Host {
    /// The agent of one run, reading its provider only as fast as `flow`'s reader
    /// takes the output.
    fn agent_for(&self, session: &Session, endpoint: Endpoint, flow: Arc<Flow>) -> Agent {
        let s = &session.0;
        let rt = &self.runtime;
        Agent::with_client(
            AgentConfig {
                endpoint,
                retry: rt.retry.clone(),
                tools: session.tools_now(),
                max_iterations: s.max_iterations,
                cwd: s.cwd.clone(),
                approvals: s.approvals.clone(),
                system_prompt: match &s.ephemeral_system {
                    Some(extra) => format!("{}\n\n{extra}", s.system_prompt),
                    None => s.system_prompt.clone(),
                },
                plugins: with_observers(&rt.current_plugins(), &s.observers),
                session_id: s.id.clone(),
                platform: rt.platform.name().into(),
                sender_id: s.sender_id.clone(),
                prompter: s.prompter.clone(),
                provider: rt.provider.clone(),
                clarifier: s.clarifier.clone(),
                budget: s.tree_budget.clone().unwrap_or_else(|| {
                    let calls = rt.delegation.max_total_iterations;
                    Arc::new(herald_agent::TreeBudget::new(
                        calls.unwrap_or(s.max_iterations),
                        rt.delegation.max_total_children,
                    ))
                }),
                max_tool_calls_per_answer: rt.max_tool_calls_per_answer,
                tool_policy: Default::default(),
            },
            self.client.paced(flow),
        )
    }

    /// A live (or recently finished) run of this process.
    pub fn run(&self, run_id: &str) -> Option<RunHandle> {
        self.runs.get(run_id).map(|cell| RunHandle { cell })
    }

    /// Claims an `Idempotency-Key` against the other instances sharing the store.
    pub async fn claim_key(
        &self,
        key: &str,
        fingerprint: &str,
        window: std::time::Duration,
    ) -> Result<herald_store::sessions::KeyClaim, SessionError> {
        let window_ms = i64::try_from(window.as_millis()).unwrap_or(i64::MAX);
        Ok(self
            .store
            .claim_key(key.to_owned(), fingerprint.to_owned(), window_ms)
            .await?)
    }

    /// Gives back a key [`Host::claim_key`] gave this instance and that it will not
    /// answer.
    pub async fn release_key(&self, key: &str, fingerprint: &str) -> Result<(), SessionError> {
        Ok(self
            .store
            .release_key(key.to_owned(), fingerprint.to_owned())
            .await?)
    }

    /// Keeps the answer of a key [`Host::claim_key`] gave this instance.
    pub async fn keep_answer(
        &self,
        key: &str,
        fingerprint: &str,
        answer: herald_store::sessions::KeptAnswer,
    ) -> Result<(), SessionError> {
        Ok(self
            .store
            .keep_answer(key.to_owned(), fingerprint.to_owned(), answer)
            .await?)
    }

    /// A run's status: from memory while this process knows it, else as kept in
    /// `state.db` (a run of an earlier process).
    pub async fn run_status(&self, run_id: &str) -> Result<Option<RunStatus>, SessionError> {
        if let Some(cell) = self.runs.get(run_id) {
            return Ok(Some(cell.status.borrow().clone()));
        }
        let row = self.store.run(run_id.to_owned()).await?;
        Ok(row.map(RunStatus::from_row))
    }

    /// `session`'s history as stored now, with row ids.
    async fn history_of(&self, session: &Session) -> Result<Vec<Saved>, SessionError> {
        let rows = self.store.history(session.id().to_owned()).await?;
        Ok(saved_history(rows))
    }

    /// A run of this process by id: one the registry keeps, or any live one (a
    /// webhook run's too).
    pub fn run_anywhere(&self, run_id: &str) -> Option<RunHandle> {
        self.run(run_id)
            .or_else(|| self.live.live().into_iter().find(|r| r.id() == run_id))
    }

    /// This process's runs now: every live one (a webhook run's too) and those of the
    /// runs API finished lately, newest first.
    pub fn runs_now(&self) -> Vec<RunHandle> {
        let mut all = self.live.live();
        for cell in self.runs.all() {
            let id = cell.status.borrow().run_id.clone();
            if !all.iter().any(|r| r.id() == id) {
                all.push(RunHandle { cell });
            }
        }
        all.sort_by(|a, b| {
            let (a, b) = (a.status().created_at, b.status().created_at);
            b.total_cmp(&a)
        });
        all
    }

    /// How many runs are live.
    pub fn live_runs(&self) -> usize {
        self.runs.live()
    }

    /// Interrupts every live run (its running command's process group killed) and
    /// waits up to `within` for them to end, as a front door exits; those runs end
    /// `failed` with [`crate::stopping::STOPPED`]. Returns how many were interrupted.
    pub async fn stop_all(&self, within: std::time::Duration) -> usize {
        self.live.stop_all(within).await
    }
}

/// The text an API call's answer has when it is not what streamed (execution
/// middleware changed it); `streamed` gathers the call's deltas and is emptied at the
/// call's end.
fn corrected(streamed: &mut String, event: &AgentEvent) -> Option<String> {
    match event {
        AgentEvent::Progress(TurnProgress::MessageDelta(t)) => {
            streamed.push_str(t);
            None
        }
        AgentEvent::Progress(TurnProgress::MessageComplete { content, .. }) => {
            let sent = std::mem::take(streamed);
            let text = content.clone().unwrap_or_default();
            (!sent.is_empty() && sent != text).then_some(text)
        }
        _ => None,
    }
}

/// The runtime's plugins with a session's own observers told after its.
fn with_observers(plugins: &Plugins, own: &[Arc<dyn Observer>]) -> Plugins {
    let mut p = plugins.clone();
    p.observers.extend(own.iter().cloned());
    p
}

fn saved_history(rows: Vec<herald_store::sessions::StoredMessage>) -> Vec<Saved> {
    rows.into_iter()
        .filter_map(|r| {
            let row_id = Some(r.id);
            to_message(r).map(|message| Saved { row_id, message })
        })
        .collect()
}

/// One run's task: the turn, its events saved and passed on, its end kept.
#[derive(Clone)]
struct Drive {
    host: Arc<Host>,
    session: Session,
    cell: Arc<RunCell>,
}

impl Drive {
    /// Runs the turn; a panic in it still ends the run (failed) and frees the session.
    async fn run_guarded(self, agent: Agent, history: Vec<ChatMessage>, input: UserInput) {
        // One turn at a time per session, also across instances sharing the store.
        let hold = match self
            .host
            .store
            .hold_session(self.session.id().to_owned())
            .await
        {
            Ok(hold) => hold,
            Err(e) => {
                let failed = TurnResult {
                    failed: true,
                    error: Some(format!("the session could not be held for this turn: {e}")),
                    ..TurnResult::default()
                };
                return self.finish(failed).await;
            }
        };
        let history = self.fresh(history).await;
        let turn = std::panic::AssertUnwindSafe(self.clone().run(agent, history, input));
        if futures_util::FutureExt::catch_unwind(turn).await.is_err() {
            let run_id = self.cell.status.borrow().run_id.clone();
            tracing::error!(run = %run_id, "the run's task panicked; the run is failed");
            let failed = TurnResult {
                failed: true,
                error: Some("internal error: the run stopped unexpectedly".into()),
                ..TurnResult::default()
            };
            self.finish(failed).await;
        }
        drop(hold);
    }

    /// On a store other instances write too, the session's history as stored when
    /// another instance's turn added to it since this one was read.
    async fn fresh(&self, history: Vec<ChatMessage>) -> Vec<ChatMessage> {
        if !self.host.store.shared() {
            return history;
        }
        match self.host.history_of(&self.session).await {
            Ok(saved) if saved.len() > history.len() => {
                self.session.set_history(saved);
                let s = self.session.state();
                s.history.iter().map(|h| h.message.clone()).collect()
            }
            Ok(_) => history,
            Err(e) => {
                tracing::warn!(error = %e, "the session's stored history could not be read; the turn goes on with what it has");
                history
            }
        }
    }

    async fn run(self, agent: Agent, history: Vec<ChatMessage>, input: UserInput) {
        let (tx, mut rx) = mpsc::unbounded_channel::<Step>();
        self.cell.pending.set_current(&self.cell, tx.clone());
        self.cell.set_state(RunState::Running);
        self.keep_status();
        let turn = async move {
            let end = tx.clone();
            let mut sink = move |e: AgentEvent| {
                let _ = tx.send(Step::Agent(e));
            };
            let result = agent.run_turn(&history, input, &mut sink).await;
            let _ = end.send(Step::End);
            result
        };
        let forward = async {
            let mut streamed = String::new();
            while let Some(step) = rx.recv().await {
                match step {
                    Step::Agent(event) => {
                        if let Some(text) = corrected(&mut streamed, &event) {
                            self.cell.emit(RunEventKind::MessageCorrected(text));
                        }
                        self.pass_on(event).await
                    }
                    Step::Ask(kind) => self.ask(kind),
                    Step::End => break,
                }
            }
        };
        let (result, ()) = tokio::join!(turn, forward);
        self.finish(result).await;
    }

    /// A request put to the front door, unless it was answered (or gave up) already.
    fn ask(&self, kind: RunEventKind) {
        let (id, approval) = match &kind {
            RunEventKind::ApprovalRequested { request_id, .. }
            | RunEventKind::EditApprovalRequested { request_id, .. } => (request_id, true),
            RunEventKind::ClarifyRequested { request_id, .. }
            | RunEventKind::PromptRequested { request_id, .. } => (request_id, false),
            RunEventKind::PromptExpired { .. } => return self.cell.emit(kind),
            _ => return,
        };
        if !self.cell.pending.is_waiting(id) {
            return;
        }
        if approval {
            self.cell.set_state(RunState::WaitingForApproval);
        }
        self.cell.emit(kind);
    }

    async fn pass_on(&self, event: AgentEvent) {
        let kind = match event {
            AgentEvent::MessageAppended(message) => {
                let row_id = self.keep(&message).await;
                self.session.push(Saved {
                    row_id,
                    message: message.clone(),
                });
                RunEventKind::MessageSaved { row_id, message }
            }
            AgentEvent::Progress(progress) => RunEventKind::Progress(progress),
            // The end comes from the turn's result; requests from the answer table.
            AgentEvent::TurnCompleted { .. }
            | AgentEvent::TurnFailed { .. }
            | AgentEvent::ApprovalRequested { .. }
            | AgentEvent::ClarifyRequested { .. } => return,
        };
        self.cell.emit(kind);
    }

    /// Keeps the final status, frees the session, then tells the watchers: whoever
    /// sees the run finished can start the next turn and read the status from disk.
    /// Saves a message; its row id, when someone listens for it (a run nobody watches
    /// does not wait for its writes: they are committed in order before the run ends).
    async fn keep(&self, message: &ChatMessage) -> Option<i64> {
        let (session, row) = (self.session.id().to_owned(), message_row(message));
        let kept = if self.cell.unread() {
            self.host.store.append_detached(session, row).map(|()| None)
        } else {
            self.host.store.append(session, row).await.map(Some)
        };
        kept.unwrap_or_else(|e| {
            tracing::warn!(session = %self.session.id(), error = %e, "a message could not be kept");
            None
        })
    }

    async fn finish(&self, result: TurnResult) {
        let (state, error) = match outcome(&result) {
            (RunState::Cancelled, _) if self.host.live.is_stopping() => {
                (RunState::Failed, Some(crate::stopping::STOPPED.to_owned()))
            }
            other => other,
        };
        self.cell.pending.cancel_all();
        let mut last = self.cell.status.borrow().clone();
        last.state = state;
        last.updated_at = now_secs();
        last.output = (state == RunState::Completed).then(|| result.final_response.clone());
        last.error = error;
        last.pending_steer = result.pending_steer.clone();
        last.api_calls = result.api_calls;
        last.input_tokens = result.usage.prompt_tokens;
        last.output_tokens = result.usage.completion_tokens;
        last.retryable = result.failed && result.error_retryable;
        last.partial = result.partial;
        last.last_event = Some(RunEventKind::Finished(last.clone()).name().to_owned());
        if state == RunState::Failed {
            tracing::warn!(run = %last.run_id, session = %last.session_id, retryable = last.retryable,
                error = last.error.as_deref().unwrap_or_default(), "the run failed");
        }
        let took = (last.updated_at - last.created_at).max(0.0);
        herald_metrics::get().agent.run_ended(
            self.host.runtime.platform.name(),
            state.as_str(),
            std::time::Duration::try_from_secs_f64(took).unwrap_or_default(),
        );
        let session = self.session.id().to_owned();
        let tokens = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let usage = (
            i64::from(result.api_calls),
            tokens(last.input_tokens),
            tokens(last.output_tokens),
        );
        let run = self.session.0.keep_runs.then(|| last.row());
        if let Err(e) = self.host.store.finish_turn(session, usage, run).await {
            tracing::warn!(run = %last.run_id, error = %e, "the turn's usage and status were not kept");
        }
        self.session.add_cost(result.usage.cost.unwrap_or(0.0));
        self.session.state().running = None;
        self.cell.status.send_replace(last.clone());
        self.cell.emit(RunEventKind::Finished(last));
    }

    /// Keeps the run's status as it starts, without waiting for the write: it is
    /// committed before the turn's messages and its end, in the same batch when they
    /// come together (a crash before it leaves no row: the run never ran).
    fn keep_status(&self) {
        if !self.session.0.keep_runs {
            return;
        }
        let row = self.cell.status.borrow().row();
        if let Err(e) = self.host.store.save_run_detached(row) {
            tracing::warn!(run = %self.cell.status.borrow().run_id, error = %e, "run status not kept");
        }
    }
}

/// How a turn's result ends its run.
fn outcome(r: &TurnResult) -> (RunState, Option<String>) {
    if r.interrupted {
        return (RunState::Cancelled, None);
    }
    if r.completed && !r.failed && !r.final_response.trim().is_empty() {
        return (RunState::Completed, None);
    }
    let error = r
        .error
        .clone()
        .unwrap_or_else(|| "the turn ended without an answer".into());
    (RunState::Failed, Some(error))
}
