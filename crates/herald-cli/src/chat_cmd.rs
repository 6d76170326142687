//! `herald chat`: the agent core's first front door, with Hermes's flags. `-q` runs one
//! turn and exits; without it, a line-based session reads prompts from stdin.

use crate::chat_status::StatusLine;
use anyhow::Context;
use herald_app::HostFor;
use herald_config::Home;
use herald_session::TurnProgress;
use herald_session::{
    Answers, Approver, Conversation, ConversationEvent, Decision, Host, ModelChoice, Op, OpError,
    Opening, Outcome, Platform, Reply, RunEventKind, RunState, RunStatus, Runtime, SessionError,
    SessionOptions, UserInput, preview,
};
use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(clap::Args, Debug)]
pub struct ChatArgs {
    /// One turn with this prompt, then exit.
    #[arg(short = 'q', long)]
    query: Option<String>,
    /// stdout carries the final answer and nothing else.
    #[arg(short = 'Q', long)]
    quiet: bool,
    /// Toolsets, comma-separated (default: hermes-cli).
    #[arg(short = 't', long, value_delimiter = ',')]
    toolsets: Option<Vec<String>>,
    /// Model: `name`, `provider:name` or `custom:<name>:<model>`.
    #[arg(short = 'm', long)]
    model: Option<String>,
    /// Provider: openrouter, custom, a `providers:` key, or `custom:<name>`.
    #[arg(long)]
    provider: Option<String>,
    /// Approve every command except the hard-line floor and approvals.deny.
    #[arg(long)]
    yolo: bool,
    /// Tool-using steps per turn (overrides agent.max_turns).
    #[arg(long)]
    max_turns: Option<u32>,
    /// Skills to preload, comma-separated (repeatable).
    #[arg(short = 's', long, value_delimiter = ',')]
    skills: Vec<String>,
    /// Resume a session by id.
    #[arg(short = 'r', long, conflicts_with = "continue_last")]
    resume: Option<String>,
    /// Continue the most recent CLI session.
    #[arg(short = 'c', long = "continue")]
    continue_last: bool,
}

/// Reads lines for the session and for approval prompts, one reader at a time: with
/// line editing and history on a terminal, plain lines otherwise.
#[derive(Clone)]
struct LineInput {
    editor: Option<Arc<std::sync::Mutex<rustyline::DefaultEditor>>>,
    history_file: PathBuf,
}

impl LineInput {
    fn new(home: &Home) -> LineInput {
        let history_file = home.root().join(".chat_history");
        let editor = (std::io::stdin().is_terminal())
            .then(|| rustyline::DefaultEditor::new().ok())
            .flatten()
            .map(|mut ed| {
                let _ = ed.load_history(&history_file);
                Arc::new(std::sync::Mutex::new(ed))
            });
        LineInput {
            editor,
            history_file,
        }
    }

    /// A line, or `None` at end of input (Ctrl-C counts as an empty line).
    async fn read(&self, prompt: String) -> Option<String> {
        match self.read_input(prompt).await {
            Input::Line(line) => Some(line),
            Input::Interrupted => Some(String::new()),
            Input::End => None,
        }
    }

    /// What the user did at the prompt.
    async fn read_input(&self, prompt: String) -> Input {
        let me = self.clone();
        tokio::task::spawn_blocking(move || me.read_blocking(&prompt))
            .await
            .unwrap_or(Input::End)
    }

    fn read_blocking(&self, prompt: &str) -> Input {
        match &self.editor {
            Some(ed) => {
                let Ok(mut ed) = ed.lock() else {
                    return Input::End;
                };
                match ed.readline(prompt) {
                    Ok(line) => {
                        if !line.trim().is_empty() {
                            let _ = ed.add_history_entry(line.as_str());
                            let _ = ed.save_history(&self.history_file);
                        }
                        Input::Line(line)
                    }
                    Err(rustyline::error::ReadlineError::Interrupted) => Input::Interrupted,
                    Err(_) => Input::End,
                }
            }
            None => {
                eprint!("{prompt}");
                let mut line = String::new();
                match std::io::stdin().lock().read_line(&mut line) {
                    Ok(0) | Err(_) => Input::End,
                    Ok(_) => Input::Line(line.trim_end_matches(['\r', '\n']).to_owned()),
                }
            }
        }
    }
}

/// One read at the prompt.
enum Input {
    Line(String),
    /// Ctrl-C at the prompt.
    Interrupted,
    /// Ctrl-D or the end of piped input.
    End,
}

/// Exit status after SIGINT/SIGTERM.
const EXIT_INTERRUPTED: u8 = 130;

/// Puts the model's `clarify` questions to the human on the terminal.
struct TerminalClarifier(LineInput, StatusLine);

impl herald_session::Clarifier for TerminalClarifier {
    fn ask<'a>(
        &'a self,
        request: herald_session::ClarifyRequest<'a>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<String>> + Send + 'a>> {
        let (question, choices) = (request.question, request.choices);
        Box::pin(async move {
            self.1.hide();
            eprintln!("\n? {question}");
            for (i, c) in choices.iter().enumerate() {
                eprintln!("  {}. {c}", i + 1);
            }
            let answer = self.0.read("answer: ".to_owned()).await?;
            let answer = answer.trim().to_owned();
            // A number picks a listed choice.
            let picked = answer
                .parse::<usize>()
                .ok()
                .and_then(|n| choices.get(n.wrapping_sub(1)))
                .cloned();
            Some(picked.unwrap_or(answer)).filter(|a| !a.is_empty())
        })
    }
}

/// Asks on the terminal.
struct TerminalApprover(LineInput, StatusLine);

impl Approver for TerminalApprover {
    fn ask<'a>(
        &'a self,
        request: herald_session::ApprovalRequest<'a>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Decision> + Send + 'a>> {
        Box::pin(async move {
            self.1.hide();
            eprintln!(
                "\n⚠ approval needed ({}):\n  {}",
                request.reason, request.command
            );
            let answer = self
                .0
                .read("[o]nce / [s]ession / [a]lways / [d]eny? ".to_owned())
                .await
                .unwrap_or_default();
            match answer.trim().to_ascii_lowercase().as_str() {
                "o" | "y" | "yes" => Decision::Once,
                "s" => Decision::Session,
                "a" => Decision::Always,
                other => Decision::parse(other).unwrap_or(Decision::Deny),
            }
        })
    }
}

pub fn run(home: &Home, args: ChatArgs) -> anyhow::Result<ExitCode> {
    let tokio_rt = herald_app::runtime().context("cannot start the async runtime")?;
    tokio_rt.block_on(async {
        let door = HostFor {
            home,
            platform: Platform::Cli,
            choice: ModelChoice {
                model: args.model.as_deref(),
                provider: args.provider.as_deref(),
            },
            reload_on_sighup: false,
            toolsets: args.toolsets.clone(),
        };
        let opened = match herald_app::open_interactive(door).await {
            Ok(o) => o,
            Err(e) => {
                eprintln!("herald: {e}");
                return Ok(ExitCode::FAILURE);
            }
        };
        for u in &opened.unknown_toolsets {
            eprintln!("herald: warning: unknown toolset `{u}` ignored");
        }
        let Some(preloaded) = preload_skills(home, opened.host.runtime(), &args.skills) else {
            opened.finish().await;
            return Ok(ExitCode::FAILURE);
        };
        let chat = Chat {
            host: opened.host.clone(),
            tool_names: opened.tool_names.clone(),
            toolsets: args.toolsets.clone(),
            preloaded,
            cwd: std::env::current_dir().ok(),
            max_turns: args.max_turns,
            yolo: args.yolo,
            input: LineInput::new(home),
            status: StatusLine::start(!args.quiet && std::io::stderr().is_terminal()),
            quiet: args.quiet,
        };
        let code = chat
            .start(args.query, args.resume, args.continue_last)
            .await;
        opened.stop_runs(STOP_WITHIN).await;
        opened.finish().await;
        code
    })
}

/// How long a turn left running gets to end when `herald chat` leaves.
const STOP_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);

/// The `-s` skills' bodies; `None` (after saying so) when none of those asked for exist.
fn preload_skills(
    home: &Home,
    runtime: &Runtime,
    names: &[String],
) -> Option<Vec<(String, String)>> {
    let mut preloaded = Vec::new();
    let mut missing = Vec::new();
    for name in names.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        match runtime.skills.load(name) {
            Some(body) => preloaded.push((name.to_owned(), body)),
            None => missing.push(name.to_owned()),
        }
    }
    for m in &missing {
        eprintln!(
            "herald: warning: skill `{m}` not found under {}",
            home.skills_dir().display()
        );
    }
    if !missing.is_empty() && preloaded.is_empty() {
        eprintln!("herald: none of the requested skills exist; nothing was sent to the model");
        return None;
    }
    Some(preloaded)
}

/// A chat: the session host and how this terminal opens sessions on it.
struct Chat {
    host: Arc<Host>,
    tool_names: Vec<String>,
    /// The `-t` toolsets, when given (they also choose the MCP servers).
    toolsets: Option<Vec<String>>,
    preloaded: Vec<(String, String)>,
    cwd: Option<PathBuf>,
    max_turns: Option<u32>,
    yolo: bool,
    input: LineInput,
    status: StatusLine,
    quiet: bool,
}

impl Chat {
    /// A session's options: a human answers on a terminal; piped input has nobody to
    /// ask. Each session gets its own approval state.
    fn options(&self) -> SessionOptions {
        let answers = if std::io::stdin().is_terminal() {
            Answers::Local {
                approver: Box::new(TerminalApprover(self.input.clone(), self.status.clone())),
                clarifier: Some(Arc::new(TerminalClarifier(
                    self.input.clone(),
                    self.status.clone(),
                ))),
            }
        } else {
            Answers::Nobody
        };
        let mut options = SessionOptions::new("cli", self.tool_names.clone(), answers);
        options.preloaded_skills = self.preloaded.clone();
        options.cwd = self.host.runtime().cwd.clone().or_else(|| self.cwd.clone());
        options.max_iterations = self.max_turns;
        options.yolo = self.yolo;
        if let (Some(asked), Some(pool)) = (&self.toolsets, self.host.runtime().mcp()) {
            options.mcp = Some(herald_session::McpGrant::interactive(asked, &pool));
        }
        options
    }

    async fn start(
        self,
        query: Option<String>,
        resume: Option<String>,
        continue_last: bool,
    ) -> anyhow::Result<ExitCode> {
        let resume_id = match (resume, continue_last) {
            (Some(id), _) => Some(id),
            (None, true) => match self.host.latest_session("cli").await? {
                Some(id) => Some(id),
                None => {
                    eprintln!("herald: there is no earlier CLI session to continue");
                    return Ok(ExitCode::FAILURE);
                }
            },
            (None, false) => None,
        };
        let opened = match &resume_id {
            Some(id) => self.host.resume_session(id, self.options()).await,
            None => self.host.open_session(self.options()).await,
        };
        let session = match opened {
            Ok(s) => s,
            Err(SessionError::NotFound(id)) => {
                eprintln!("herald: no session with id {id}");
                return Ok(ExitCode::FAILURE);
            }
            Err(e) => return Err(e.into()),
        };
        eprintln!("session_id: {}", session.id());
        let conversation = Conversation::single(self.host.clone(), session);
        let code = match query {
            Some(q) => self.turns(&conversation, q).await,
            None => self.interactive(&conversation).await,
        };
        let last = conversation.session().id().to_owned();
        // The session is over for good when herald chat leaves (Hermes: at exit).
        herald_session::finalize_session(&self.host, &last, "shutdown").await;
        code
    }

    /// Runs a turn on `prompt` and then the prompts queued behind it, printing as they
    /// go; the exit code of the last. Ctrl-C (or SIGTERM) stops the running turn.
    async fn turns(
        &self,
        conversation: &Conversation,
        prompt: impl Into<UserInput>,
    ) -> anyhow::Result<ExitCode> {
        let model = conversation.model();
        self.status.show(model.clone());
        let ours = match conversation.submit(Op::Prompt(prompt.into())).await? {
            Outcome::Started(run) => run.id(),
            other => anyhow::bail!("internal: a prompt was answered with {other:?}"),
        };
        let mut stream = conversation.listen().await;
        let mut shown = Shown::default();
        let mut code = ExitCode::SUCCESS;
        let signal = stop_signal();
        tokio::pin!(signal);
        loop {
            tokio::select! {
                event = stream.next_event() => match event {
                    None => break,
                    Some(ConversationEvent::TurnStarted { run, .. }) => {
                        shown = Shown { reached: shown.reached || run.id() == ours, ..Shown::default() };
                        signal.set(stop_signal());
                        self.status.show(model.clone());
                    }
                    Some(_) if !shown.reached => {}
                    Some(ConversationEvent::Run(e)) => match e.kind {
                        RunEventKind::Finished(end) => {
                            self.status.hide();
                            code = self.report(&end, shown.signalled, shown.printed_text);
                        }
                        kind => shown.printed_text |= self.show(kind, &model),
                    },
                    Some(ConversationEvent::TurnFailed(message)) => {
                        eprintln!("herald: error: {message}");
                        code = ExitCode::FAILURE;
                    }
                    Some(ConversationEvent::Idle) => break,
                },
                () = &mut signal, if !shown.signalled => {
                    shown.signalled = true;
                    conversation.submit(Op::Interrupt).await?;
                }
            }
        }
        self.status.hide();
        Ok(code)
    }

    /// Shows one event; true when it printed answer text.
    fn show(&self, kind: RunEventKind, model: &str) -> bool {
        if self.quiet {
            return false;
        }
        match kind {
            RunEventKind::Progress(TurnProgress::MessageDelta(t)) => {
                self.status.hide();
                out!("{t}");
                return true;
            }
            // A plugin changed the streamed answer: its text follows what streamed.
            RunEventKind::MessageCorrected(t) => {
                self.status.hide();
                out!("\n\n{t}");
                return true;
            }
            RunEventKind::Progress(TurnProgress::ToolStarted {
                name, arguments, ..
            }) => {
                self.status.hide();
                let args = preview::tool_preview(&name, &arguments, 120).unwrap_or_default();
                eprintln!("\n⚙ {name} {args}");
                self.status.show(format!("running {name}"));
            }
            RunEventKind::Progress(TurnProgress::ToolCompleted { name, is_error, .. }) => {
                self.status.hide();
                eprintln!("  {} {name}", if is_error { "✗" } else { "✓" });
                self.status.show(model.to_owned());
            }
            RunEventKind::Progress(TurnProgress::Subagent(e)) => self.show_subagent(&e),
            _ => {}
        }
        false
    }

    /// A subagent's start, tool calls and end, indented under `delegate_task`.
    fn show_subagent(&self, e: &herald_session::SubagentEvent) {
        use herald_session::SubagentKind;
        let who = format!("  🔀 [{}]", e.task_index + 1);
        let line = match e.kind {
            SubagentKind::Start => format!("{who} {}", e.goal),
            SubagentKind::Tool => {
                let preview = preview::one_line(e.text.as_deref().unwrap_or(""), 120);
                format!(
                    "{who} ⚙ {} {preview}",
                    e.tool_name.as_deref().unwrap_or("tool")
                )
            }
            SubagentKind::Complete => format!("{who} {}", e.status.as_deref().unwrap_or("done")),
            SubagentKind::Thinking | SubagentKind::Progress => return,
        };
        self.status.hide();
        eprintln!("{line}");
        self.status.show("delegate_task".to_owned());
    }

    /// Prints how the turn ended; its exit code.
    fn report(&self, end: &RunStatus, signalled: bool, printed_text: bool) -> ExitCode {
        if signalled || end.state == RunState::Cancelled {
            eprintln!("\nherald: interrupted");
            return ExitCode::from(EXIT_INTERRUPTED);
        }
        let answer = end.output.as_deref().unwrap_or_default();
        if end.state == RunState::Completed {
            if self.quiet {
                outln!("{answer}");
            } else if printed_text {
                outln!();
            } else {
                outln!("{answer}");
            }
        } else if printed_text && !self.quiet {
            outln!();
        }
        if let Some(p) = &end.pending_steer {
            eprintln!("herald: note: this steer was not delivered: {p}");
        }
        if end.state == RunState::Completed && !end.partial {
            return ExitCode::SUCCESS;
        }
        let error = end.error.as_deref().unwrap_or("the turn did not complete");
        eprintln!("herald: error: {error}");
        ExitCode::FAILURE
    }

    /// An interactive session: each line is a turn or a slash command (`/help` lists
    /// them). Ctrl-C stops a running turn and keeps what it produced; at an empty
    /// prompt, Ctrl-C twice or Ctrl-D leaves. Line editing and history on a terminal.
    async fn interactive(&self, conversation: &Conversation) -> anyhow::Result<ExitCode> {
        eprintln!("herald chat — /help for commands, /quit to leave");
        let ctrl_c = CtrlC::watch();
        loop {
            let line = match self.input.read_input("› ".to_owned()).await {
                Input::End => return Ok(ExitCode::SUCCESS),
                Input::Interrupted => {
                    ctrl_c.at_prompt();
                    continue;
                }
                Input::Line(line) => line.trim().to_owned(),
            };
            ctrl_c.reset();
            if line.is_empty() {
                continue;
            }
            let prompt = match self.command(&line, conversation).await? {
                Next::Send(prompt) => prompt,
                Next::Stay => continue,
                Next::Quit => return Ok(ExitCode::SUCCESS),
            };
            ctrl_c.turn_running(true);
            let turns = self.turns(conversation, prompt).await;
            ctrl_c.turn_running(false);
            turns?;
        }
    }

    /// Answers a slash command from the session's command table, or gives the text to
    /// send to the model.
    async fn command(&self, line: &str, conversation: &Conversation) -> anyhow::Result<Next> {
        if !line.starts_with('/') {
            return Ok(Next::Send(line.to_owned()));
        }
        let reply = match conversation.submit(Op::Command(line.to_owned())).await {
            Ok(Outcome::Reply(reply)) => reply,
            Ok(_) => return Ok(Next::Stay),
            Err(e) => {
                eprintln!("herald: {e}");
                return Ok(Next::Stay);
            }
        };
        match reply {
            Reply::NotACommand => return Ok(Next::Send(line.to_owned())),
            Reply::Send(message) => return Ok(Next::Send(message)),
            Reply::Quit => return Ok(Next::Quit),
            Reply::Output(text) => eprintln!("{text}"),
            Reply::SetHome => eprintln!("herald: /sethome is a chat platform's command"),
            Reply::ModelSwitched(model) => {
                eprintln!("(model switched to {model} for this session)")
            }
            Reply::Unknown { word, help } => {
                eprintln!("herald: unknown command /{word} (nothing was sent to the model)\n{help}")
            }
            Reply::New => {
                let fresh = Op::New(Opening(self.options()));
                if let Outcome::Switched { id, .. } = conversation.submit(fresh).await? {
                    eprintln!("session_id: {id}");
                }
            }
            Reply::Resume(id) => {
                let resume = Op::Resume(id.clone(), Opening(self.options()));
                match conversation.submit(resume).await {
                    Ok(Outcome::Switched { id, messages }) => {
                        eprintln!("session_id: {id} ({messages} messages)")
                    }
                    Ok(_) => {}
                    Err(OpError::Session(SessionError::NotFound(_))) => {
                        eprintln!("herald: no session with id {id}")
                    }
                    Err(e) => eprintln!("herald: cannot read the session store: {e}"),
                }
            }
        }
        Ok(Next::Stay)
    }
}

/// What the turns of one prompt have shown so far.
#[derive(Default)]
struct Shown {
    /// The prompt's own turn has started (what came before was not this prompt's).
    reached: bool,
    printed_text: bool,
    signalled: bool,
}

/// What a line at the prompt leads to.
enum Next {
    /// A turn with this text.
    Send(String),
    /// Answered here; read the next line.
    Stay,
    Quit,
}

/// Resolves at SIGINT or SIGTERM.
async fn stop_signal() {
    #[cfg(unix)]
    {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending::<()>().await } } => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Ctrl-C in an interactive session at an empty prompt: the second one leaves (during a
/// turn, the turn's own handler stops the turn). A terminal in raw mode reports Ctrl-C as
/// input ([`Input::Interrupted`]); a plain one sends SIGINT, which this watches for the
/// whole session.
struct CtrlC {
    state: Arc<CtrlCState>,
}

#[derive(Default)]
struct CtrlCState {
    turn_running: std::sync::atomic::AtomicBool,
    at_prompt: std::sync::atomic::AtomicU32,
}

impl CtrlC {
    /// Watches SIGINT between turns; during a turn the turn's own handler stops it (a
    /// second interrupt from here could outlive the turn and stop the next one).
    fn watch() -> CtrlC {
        let state = Arc::new(CtrlCState::default());
        let watched = state.clone();
        tokio::spawn(async move {
            while tokio::signal::ctrl_c().await.is_ok() {
                let running = watched
                    .turn_running
                    .load(std::sync::atomic::Ordering::SeqCst);
                if !running {
                    CtrlC::count(&watched);
                }
            }
        });
        CtrlC { state }
    }

    fn at_prompt(&self) {
        CtrlC::count(&self.state);
    }

    fn count(state: &CtrlCState) {
        let n = state
            .at_prompt
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if n >= 1 {
            eprintln!();
            std::process::exit(0);
        }
        eprintln!("\n(Ctrl-C again or Ctrl-D to leave)");
    }

    fn reset(&self) {
        self.state
            .at_prompt
            .store(0, std::sync::atomic::Ordering::SeqCst);
    }

    fn turn_running(&self, running: bool) {
        self.state
            .turn_running
            .store(running, std::sync::atomic::Ordering::SeqCst);
    }
}
