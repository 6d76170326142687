//! The method catalogue (rpc-gateway.md §2–§5): each method's params, result and codes.

use crate::errors::RpcError;
use crate::gateway::Gateway;
use crate::outbox::Outbox;
use crate::params::Params;
use crate::{answers, commands, extras, prompts, sessions, spawn_trees};
use serde_json::Value;
use std::sync::Arc;

/// A method that reads files or `state.db` (blocking work).
type Blocking = fn(&Gateway, &Params) -> Result<Value, RpcError>;

/// Runs a blocking method off the async workers.
async fn off_workers(gw: &Arc<Gateway>, p: Params, f: Blocking) -> Result<Value, RpcError> {
    let gw = gw.clone();
    crate::blocking(move || f(&gw, &p)).await
}

/// Runs one method for the client behind `outbox`.
pub async fn call(
    gw: &Arc<Gateway>,
    outbox: &Outbox,
    method: &str,
    p: Params,
) -> Result<Value, RpcError> {
    gw.check_owner(method, &p, outbox.conn)?;
    match method {
        "session.create" => sessions::create(gw, outbox, &p).await,
        "session.list" => sessions::list(gw, &p).await,
        "session.most_recent" => sessions::most_recent(gw).await,
        "session.resume" => sessions::resume(gw, outbox, &p).await,
        "session.active_list" => Ok(sessions::active_list(gw, outbox)),
        "session.activate" => {
            let (gw, outbox) = (gw.clone(), outbox.clone());
            crate::blocking(move || sessions::activate(&gw, &outbox, &p)).await
        }
        "session.close" => Ok(sessions::close(gw, &p)),
        "session.delete" => sessions::delete(gw, &p).await,
        "session.history" => off_workers(gw, p, sessions::history).await,
        "session.title" => sessions::title(gw, &p).await,
        "session.usage" => sessions::usage(gw, &p).await,
        "session.status" => sessions::status(gw, &p),
        "session.interrupt" => sessions::interrupt(gw, &p).await,
        "session.steer" => sessions::steer(gw, &p).await,
        "session.branch" => sessions::branch(gw, outbox, &p).await,
        "session.compress" => sessions::compress(gw, &p).await,
        "session.undo" => sessions::undo(gw, &p).await,
        "prompt.submit" => prompts::submit(gw, &p).await,
        "prompt.background" => prompts::background(gw, &p).await,
        "approval.respond" => answers::approval(gw, &p).await,
        "clarify.respond" => answers::clarify(gw, outbox, &p).await,
        "sudo.respond" | "secret.respond" => answers::never_asked(method, &p),
        "commands.catalog" => off_workers(gw, p, |gw, _| Ok(commands::catalog(gw))).await,
        "command.resolve" => off_workers(gw, p, commands::resolve).await,
        "command.dispatch" => commands::dispatch(gw, &p).await,
        "slash.exec" => commands::slash(gw, &p).await,
        "config.get" => commands::config_get(gw, &p),
        "config.set" => commands::config_set(gw, &p).await,
        "model.options" => Ok(gw
            .host
            .model_options(crate::params::flag(&p, "refresh"))
            .await),
        "cli.exec" => extras::cli_exec(&p).await,
        "image.attach" => off_workers(gw, p, extras::image_attach).await,
        "delegation.status" => Ok(extras::delegation_status()),
        "subagent.interrupt" => extras::subagent_interrupt(&p),
        "clipboard.paste" => off_workers(gw, p, extras::clipboard_paste).await,
        "reload.env" => extras::reload_env(gw),
        "reload.mcp" => Ok(extras::reload_mcp()),
        "spawn_tree.save" => {
            off_workers(gw, p, |gw, p| {
                spawn_trees::save(gw.host.runtime().home.root(), p)
            })
            .await
        }
        "spawn_tree.list" => {
            let list =
                |gw: &Gateway, p: &Params| Ok(spawn_trees::list(gw.host.runtime().home.root(), p));
            off_workers(gw, p, list).await
        }
        "spawn_tree.load" => {
            off_workers(gw, p, |gw, p| {
                spawn_trees::load(gw.host.runtime().home.root(), p)
            })
            .await
        }
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
