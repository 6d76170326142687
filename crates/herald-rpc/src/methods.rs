//! The method catalogue (rpc-gateway.md §2–§5): each method's params, result and codes.

use crate::errors::RpcError;
use crate::gateway::Gateway;
use crate::outbox::Outbox;
use crate::params::Params;
use crate::{answers, commands, extras, prompts, sessions, spawn_trees};
use serde_json::Value;
use std::sync::Arc;

/// Runs one method for the client behind `outbox`.
pub async fn call(
    gw: &Arc<Gateway>,
    outbox: &Outbox,
    method: &str,
    p: Params,
) -> Result<Value, RpcError> {
    match method {
        "session.create" => sessions::create(gw, outbox, &p).await,
        "session.list" => sessions::list(gw, &p),
        "session.most_recent" => sessions::most_recent(gw),
        "session.resume" => sessions::resume(gw, outbox, &p).await,
        "session.active_list" => Ok(sessions::active_list(gw)),
        "session.activate" => sessions::activate(gw, outbox, &p),
        "session.close" => Ok(sessions::close(gw, &p)),
        "session.delete" => sessions::delete(gw, &p).await,
        "session.history" => sessions::history(gw, &p),
        "session.title" => sessions::title(gw, &p).await,
        "session.usage" => sessions::usage(gw, &p),
        "session.status" => sessions::status(gw, &p),
        "session.interrupt" => sessions::interrupt(gw, &p),
        "session.steer" => sessions::steer(gw, &p),
        "session.branch" => sessions::branch(gw, outbox, &p).await,
        "session.compress" => sessions::compress(gw, &p).await,
        "session.undo" => sessions::undo(gw, &p).await,
        "prompt.submit" => prompts::submit(gw, &p).await,
        "prompt.background" => prompts::background(gw, &p).await,
        "approval.respond" => answers::approval(gw, &p),
        "clarify.respond" => answers::clarify(gw, &p),
        "sudo.respond" | "secret.respond" => answers::never_asked(method, &p),
        "commands.catalog" => Ok(commands::catalog(gw)),
        "command.resolve" => commands::resolve(gw, &p),
        "command.dispatch" => commands::dispatch(gw, &p).await,
        "slash.exec" => commands::slash(gw, &p).await,
        "config.get" => commands::config_get(gw, &p),
        "config.set" => commands::config_set(gw, &p).await,
        "model.options" => Ok(gw
            .host
            .model_options(crate::params::flag(&p, "refresh"))
            .await),
        "cli.exec" => extras::cli_exec(&p).await,
        "image.attach" => extras::image_attach(gw, &p),
        "delegation.status" => Ok(extras::delegation_status()),
        "subagent.interrupt" => extras::subagent_interrupt(&p),
        "clipboard.paste" => extras::clipboard_paste(gw, &p),
        "reload.env" => extras::reload_env(gw),
        "reload.mcp" => Ok(extras::reload_mcp()),
        "spawn_tree.save" => spawn_trees::save(gw.host.runtime().home.root(), &p),
        "spawn_tree.list" => Ok(spawn_trees::list(gw.host.runtime().home.root(), &p)),
        "spawn_tree.load" => spawn_trees::load(gw.host.runtime().home.root(), &p),
        "process.stop" => Ok(serde_json::json!({"killed": gw.host.runtime().jobs.stop_all()})),
        "terminal.resize" => {
            Ok(serde_json::json!({"cols": p.get("cols").cloned().unwrap_or(Value::Null)}))
        }
        other => Err(RpcError::new(
            RpcError::UNKNOWN_METHOD,
            format!("unknown method: {other}"),
        )),
    }
}
