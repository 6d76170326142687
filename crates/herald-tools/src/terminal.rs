//! `terminal`: runs a shell command locally after the approval pipeline, with a time
//! limit that kills the whole process group, and output capped head + tail.

use crate::error_result;
use crate::sudo::Password;
use herald_agent::approval::Verdict;
use herald_agent::tool::{MAX_RESULT_CHARS, Tool, ToolContext, ToolFuture, cap_result};
use serde_json::{Value, json};
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// Default and largest foreground time limits.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(180);
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);

/// `jobs` is shared with the `process` tool; `default_timeout` is `terminal.timeout`.
pub struct Terminal {
    pub jobs: super::process::Jobs,
    pub default_timeout: Duration,
}

impl Tool for Terminal {
    fn name(&self) -> &str {
        "terminal"
    }
    fn description(&self) -> &str {
        "Run a shell command (bash) on the local machine and return its output and exit code. Dangerous commands need approval."
    }
    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The shell command to run."},
                "timeout": {"type": "integer", "minimum": 1, "description": "Seconds before the command is killed (default 180, at most 600)."},
                "workdir": {"type": "string", "description": "Absolute working directory."},
                "background": {"type": "boolean", "description": "Start in the background; manage it with the process tool."}
            },
            "required": ["command"]
        })
    }
    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let Some(command) = args["command"].as_str().filter(|c| !c.trim().is_empty()) else {
                return error_result("`command` is required");
            };
            if crate::sudo::guesses_password(command) {
                let why = "blocked: the command feeds sudo a password itself (sudo -S); set SUDO_PASSWORD in herald's .env for sudo";
                return json!({"output": "", "exit_code": null, "error": why, "status": "blocked"})
                    .to_string();
            }
            let on_ask = |reason: &str| {
                ctx.notify(herald_agent::AgentEvent::ApprovalRequested {
                    call_id: ctx.call_id.clone(),
                    command: command.to_owned(),
                    reason: reason.to_owned(),
                })
            };
            if let Verdict::Blocked(why) = ctx.approve(command, on_ask).await {
                return json!({"output": "", "exit_code": null, "error": why, "status": "blocked"})
                    .to_string();
            }
            let timeout = args["timeout"]
                .as_u64()
                .map(Duration::from_secs)
                .unwrap_or(self.default_timeout)
                .clamp(Duration::from_secs(1), MAX_TIMEOUT);
            let cwd = args["workdir"]
                .as_str()
                .map(std::path::PathBuf::from)
                .filter(|p| p.is_absolute())
                .unwrap_or_else(|| ctx.cwd.clone());
            if args["background"].as_bool() == Some(true) {
                return match self.jobs.start(command, &cwd, &ctx.session_id) {
                    Ok(id) => json!({"session_id": id, "status": "started", "note": "use the process tool to poll, wait for or kill it"}).to_string(),
                    Err(e) => error_result(e),
                };
            }
            run_command(command, &cwd, timeout, ctx).await
        })
    }
}

/// After a command with sudo: a refused password given by the user is forgotten (the
/// next sudo asks again); a password nobody gave earns the tip.
fn sudo_outcome(output: &mut String, password: &Password, ctx: &ToolContext) {
    // A program that read the password line (`head -1; sudo x`) must not show it.
    if let Password::Configured(p) | Password::Given(p) = password
        && !p.is_empty()
    {
        *output = output.replace(p.as_str(), "***");
    }
    let lower = output.to_lowercase();
    match password {
        Password::Given(_) if crate::sudo::refused(output) => {
            if let Some(p) = &ctx.prompter {
                p.forget_sudo();
            }
            output.push_str("\n\nsudo refused the password; the next sudo command asks again.");
        }
        Password::None
            if lower.contains("password is required") || lower.contains("terminal is required") =>
        {
            output.push_str(crate::sudo::TIP);
        }
        _ => {}
    }
}

/// `bash -c command` in its own process group, output piped, killed when dropped.
pub fn spawn_bash(command: &str, cwd: &std::path::Path) -> std::io::Result<tokio::process::Child> {
    herald_process::command("bash")
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .spawn()
}

/// `command` as it runs, what its standard input gets (each real `sudo` reads the
/// password: see [`crate::sudo`]), where the password came from, and whether the
/// command has a real sudo at all.
async fn with_sudo(command: &str, ctx: &ToolContext) -> (String, Option<String>, Password, bool) {
    let (rewritten, count) = crate::sudo::rewrite(command);
    if count == 0 {
        return (command.to_owned(), None, Password::None, false);
    }
    let found = crate::sudo::password(ctx).await;
    let input = match &found {
        Password::None => return (command.to_owned(), None, found, true),
        Password::Configured(p) | Password::Given(p) => format!("{p}\n").repeat(count),
    };
    (rewritten, Some(input), found, true)
}

/// Starts `command`, writing `input` (if any) to its standard input and closing it.
fn start(
    command: &str,
    cwd: &std::path::Path,
    input: Option<String>,
) -> std::io::Result<tokio::process::Child> {
    let Some(input) = input else {
        return spawn_bash(command, cwd);
    };
    let mut child = herald_process::command("bash")
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .stdin(std::process::Stdio::piped())
        .spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            let _ = stdin.write_all(input.as_bytes()).await;
        });
    }
    Ok(child)
}

async fn run_command(
    command: &str,
    cwd: &std::path::Path,
    timeout: Duration,
    ctx: &ToolContext,
) -> String {
    let (command, input, password, sudo_used) = with_sudo(command, ctx).await;
    if ctx.is_interrupted() {
        // The turn was interrupted while sudo's password was asked for.
        return json!({"output": "", "exit_code": null, "error": "cancelled: the turn was interrupted", "status": "cancelled"}).to_string();
    }
    let mut child = match start(&command, cwd, input) {
        Ok(c) => c,
        Err(e) => return error_result(format!("cannot start bash: {e}")),
    };
    let pid = child.id();
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let collect = async {
        let mut o = Vec::new();
        let mut e = Vec::new();
        let read_o = async {
            if let Some(s) = out.as_mut() {
                let _ = s
                    .take(8 * MAX_RESULT_CHARS as u64)
                    .read_to_end(&mut o)
                    .await;
            }
        };
        let read_e = async {
            if let Some(s) = err.as_mut() {
                let _ = s.take(MAX_RESULT_CHARS as u64).read_to_end(&mut e).await;
            }
        };
        let (_, _, status) = tokio::join!(read_o, read_e, child.wait());
        (o, e, status)
    };
    let interrupted = async {
        while !ctx.is_interrupted() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let outcome = tokio::select! {
        r = tokio::time::timeout(timeout, collect) => r.ok(),
        () = interrupted => {
            herald_process::kill_group(pid);
            return json!({"output": "", "exit_code": null, "error": "cancelled: the turn was interrupted", "status": "cancelled"}).to_string();
        }
    };
    herald_process::kill_group(pid);
    let Some((o, e, status)) = outcome else {
        return json!({"output": "", "exit_code": null, "error": format!("timed out after {}s and was killed", timeout.as_secs()), "status": "timeout"}).to_string();
    };
    let mut output = String::from_utf8_lossy(&o).into_owned();
    let stderr = String::from_utf8_lossy(&e);
    if !stderr.is_empty() {
        if !output.is_empty() && !output.ends_with('\n') {
            output.push('\n');
        }
        output.push_str(&stderr);
    }
    if sudo_used {
        sudo_outcome(&mut output, &password, ctx);
    }
    let output = cap_result(output, MAX_RESULT_CHARS);
    match status {
        Ok(s) => {
            json!({"output": output, "exit_code": s.code(), "error": null, "status": "completed"})
                .to_string()
        }
        Err(e) => error_result(format!("waiting for the command failed: {e}")),
    }
}
