//! One webhook-started agent run on the session host: the event's profile, the webhook
//! toolsets, the route's skill, nobody to ask, its own session.

use super::Shared;
use herald_session::{Answers, Host, RunState, SessionOptions, string_list, toolsets};
use herald_store::InboxItem;
use std::path::PathBuf;
use std::sync::Arc;

/// Everything a webhook-started agent run needs besides its event.
pub struct RunTemplate {
    /// The session host of the profile's webhook surface (model, tools, skills,
    /// limits, approval policy, sessions).
    pub host: Arc<Host>,
    /// `platform_toolsets.webhook`.
    pub platform_toolsets: Option<Vec<String>>,
    pub cwd: PathBuf,
}

/// Builds the run template of a named profile (`<home>/profiles/<name>`: its config,
/// model, skills, Python plugins); `None` when the profile has no usable model.
pub type ProfileTemplates = Box<
    dyn Fn(
            String,
        )
            -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<RunTemplate>> + Send>>
        + Send
        + Sync,
>;

/// What one agent run came to.
pub(super) enum RunOutcome {
    Answer(String),
    Retry(String),
    Dead(String),
    Interrupted,
}

/// The template for an event's profile: the default one, or the named profile's (built
/// once; a profile without a usable model runs with the default, warned once).
async fn template_for(shared: &Shared, profile: Option<&str>) -> Arc<RunTemplate> {
    let (Some(name), Some(make)) = (profile.filter(|p| *p != "default"), &shared.profiles) else {
        return shared.template.clone();
    };
    // Held while a profile is first built, so each is built (and its plugins started)
    // once.
    let mut cache = shared.profile_cache.lock().await;
    if let Some(built) = cache.get(name) {
        return built.clone().unwrap_or_else(|| shared.template.clone());
    }
    let t = make(name.to_owned()).await.map(Arc::new);
    if t.is_none() {
        tracing::warn!(
            profile = name,
            "profile has no usable model; its webhook runs use the default profile's"
        );
    }
    cache.insert(name.to_owned(), t.clone());
    t.unwrap_or_else(|| shared.template.clone())
}

pub(super) async fn run_agent(shared: &Arc<Shared>, item: &InboxItem) -> RunOutcome {
    let template = template_for(shared, item.profile.as_deref()).await;
    let t = &*template;
    let runtime = t.host.runtime();
    let session_id = format!("webhook:{}:{}", item.route, item.delivery_id);
    let route_toolsets = item.toolsets.as_ref().map(string_list);
    let chosen =
        toolsets::webhook_toolsets(route_toolsets.as_deref(), t.platform_toolsets.as_deref());
    let (tool_names, mut dropped) =
        toolsets::webhook_tools(route_toolsets.as_deref(), t.platform_toolsets.as_deref());
    // An entry naming an MCP server or a plugin's toolset grants those tools.
    dropped.retain(|d| !runtime.names_outside_toolset(d));
    if !dropped.is_empty() {
        tracing::warn!(route = %item.route, dropped = ?dropped, "toolsets herald does not have were dropped (herald config check names them)");
    }
    let skill_names = string_list(&item.skills);
    let (message, skill, missing) = if skill_names.is_empty() {
        (item.prompt.clone(), None, Vec::new())
    } else {
        runtime
            .skills
            .invocation_message(&skill_names, &item.prompt, &session_id)
    };
    for m in missing {
        tracing::warn!(route = %item.route, skill = %m, "route skill not installed; skipped");
    }
    // A scheduled job's tick runs as Hermes's cron sessions do (source `cron`).
    let scheduled = item.route.starts_with(crate::schedule::ROUTE_PREFIX);
    let source = if scheduled { "cron" } else { "webhook" };
    let mut options = SessionOptions::new(source, tool_names, Answers::Nobody);
    options.mcp = Some(herald_session::McpGrant::webhook(&chosen));
    options.id = Some(session_id.clone());
    options.cwd = Some(t.cwd.clone());
    // The inbox entry is the run's durable record.
    options.keep_runs = false;
    // Plugin hooks' sender_id, as Hermes's webhook adapter names the sender.
    options.sender_id = format!("webhook:{}", item.route);
    let session = match t.host.open_session(options).await {
        Ok(s) => s,
        Err(e) => return RunOutcome::Retry(format!("cannot open the run's session: {e}")),
    };
    // What the model is offered: the toolsets' tools that exist and are available here.
    let offered = session.tool_names();
    let run = match t.host.start_run(&session, message) {
        Ok(r) => r,
        Err(e) => return RunOutcome::Retry(format!("cannot start the run: {e}")),
    };
    // Nobody reads the events: they are not queued.
    drop(run.take_events());
    if let Ok(mut h) = shared.handles.lock() {
        h.insert(item.id, run.clone());
    }
    tracing::info!(inbox_id = item.id, route = %item.route, delivery_id = %item.delivery_id, session = %session_id, run = %run.id(), skill = ?skill, tools = ?offered, "agent run started");
    let end = run.finished().await;
    if let Ok(mut h) = shared.handles.lock() {
        h.remove(&item.id);
    }
    match end.state {
        RunState::Cancelled => RunOutcome::Interrupted,
        RunState::Completed if !end.partial => RunOutcome::Answer(end.output.unwrap_or_default()),
        _ => {
            let error = end
                .error
                .unwrap_or_else(|| "the run ended without an answer".into());
            // A local provider that is not listening fails its call at once, but may be
            // up by the next attempt of the event's retry window.
            if end.retryable || error.contains(herald_retry::NOT_LISTENING.trim_start()) {
                RunOutcome::Retry(error)
            } else {
                RunOutcome::Dead(error)
            }
        }
    }
}
