//! The functions a request defines for the client to run (`tools`, with `tool_choice`
//! and `parallel_tool_calls`): read and checked, then offered to its run beside
//! herald's own tools. A name herald's own tools already use is refused.

use crate::errors::ApiError;
use crate::parked::{Answering, ClientSide};
use herald_session::runs::RunEvents;
use herald_session::{ClientDesk, ClientTool, RunExtras, Tool, ToolPolicy};
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

/// A request's own tools and how it asks for them to be used, as sent.
pub struct Asked<'a> {
    pub tools: Option<&'a Value>,
    pub tool_choice: Option<&'a Value>,
    pub parallel_tool_calls: Option<&'a Value>,
}

/// Starts `session`'s turn on `input` with the request's own tools offered beside
/// herald's: the run tied to the request (its permit held until it ends or parks),
/// and its events.
pub fn start_run(
    api: &crate::Api,
    session: &herald_session::Session,
    input: herald_protocol::UserInput,
    asked: Asked<'_>,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
) -> Result<(Answering, Option<RunEvents>), ApiError> {
    let offered = read(
        asked.tools,
        asked.tool_choice,
        asked.parallel_tool_calls,
        || session.tool_names(),
        api.client_tool_timeout(),
    )?;
    let max = api.settings.max_parked_runs;
    if !offered.is_empty() && !api.lot.has_room(max) {
        return Err(ApiError::too_many_parked(max));
    }
    let client = (!offered.is_empty()).then(|| ClientSide {
        names: Arc::new(offered.names.clone()),
        desk: offered.desk.clone(),
    });
    let extras = RunExtras {
        client_tools: offered.tools,
        tool_policy: offered.policy,
        ..RunExtras::default()
    };
    let run = api
        .host
        .start_run_with(session, input, extras)
        .map_err(crate::session_pick::run_error)?;
    let events = run.take_events();
    let answering = Answering {
        tied: crate::tied::Tied::new(run, permit),
        client,
        lot: api.lot.clone(),
    };
    Ok((answering, events))
}

/// Most functions one request may define (OpenAI's own limit).
const MAX_TOOLS: usize = 128;

/// The client's tools of one request.
pub struct Offered {
    pub tools: Vec<Arc<dyn Tool>>,
    pub names: HashSet<String>,
    pub desk: Arc<ClientDesk>,
    pub policy: ToolPolicy,
}

impl Offered {
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

fn refused(message: impl Into<String>, param: &str) -> ApiError {
    ApiError::bad_request(message, Some("invalid_tools")).at(param)
}

/// A function name as OpenAI allows it: 1–64 of `a-z A-Z 0-9 _ -`.
fn good_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// One function of `tools`: chat completions nest it under `function`, the Responses
/// API puts its fields on the item.
fn function_of(item: &Value) -> Option<&Map<String, Value>> {
    let o = item.as_object()?;
    if o.get("type").and_then(Value::as_str) != Some("function") {
        return None;
    }
    match o.get("function") {
        Some(Value::Object(f)) => Some(f),
        _ => Some(o),
    }
}

/// Reads `tools`, `tool_choice` and `parallel_tool_calls`; `server` names herald's
/// own tools of the session.
pub fn read(
    tools: Option<&Value>,
    tool_choice: Option<&Value>,
    parallel_tool_calls: Option<&Value>,
    server: impl FnOnce() -> Vec<String>,
    timeout: Duration,
) -> Result<Offered, ApiError> {
    let desk = ClientDesk::new(timeout);
    let items = match tools {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(a)) => a.as_slice(),
        Some(_) => return Err(refused("'tools' must be an array", "tools")),
    };
    if items.len() > MAX_TOOLS {
        return Err(refused(
            format!("At most {MAX_TOOLS} tools may be defined"),
            "tools",
        ));
    }
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    let mut names = HashSet::new();
    // herald's own tools are listed only when the request brings some of its own.
    let server = if items.is_empty() {
        Vec::new()
    } else {
        server()
    };
    for (i, item) in items.iter().enumerate() {
        let param = format!("tools[{i}]");
        let Some(f) = function_of(item) else {
            return Err(refused(
                "Only tools of type 'function' are supported: herald runs its own tools itself",
                &param,
            ));
        };
        let name = f.get("name").and_then(Value::as_str).unwrap_or_default();
        if !good_name(name) {
            return Err(refused(
                "A tool name must be 1 to 64 letters, digits, '_' or '-'",
                &param,
            ));
        }
        if server.iter().any(|s| s == name) {
            return Err(ApiError::bad_request(
                format!(
                    "The tool name '{name}' is one of herald's own tools; rename the client tool"
                ),
                Some("tool_name_conflict"),
            )
            .at(param));
        }
        if !names.insert(name.to_owned()) {
            return Err(refused(
                format!("The tool '{name}' is defined twice"),
                &param,
            ));
        }
        let description = f
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let parameters = match f.get("parameters") {
            Some(p @ Value::Object(_)) => p.clone(),
            _ => serde_json::json!({"type": "object", "properties": {}}),
        };
        tools.push(Arc::new(ClientTool::new(
            name.to_owned(),
            description.to_owned(),
            parameters,
            desk.clone(),
        )));
    }
    let policy = ToolPolicy {
        choice: choice(tool_choice, &names)?,
        parallel: parallel_tool_calls.and_then(Value::as_bool),
    };
    Ok(Offered {
        tools,
        names,
        desk,
        policy,
    })
}

/// `tool_choice` in chat-completion form: `none`, `auto`, `required`, or one
/// function (`{"type": "function", "name"}` in the Responses API's form too).
fn choice(v: Option<&Value>, names: &HashSet<String>) -> Result<Option<Value>, ApiError> {
    let bad = || refused("Unsupported tool_choice", "tool_choice");
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if matches!(s.as_str(), "none" | "auto" | "required") => {
            Ok(Some(Value::String(s.clone())))
        }
        Some(Value::Object(o)) if o.get("type").and_then(Value::as_str) == Some("function") => {
            let name = o
                .get("function")
                .and_then(|f| f.get("name"))
                .or(o.get("name"))
                .and_then(Value::as_str)
                .ok_or_else(bad)?;
            if !names.contains(name) {
                return Err(refused(
                    format!("tool_choice names '{name}', which is not among the request's tools"),
                    "tool_choice",
                ));
            }
            Ok(Some(
                serde_json::json!({"type": "function", "function": {"name": name}}),
            ))
        }
        Some(_) => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read_body(v: &Value, server: &[String]) -> Result<Offered, ApiError> {
        let t = Duration::from_secs(1);
        read(
            v.get("tools"),
            v.get("tool_choice"),
            v.get("parallel_tool_calls"),
            || server.to_vec(),
            t,
        )
    }

    #[test]
    fn both_shapes_are_read_and_clashes_and_bad_names_refused() {
        let chat = json!({"tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
                          "tool_choice": {"type": "function", "function": {"name": "get_weather"}}, "parallel_tool_calls": false});
        let o = read_body(&chat, &["read_file".into()]).unwrap();
        assert_eq!(o.tools[0].name(), "get_weather");
        assert!(o.tools[0].client_side());
        assert_eq!(o.policy.parallel, Some(false));
        let responses = json!({"tools": [{"type": "function", "name": "lookup", "description": "d"}], "tool_choice": {"type": "function", "name": "lookup"}});
        let o = read_body(&responses, &[]).unwrap();
        assert_eq!(o.tools[0].description(), "d");
        assert_eq!(o.policy.choice.unwrap()["function"]["name"], "lookup");
        for (bad, code) in [
            (
                json!({"tools": [{"type": "function", "name": "read_file"}]}),
                "tool_name_conflict",
            ),
            (
                json!({"tools": [{"type": "function", "name": "a b"}]}),
                "invalid_tools",
            ),
            (json!({"tools": [{"type": "web_search"}]}), "invalid_tools"),
            (json!({"tools": "x"}), "invalid_tools"),
            (
                json!({"tools": [{"type": "function", "name": "f"}, {"type": "function", "name": "f"}]}),
                "invalid_tools",
            ),
            (
                json!({"tools": [], "tool_choice": {"type": "function", "name": "zz"}}),
                "invalid_tools",
            ),
            (json!({"tool_choice": 3}), "invalid_tools"),
        ] {
            let e = read_body(&bad, &["read_file".into()]).err().unwrap();
            assert_eq!(e.code, Some(code), "{bad}");
        }
        assert!(read_body(&json!({}), &[]).unwrap().is_empty());
    }
}
