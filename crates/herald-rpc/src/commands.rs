//! Slash commands, config and models (rpc-gateway.md §5): the command table of
//! `herald-session::commands`, `/model` switching a live session's model for good.

use crate::errors::RpcError;
use crate::gateway::{Gateway, Live};
use crate::params::{Params, required, text};
use herald_session::commands::BUILT_INS;
use herald_session::skills;
use herald_session::{Op, Outcome, Reply};
use serde_json::{Value, json};
use std::sync::Arc;

/// Aliases and the command they stand for.
const ALIASES: [(&str, &str); 2] = [("/exit", "/quit"), ("/?", "/help")];

fn command_name(usage: &str) -> &str {
    usage.split_whitespace().next().unwrap_or(usage)
}

pub fn catalog(gw: &Gateway) -> Value {
    let installed = gw.host.runtime().skills.discover();
    let mut pairs: Vec<Value> = BUILT_INS
        .iter()
        .map(|(usage, what)| json!([command_name(usage), what]))
        .collect();
    for s in &installed {
        pairs.push(json!([
            format!("/{}", skills::slug(&s.name)),
            s.description
        ]));
    }
    let canon: serde_json::Map<String, Value> = ALIASES
        .iter()
        .map(|(a, c)| ((*a).to_owned(), json!(c)))
        .collect();
    json!({"pairs": pairs, "sub": {}, "canon": canon, "categories": ["session", "skills"],
           "skill_count": installed.len(), "warning": null})
}

pub fn resolve(gw: &Gateway, p: &Params) -> Result<Value, RpcError> {
    let name = required(p, "name", RpcError::MALFORMED)?;
    let wanted = format!("/{}", name.trim_start_matches('/'));
    let canonical = ALIASES
        .iter()
        .find(|(a, _)| *a == wanted)
        .map_or(wanted.as_str(), |(_, c)| c);
    if let Some((usage, what)) = BUILT_INS.iter().find(|(u, _)| command_name(u) == canonical) {
        return Ok(
            json!({"name": canonical, "usage": usage, "description": what, "category": "session"}),
        );
    }
    let installed = gw.host.runtime().skills.discover();
    match installed
        .iter()
        .find(|s| format!("/{}", skills::slug(&s.name)) == canonical)
    {
        Some(s) => Ok(
            json!({"name": canonical, "usage": format!("{canonical} TEXT"), "description": s.description, "category": "skills", "skill": s.name}),
        ),
        None => Err(RpcError::new(
            RpcError::UNKNOWN_COMMAND,
            format!("unknown command: {wanted}"),
        )),
    }
}

/// Runs one slash line on a live session from the session's command table; the
/// gateway runs what is not client-side. A model switch is announced as `session.info`.
async fn run_line(gw: &Gateway, live: &Arc<Live>, line: &str) -> Result<Value, RpcError> {
    let reply = live.conversation.submit(Op::Command(line.to_owned())).await;
    let reply = match reply.map_err(|e| RpcError::op(e, RpcError::FAILED))? {
        Outcome::Reply(reply) => reply,
        other => return crate::turns::unreachable_outcome(other),
    };
    let answer = match reply {
        Reply::Output(output) => json!({"type": "exec", "output": output}),
        Reply::ModelSwitched(model) => {
            crate::sessions::announce(gw, live).await;
            let output = format!("Model switched to {model} for this session.");
            json!({"type": "exec", "output": output, "model": model})
        }
        Reply::Send(message) => json!({"type": "send", "message": message}),
        Reply::NotACommand => {
            return Err(RpcError::new(RpcError::MALFORMED, "not a slash command"));
        }
        Reply::New | Reply::Resume(_) | Reply::Quit | Reply::Unknown { .. } => {
            return Err(RpcError::new(
                RpcError::NOT_IN_HISTORY,
                "not a quick/plugin/bundle/skill command",
            ));
        }
    };
    Ok(answer)
}

/// `command.dispatch`: `{name, arg}` or the single-string `{command: "/model x"}`.
pub async fn dispatch(gw: &Gateway, p: &Params) -> Result<Value, RpcError> {
    let live = gw.live(p)?;
    let line = match (text(p, "command"), text(p, "name")) {
        (Some(command), _) => command,
        (None, Some(name)) => {
            let arg = text(p, "arg").unwrap_or_default();
            format!("/{} {arg}", name.trim_start_matches('/'))
        }
        (None, None) => return Err(RpcError::new(RpcError::MALFORMED, "name is required")),
    };
    run_line(gw, &live, line.trim()).await
}

/// `slash.exec`: a full slash line.
pub async fn slash(gw: &Gateway, p: &Params) -> Result<Value, RpcError> {
    let live = gw.live(p)?;
    let line = required(p, "command", RpcError::MALFORMED)?;
    run_line(gw, &live, &line).await
}

pub fn config_get(gw: &Gateway, p: &Params) -> Result<Value, RpcError> {
    let runtime = gw.host.runtime();
    let key = text(p, "key").unwrap_or_else(|| "config".into());
    match key.as_str() {
        "model" => {
            let session_model = gw
                .live(p)
                .ok()
                .and_then(|l| l.conversation.session().endpoint())
                .map(|e| e.model);
            Ok(json!({"value": session_model.unwrap_or_else(|| runtime.endpoint.model.clone())}))
        }
        "provider" => Ok(json!({"value": runtime.provider})),
        "home" => Ok(
            json!({"home": runtime.home.root().display().to_string(), "display": runtime.home.root().display().to_string()}),
        ),
        "cwd" => {
            let cwd = text(p, "cwd").or_else(|| {
                std::env::current_dir()
                    .ok()
                    .map(|d| d.display().to_string())
            });
            Ok(json!({"cwd": cwd, "branch": null}))
        }
        "config" | "full" => Ok(json!({"config": {
            "model": {"default": runtime.endpoint.model, "provider": runtime.provider, "base_url": runtime.endpoint.shown_base_url()},
            "agent": {"max_turns": runtime.max_iterations},
        }})),
        other => Err(RpcError::new(
            RpcError::BAD_VALUE,
            format!("unknown config key: {other}"),
        )),
    }
}

pub async fn config_set(gw: &Gateway, p: &Params) -> Result<Value, RpcError> {
    let key = required(p, "key", RpcError::BAD_VALUE)?;
    let value = p
        .get("value")
        .and_then(Value::as_str)
        .map(str::trim)
        .unwrap_or_default();
    match key.as_str() {
        "model" if !value.is_empty() => {
            let live = gw.live(p)?;
            let set = live
                .conversation
                .submit(Op::SetModel(value.to_owned()))
                .await;
            let model = match set.map_err(|e| RpcError::op(e, RpcError::FAILED))? {
                Outcome::ModelSet(model) => model,
                other => return crate::turns::unreachable_outcome(other),
            };
            crate::sessions::announce(gw, &live).await;
            Ok(json!({"key": key, "value": model}))
        }
        "model" => Err(RpcError::new(RpcError::BAD_VALUE, "model needs a value")),
        other => Err(RpcError::new(
            RpcError::BAD_VALUE,
            format!("config key {other} cannot be set here"),
        )),
    }
}
