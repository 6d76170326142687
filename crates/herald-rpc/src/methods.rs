//! The method catalogue (rpc-gateway.md §2–§5): each method's params (`params`), result
//! (`results`) and codes.

use crate::errors::RpcError;
use crate::gateway::Gateway;
use crate::outbox::Outbox;
use crate::params::{Params, read};
use crate::results::{Killed, Resized};
use crate::{answers, commands, delegation, extras, prompts, sessions, spawn_trees};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::sync::Arc;

/// A method's answer as the JSON its frame carries.
fn answer<T: Serialize>(result: Result<T, RpcError>) -> Result<Value, RpcError> {
    let value = result?;
    serde_json::to_value(value).map_err(|e| {
        tracing::error!(error = %e, "a result did not encode");
        RpcError::new(
            RpcError::HANDLER,
            "handler error: the result did not encode",
        )
    })
}

/// Runs a method that reads files or `state.db` off the async workers.
async fn off_workers<P, T>(
    gw: &Arc<Gateway>,
    p: &Value,
    f: fn(&Gateway, P) -> Result<T, RpcError>,
) -> Result<Value, RpcError>
where
    P: DeserializeOwned + Default + Send + 'static,
    T: Serialize + Send + 'static,
{
    let (gw, p) = (gw.clone(), read::<P>(p));
    crate::blocking(move || f(&gw, p))
        .await
        .and_then(|t| answer(Ok(t)))
}

/// Runs one method for the client behind `outbox`.
pub async fn call(
    gw: &Arc<Gateway>,
    outbox: &Outbox,
    method: &str,
    p: Params,
) -> Result<Value, RpcError> {
    let p = Value::Object(p);
    let target: crate::params::Target = read(&p);
    gw.reopen_closed(method, target.session_id.as_deref(), outbox)
        .await?;
    gw.check_owner(method, target.session_id.as_deref(), outbox.conn)?;
    match method {
        "session.create" => answer(sessions::create(gw, outbox, read(&p)).await),
        "session.list" => answer(sessions::list(gw, read(&p)).await),
        "session.most_recent" => answer(sessions::most_recent(gw).await),
        "session.resume" => answer(sessions::resume(gw, outbox, read(&p)).await),
        "session.active_list" => answer(Ok(sessions::active_list(gw, outbox))),
        "session.activate" => answer(sessions::activate(gw, outbox, target).await),
        "session.close" => answer(Ok(sessions::close(gw, target))),
        "session.delete" => answer(sessions::delete(gw, read(&p)).await),
        "session.history" => off_workers(gw, &p, sessions::history).await,
        "session.title" => answer(sessions::title(gw, read(&p)).await),
        "session.usage" => answer(sessions::usage(gw, target).await),
        "session.status" => answer(sessions::status(gw, target)),
        "session.interrupt" => answer(sessions::interrupt(gw, target).await),
        "session.steer" => answer(sessions::steer(gw, read(&p)).await),
        "session.branch" => answer(sessions::branch(gw, outbox, read(&p)).await),
        "session.compress" => answer(sessions::compress(gw, read(&p)).await),
        "session.undo" => answer(sessions::undo(gw, target).await),
        "prompt.submit" => answer(prompts::submit(gw, read(&p)).await),
        "prompt.background" => answer(prompts::background(gw, read(&p)).await),
        "approval.respond" => answer(answers::approval(gw, read(&p)).await),
        "clarify.respond" => answer(answers::clarify(gw, outbox, read(&p)).await),
        "sudo.respond" | "secret.respond" => {
            answer(answers::prompt(gw, outbox, method, read(&p)).await)
        }
        "commands.catalog" => {
            let catalog = |gw: &Gateway, _: crate::params::Target| Ok(commands::catalog(gw));
            off_workers(gw, &p, catalog).await
        }
        "command.resolve" => off_workers(gw, &p, commands::resolve).await,
        "complete.slash" => off_workers(gw, &p, crate::completion::slash).await,
        "complete.path" => off_workers(gw, &p, crate::completion::path).await,
        "command.dispatch" => answer(commands::dispatch(gw, read(&p)).await),
        "slash.exec" => answer(commands::slash(gw, read(&p)).await),
        "config.get" => off_workers(gw, &p, commands::config_get).await,
        "config.set" => answer(commands::config_set(gw, read(&p)).await),
        "model.options" => {
            let models: crate::params::Models = read(&p);
            answer(Ok(gw.host.model_options(models.refresh).await))
        }
        "cli.exec" => answer(extras::cli_exec(read(&p)).await),
        "image.attach" => off_workers(gw, &p, extras::image_attach).await,
        "delegation.status" => answer(Ok(delegation::status(gw))),
        "delegation.pause" => answer(delegation::pause(gw, read(&p))),
        "subagent.interrupt" => answer(delegation::interrupt(gw, read(&p))),
        "subagent.steer" => answer(delegation::steer(gw, read(&p))),
        "clipboard.paste" => off_workers(gw, &p, extras::clipboard_paste).await,
        "reload.env" => answer(extras::reload_env(gw)),
        "reload.mcp" => {
            let reload: crate::params::McpReload = read(&p);
            let session = reload.session_id.clone();
            let answer = off_workers(gw, &p, extras::reload_mcp).await;
            // The session's tool list changed: its info follows, as in Hermes.
            let reloaded = answer.as_ref().is_ok_and(|v| v["status"] == "reloaded");
            if let (true, Ok(live)) = (reloaded, gw.live(session.as_deref())) {
                crate::info::announce(&live).await;
            }
            answer
        }
        "spawn_tree.save" => {
            let save = |gw: &Gateway, p| spawn_trees::save(gw.host.runtime().home.root(), p);
            off_workers(gw, &p, save).await
        }
        "spawn_tree.list" => {
            let list = |gw: &Gateway, p| Ok(spawn_trees::list(gw.host.runtime().home.root(), p));
            off_workers(gw, &p, list).await
        }
        "spawn_tree.load" => {
            let load = |gw: &Gateway, p| spawn_trees::load(gw.host.runtime().home.root(), p);
            off_workers(gw, &p, load).await
        }
        "process.stop" => answer(Ok(Killed {
            killed: gw.host.runtime().jobs.stop_all(),
        })),
        "terminal.resize" => {
            let resize: crate::params::Resize = read(&p);
            answer(Ok(Resized {
                cols: resize.cols.unwrap_or(Value::Null),
            }))
        }
        other => tui_hub(gw, other, &p).await,
    }
}

/// The methods of Hermes's TUI beside turns and sessions: its hubs over herald's parts
/// (`hub`), and the answers of features herald does not have (`absent`).
async fn tui_hub(gw: &Arc<Gateway>, method: &str, p: &Value) -> Result<Value, RpcError> {
    use crate::hub;
    match method {
        "setup.status" => Ok(hub::setup_status(gw)),
        "session.save" => off_workers(gw, p, hub::session_save).await,
        "paste.collapse" => off_workers(gw, p, hub::paste_collapse).await,
        "input.detect_drop" => off_workers(gw, p, hub::detect_drop).await,
        "shell.exec" => hub::shell_exec(gw, read(p)).await,
        "skills.manage" => off_workers(gw, p, hub::skills_manage).await,
        "skills.reload" => {
            let reload = |gw: &Gateway, _: crate::params::Target| Ok(hub::skills_reload(gw));
            off_workers(gw, p, reload).await
        }
        "plugins.manage" => off_workers(gw, p, hub::plugins_manage).await,
        "tools.configure" => off_workers(gw, p, hub::tools_configure).await,
        "model.save_key" => off_workers(gw, p, hub::model_save_key).await,
        "model.disconnect" => off_workers(gw, p, hub::model_disconnect).await,
        "rollback.list" => off_workers(gw, p, hub::rollback_list).await,
        "rollback.diff" => off_workers(gw, p, hub::rollback_diff).await,
        "rollback.restore" => off_workers(gw, p, hub::rollback_restore).await,
        m if crate::absent::METHODS.contains(&m) => crate::absent::answer(m, read(p)),
        other => Err(RpcError::new(
            RpcError::UNKNOWN_METHOD,
            format!("unknown method: {other}"),
        )),
    }
}
