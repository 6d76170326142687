//! The rest of the catalogue (rpc-gateway.md §5): `cli.exec`, image attachments, and
//! the answers of features herald does not have (a clipboard).

use crate::errors::RpcError;
use crate::gateway::Gateway;
use crate::params::{self, required};
use crate::results::{Attached, CliRun, McpReloaded, Updated};
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

/// Subcommands `cli.exec` refuses: they serve, prompt or take the terminal.
const BLOCKED: [&[&str]; 5] = [
    &["gateway", "run"],
    &["gateway", "setup"],
    &["rpc"],
    &["setup"],
    &["chat"],
];
const MAX_OUTPUT: usize = 64 * 1024;
/// Images attached to one prompt at most (each read whole when the prompt is sent).
pub const MAX_ATTACHED: usize = 16;

/// The global options that take a value (skipped with it to find the subcommand).
const VALUED: [&str; 2] = ["--home", "--log-format"];

fn blocked(argv: &[String]) -> bool {
    let mut words: Vec<&str> = Vec::new();
    let mut args = argv.iter().map(String::as_str);
    while let Some(a) = args.next() {
        if VALUED.contains(&a) {
            args.next();
        } else if !a.starts_with('-') {
            words.push(a);
        }
    }
    let one_shot_chat = argv.iter().any(|a| a == "-q" || a == "--query");
    BLOCKED.iter().any(|b| words.starts_with(b))
        && !(words.first() == Some(&"chat") && one_shot_chat)
}

/// `cli.exec {argv, timeout?}`: runs `herald ARGV` on this home; `{blocked, code, output}`.
pub async fn cli_exec(p: params::CliExec) -> Result<CliRun, RpcError> {
    let argv: Vec<String> = match &p.argv {
        Some(Value::Array(a)) if !a.is_empty() => a
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<_>>()
            .ok_or_else(|| RpcError::new(4003, "argv must be a list of strings"))?,
        _ => {
            return Err(RpcError::new(
                4003,
                "argv must be a non-empty list of strings",
            ));
        }
    };
    if blocked(&argv) {
        return Ok(CliRun {
            blocked: true,
            code: None,
            output: "this command serves or prompts; run it in a terminal".into(),
        });
    }
    let exe =
        std::env::current_exe().map_err(|e| RpcError::new(RpcError::CLI_FAILED, e.to_string()))?;
    let limit = Duration::from_secs(p.timeout.unwrap_or(30).clamp(1, 300) as u64);
    let mut cmd = herald_process::command(&exe.to_string_lossy());
    cmd.args(&argv);
    // Read to its end, at most MAX_OUTPUT of each stream kept; the group killed at the limit.
    let out = match herald_process::run_bounded(cmd, limit, MAX_OUTPUT).await {
        Ok(out) => out,
        Err(herald_process::RunFailed::Timeout) => {
            return Err(RpcError::new(
                RpcError::CLI_TIMEOUT,
                format!("timed out after {}s", limit.as_secs()),
            ));
        }
        Err(herald_process::RunFailed::Spawn(e) | herald_process::RunFailed::Wait(e)) => {
            return Err(RpcError::new(RpcError::CLI_FAILED, e.to_string()));
        }
    };
    let mut output = String::from_utf8_lossy(&out.stdout).into_owned();
    output.push_str(&String::from_utf8_lossy(&out.stderr));
    if output.len() > MAX_OUTPUT {
        let cut = (0..=MAX_OUTPUT)
            .rev()
            .find(|i| output.is_char_boundary(*i))
            .unwrap_or(0);
        output.truncate(cut);
    }
    Ok(CliRun {
        blocked: false,
        code: out.status.code(),
        output,
    })
}

/// `image.attach {session_id, path}`: the image goes with the session's next prompt,
/// as an image part (its path named in the text).
pub fn image_attach(gw: &Gateway, p: params::Attach) -> Result<Attached, RpcError> {
    let live = gw.live(p.session_id.as_deref())?;
    let raw = required(p.path, "path", 4015)?;
    let path = PathBuf::from(&raw);
    let is_image = herald_session::images::mime(&path).is_some();
    if !path.is_absolute() || !is_image {
        return Err(RpcError::new(
            4015,
            format!("not an absolute path to an image: {raw}"),
        ));
    }
    if !path.is_file() {
        return Err(RpcError::new(4016, format!("no such file: {raw}")));
    }
    if live.conversation.attached() >= MAX_ATTACHED {
        return Err(RpcError::new(
            4015,
            format!("at most {MAX_ATTACHED} images go with one prompt"),
        ));
    }
    let count = attach(&live, raw.clone());
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    Ok(Attached {
        attached: true,
        path: raw,
        name,
        count,
    })
}

/// `clipboard.paste`: a gateway has no clipboard of its user's.
/// Adds an image for the session's next prompt (from a blocking worker); how many wait.
pub fn attach(live: &crate::gateway::Live, path: String) -> usize {
    let op = live.conversation.submit(herald_session::Op::Attach(path));
    match tokio::runtime::Handle::current().block_on(op) {
        Ok(herald_session::Outcome::Attached(n)) => n,
        _ => live.conversation.attached(),
    }
}

pub fn clipboard_paste(gw: &Gateway, p: params::Target) -> Result<(), RpcError> {
    gw.live(p.session_id.as_deref())?;
    Err(RpcError::new(
        5027,
        "no clipboard is available to the gateway; attach the file with image.attach",
    ))
}

/// `reload.env`: `<home>/.env` read again; `{updated}` counts the variables it changed.
/// Credentials looked up from now on (a `/model` switch, a session opened by `/new`)
/// see the new values; an open session keeps its own, as in Hermes.
pub fn reload_env(gw: &Gateway) -> Result<Updated, RpcError> {
    herald_session::reload_env(std::slice::from_ref(gw.host.runtime()))
        .map(|updated| Updated { updated })
        .map_err(|e| RpcError::new(RpcError::CONFIG_FAILED, e.to_string()))
}

/// Hermes's question before a reload (`approvals.mcp_reload_confirm`).
const MCP_RELOAD_QUESTION: &str = "⚠️  /reload-mcp invalidates the prompt cache (next message re-sends full input tokens). Reply `/reload-mcp now` to proceed, or `/reload-mcp always` to proceed and silence this prompt permanently.";

/// `reload.mcp`: without `confirm`, and unless `approvals.mcp_reload_confirm` is
/// false, Hermes's question; with it, `mcp_servers` read again (changed servers are
/// connected again, for every session of this gateway) and, with `always`, the question
/// turned off. Blocking file reads: run off the async workers.
pub fn reload_mcp(gw: &Gateway, p: params::McpReload) -> Result<McpReloaded, RpcError> {
    let config = gw.host.runtime().home.config_file();
    if !p.confirm && herald_config::default_config::mcp_reload_confirm(&config) {
        return Ok(McpReloaded {
            status: "confirm_required",
            message: Some(MCP_RELOAD_QUESTION),
        });
    }
    herald_session::reload_mcp(std::slice::from_ref(gw.host.runtime()))
        .map_err(|e| RpcError::new(5015, e.to_string()))?;
    if p.always {
        herald_config::default_config::stop_mcp_reload_confirm(&config)
            .map_err(|e| RpcError::new(5015, e.to_string()))?;
    }
    Ok(McpReloaded {
        status: "reloaded",
        message: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_running_subcommands_are_blocked() {
        let argv = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(blocked(&argv(&["gateway", "run"])));
        assert!(blocked(&argv(&["--home", "/x", "rpc"])));
        assert!(blocked(&argv(&["chat"])));
        assert!(!blocked(&argv(&["chat", "-q", "hi"])));
        assert!(!blocked(&argv(&["gateway", "status"])));
        assert!(!blocked(&argv(&["inbox", "list", "--json"])));
    }
}
