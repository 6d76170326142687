//! Slash commands, config and models (rpc-gateway.md §5): the command table of
//! `herald-session::commands`, `/model` switching a live session's model for good.

use crate::catalog::{self, TUI_EXTRA};
use crate::errors::RpcError;
use crate::gateway::{Gateway, Live};
use crate::params::{self, required};
use crate::results::{
    AgentShown, Catalog, Category, CommandInfo, ConfigSet, ConfigShown, ConfigValue, ModelShown,
    Slash,
};
use herald_config::default_config::{BusyInputMode, set_busy_input_mode};
use herald_session::skills;
use herald_session::{Op, Outcome, Reply, Setting};
use std::collections::BTreeMap;
use std::sync::Arc;

pub fn catalog(gw: &Gateway) -> Catalog {
    let installed = gw.host.runtime().skills.discover();
    let mut categories: Vec<Category> = Vec::new();
    let (mut sub, mut canon) = (BTreeMap::new(), BTreeMap::new());
    for c in catalog::offered() {
        let name = format!("/{}", c.name);
        let pair = (name.clone(), c.described());
        match categories.iter_mut().find(|k| k.name == c.category) {
            Some(k) => k.pairs.push(pair),
            None => categories.push(Category {
                name: c.category,
                pairs: vec![pair],
            }),
        }
        for alias in c.aliases.iter().chain([&c.name]) {
            canon.insert(format!("/{alias}"), name.clone());
        }
        let subs = c.subcommands();
        if !subs.is_empty() {
            sub.insert(name, subs);
        }
    }
    let tui: Vec<(String, String)> = TUI_EXTRA
        .iter()
        .map(|(n, w)| ((*n).to_owned(), (*w).to_owned()))
        .collect();
    categories.push(Category {
        name: "TUI",
        pairs: tui,
    });
    let mut pairs: Vec<(String, String)> =
        categories.iter().flat_map(|k| k.pairs.clone()).collect();
    for s in &installed {
        pairs.push((format!("/{}", skills::slug(&s.name)), s.description.clone()));
    }
    Catalog {
        pairs,
        sub,
        canon,
        categories,
        skill_count: installed.len(),
        warning: String::new(),
    }
}

pub fn resolve(gw: &Gateway, p: params::Command) -> Result<CommandInfo, RpcError> {
    let name = required(p.name, "name", RpcError::MALFORMED)?;
    let wanted = format!("/{}", name.trim_start_matches('/'));
    if let Some(c) = catalog::canonical(&wanted) {
        return Ok(CommandInfo {
            name: format!("/{}", c.name),
            usage: format!("/{} {}", c.name, c.args).trim_end().to_owned(),
            description: c.what.to_owned(),
            category: c.category,
            skill: None,
        });
    }
    let installed = gw.host.runtime().skills.discover();
    match installed
        .into_iter()
        .find(|s| format!("/{}", skills::slug(&s.name)) == wanted)
    {
        Some(s) => Ok(CommandInfo {
            name: wanted.clone(),
            usage: format!("{wanted} TEXT"),
            description: s.description,
            category: "Skills",
            skill: Some(s.name),
        }),
        None => Err(RpcError::new(
            RpcError::UNKNOWN_COMMAND,
            format!("unknown command: {wanted}"),
        )),
    }
}

/// Runs one slash line on a live session from the session's command table; the
/// gateway runs what is not client-side. A model switch is announced as `session.info`.
async fn run_line(live: &Arc<Live>, line: &str) -> Result<Slash, RpcError> {
    let reply = live.conversation.submit(Op::Command(line.to_owned())).await;
    let reply = match reply.map_err(|e| RpcError::op(e, RpcError::FAILED))? {
        Outcome::Reply(reply) => reply,
        other => return crate::turns::unreachable_outcome(other),
    };
    let answer = match reply {
        Reply::Output(output) => Slash::Exec {
            output,
            model: None,
        },
        Reply::ModelSwitched(model) => {
            crate::info::announce(live).await;
            let output = format!("Model switched to {model} for this session.");
            Slash::Exec {
                output,
                model: Some(model),
            }
        }
        Reply::Send(message) => Slash::Send { message },
        Reply::NotACommand => {
            return Err(RpcError::new(RpcError::MALFORMED, "not a slash command"));
        }
        Reply::New | Reply::Resume(_) | Reply::Quit | Reply::SetHome | Reply::Unknown { .. } => {
            return Err(RpcError::new(
                RpcError::NOT_IN_HISTORY,
                "not a quick/plugin/bundle/skill command",
            ));
        }
    };
    Ok(answer)
}

/// `command.dispatch`: `{name, arg}` or the single-string `{command: "/model x"}`.
pub async fn dispatch(gw: &Gateway, p: params::Command) -> Result<Slash, RpcError> {
    let live = gw.live(p.session_id.as_deref())?;
    let line = match (p.command, p.name) {
        (Some(command), _) => command,
        (None, Some(name)) => {
            let arg = p.arg.unwrap_or_default();
            format!("/{} {arg}", name.trim_start_matches('/'))
        }
        (None, None) => return Err(RpcError::new(RpcError::MALFORMED, "name is required")),
    };
    run_line(&live, line.trim()).await
}

/// `slash.exec`: a full slash line.
pub async fn slash(gw: &Gateway, p: params::Command) -> Result<Slash, RpcError> {
    let live = gw.live(p.session_id.as_deref())?;
    let line = required(p.command, "command", RpcError::MALFORMED)?;
    run_line(&live, &line).await
}

pub fn config_get(gw: &Gateway, p: params::Config) -> Result<ConfigValue, RpcError> {
    let runtime = gw.host.runtime();
    let key = p.key.unwrap_or_else(|| "config".into());
    let home = || runtime.home.root().display().to_string();
    match key.as_str() {
        "model" => {
            let session_model = gw
                .live(p.session_id.as_deref())
                .ok()
                .and_then(|l| l.conversation.session().endpoint())
                .map(|e| e.model);
            Ok(ConfigValue::Value {
                value: session_model.unwrap_or_else(|| runtime.endpoint().model),
            })
        }
        "mtime" => {
            let changed = std::fs::metadata(runtime.home.config_file()).and_then(|m| m.modified());
            let mtime = changed
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0.0, |d| d.as_secs_f64());
            Ok(ConfigValue::Mtime { mtime })
        }
        "provider" => Ok(ConfigValue::Value {
            value: runtime.provider.clone(),
        }),
        "busy" => Ok(ConfigValue::Value {
            value: runtime.busy_input_mode().as_str().to_owned(),
        }),
        "home" => Ok(ConfigValue::Home {
            home: home(),
            display: home(),
        }),
        "cwd" => {
            let cwd = p.cwd.or_else(|| {
                std::env::current_dir()
                    .ok()
                    .map(|d| d.display().to_string())
            });
            Ok(ConfigValue::Cwd { cwd, branch: None })
        }
        "config" | "full" => Ok(ConfigValue::Config {
            config: ConfigShown {
                model: ModelShown {
                    default: runtime.endpoint().model,
                    provider: runtime.provider.clone(),
                    base_url: runtime.endpoint().shown_base_url(),
                },
                agent: AgentShown {
                    max_turns: runtime.max_iterations,
                },
            },
        }),
        "reasoning" => {
            let effort = gw
                .live(p.session_id.as_deref())
                .ok()
                .and_then(|l| l.conversation.reasoning_effort());
            Ok(ConfigValue::Reasoning {
                value: effort.unwrap_or_else(|| "medium".into()),
                display: crate::display::reasoning_display(&runtime.home.config_file()),
            })
        }
        "fast" => {
            let live = gw.live(p.session_id.as_deref()).ok();
            let fast = live.is_some_and(|l| l.conversation.fast());
            Ok(ConfigValue::Value {
                value: if fast { "fast" } else { "normal" }.into(),
            })
        }
        other => match crate::display::get(&runtime.home.config_file(), other) {
            Some(value) => Ok(ConfigValue::Value { value }),
            None => Err(RpcError::new(
                RpcError::BAD_VALUE,
                format!("unknown config key: {other}"),
            )),
        },
    }
}

pub async fn config_set(gw: &Gateway, p: params::Config) -> Result<ConfigSet, RpcError> {
    let key = required(p.key, "key", RpcError::BAD_VALUE)?;
    match (key.as_str(), p.value) {
        ("model", Some(value)) => {
            let live = gw.live(p.session_id.as_deref())?;
            let set = live.conversation.submit(Op::SetModel(value)).await;
            let model = match set.map_err(|e| RpcError::op(e, RpcError::FAILED))? {
                Outcome::ModelSet(model) => model,
                other => return crate::turns::unreachable_outcome(other),
            };
            crate::info::announce(&live).await;
            Ok(ConfigSet {
                key,
                value: model,
                scope: None,
            })
        }
        ("model", None) => Err(RpcError::new(RpcError::BAD_VALUE, "model needs a value")),
        ("busy", value) => set_busy(gw, key, value),
        ("fast", value) => set_fast(gw, p.session_id.as_deref(), value).await,
        ("yolo", value) => set_yolo(gw, p.session_id.as_deref(), p.scope, value).await,
        (_, value) => {
            let value = value.unwrap_or_default();
            let path = gw.host.runtime().home.config_file();
            let (k, v) = (key.clone(), value.clone());
            let shown = crate::blocking(move || Ok(crate::display::set(&path, &k, &v))).await?;
            match shown {
                Some(done) => done.map(|value| ConfigSet {
                    key,
                    value,
                    scope: None,
                }),
                None if key == "reasoning" => set_effort(gw, p.session_id.as_deref(), value).await,
                None => Err(RpcError::new(
                    RpcError::BAD_VALUE,
                    format!("unknown config key: {key}"),
                )),
            }
        }
    }
}

/// A turn setting of the live session (`fast`, `reasoning`'s effort, `yolo`), as
/// Hermes keeps them per session; `session.info` follows the change.
async fn set_on_session(
    gw: &Gateway,
    session_id: Option<&str>,
    key: &str,
    setting: Setting,
) -> Result<String, RpcError> {
    let live = gw.live(session_id)?;
    let done = live.conversation.submit(Op::Set(setting)).await;
    let value = match done.map_err(|e| RpcError::op(e, RpcError::CONFIG_FAILED))? {
        Outcome::Set(value) => value,
        other => return crate::turns::unreachable_outcome(other),
    };
    tracing::debug!(key, value, "session setting changed");
    crate::info::announce(&live).await;
    Ok(value)
}

/// `config.set fast`: `status`, `toggle` (or nothing), `fast`/`on`, `normal`/`off`.
async fn set_fast(
    gw: &Gateway,
    session_id: Option<&str>,
    value: Option<String>,
) -> Result<ConfigSet, RpcError> {
    let raw = value.unwrap_or_default().to_ascii_lowercase();
    let asked = match raw.as_str() {
        "status" => {
            let fast = gw.live(session_id)?.conversation.fast();
            let value = if fast { "fast" } else { "normal" }.to_owned();
            return Ok(ConfigSet {
                key: "fast".into(),
                value,
                scope: None,
            });
        }
        "" | "toggle" => None,
        "fast" | "on" => Some(true),
        "normal" | "off" => Some(false),
        _ => {
            return Err(RpcError::new(
                RpcError::BAD_VALUE,
                format!("unknown fast mode: {raw}"),
            ));
        }
    };
    let value = set_on_session(gw, session_id, "fast", Setting::Fast(asked)).await?;
    Ok(ConfigSet {
        key: "fast".into(),
        value,
        scope: None,
    })
}

/// `config.set reasoning LEVEL`: the session's reasoning effort.
async fn set_effort(
    gw: &Gateway,
    session_id: Option<&str>,
    value: String,
) -> Result<ConfigSet, RpcError> {
    let level = value.to_ascii_lowercase();
    let value = set_on_session(gw, session_id, "reasoning", Setting::Reasoning(level)).await?;
    Ok(ConfigSet {
        key: "reasoning".into(),
        value,
        scope: None,
    })
}

/// `config.set yolo`: the session's own (`1`/`on`/`true`/`yes`, `0`/`off`/`false`/
/// `no`, anything else switches it). The global scope (`approvals.mode`) is read at
/// start and is not switched here.
async fn set_yolo(
    gw: &Gateway,
    session_id: Option<&str>,
    scope: Option<String>,
    value: Option<String>,
) -> Result<ConfigSet, RpcError> {
    if scope.is_some_and(|s| s.eq_ignore_ascii_case("global")) {
        return Err(RpcError::new(
            RpcError::BAD_VALUE,
            "yolo for every session is approvals.mode in config.yaml, read at start",
        ));
    }
    let raw = value.unwrap_or_default().to_ascii_lowercase();
    let asked = match raw.as_str() {
        "1" | "on" | "true" | "yes" => Some(true),
        "0" | "off" | "false" | "no" => Some(false),
        _ => None,
    };
    let value = set_on_session(gw, session_id, "yolo", Setting::Yolo(asked)).await?;
    Ok(ConfigSet {
        key: "yolo".into(),
        value,
        scope: Some("session"),
    })
}

/// `config.set {key: "busy", value}`: `display.busy_input_mode` written (no value, or
/// `status`: the mode as it is).
fn set_busy(gw: &Gateway, key: String, value: Option<String>) -> Result<ConfigSet, RpcError> {
    let config = gw.host.runtime().home.config_file();
    let asked = value
        .map(|v| v.trim().to_ascii_lowercase())
        .filter(|v| v != "status");
    let Some(asked) = asked else {
        let value = gw.host.runtime().busy_input_mode().as_str().to_owned();
        return Ok(ConfigSet {
            key,
            value,
            scope: None,
        });
    };
    let mode = BusyInputMode::parse(&asked)
        .ok_or_else(|| RpcError::new(RpcError::BAD_VALUE, format!("unknown busy mode: {asked}")))?;
    set_busy_input_mode(&config, mode)
        .map_err(|e| RpcError::new(RpcError::CONFIG_FAILED, e.to_string()))?;
    gw.host.runtime().set_busy_input_mode(mode);
    Ok(ConfigSet {
        key,
        value: mode.as_str().to_owned(),
        scope: None,
    })
}
