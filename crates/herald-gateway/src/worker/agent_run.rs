//! One webhook-started agent run: the template (model, tools, prompt) of the event's
//! profile, the webhook toolsets, the route's skill, nobody to ask, its own session.

use super::Shared;
use herald_agent::{Agent, AgentConfig, AgentEvent, Plugins, string_list, toolsets};
use herald_protocol::ChatMessage;
use herald_session::{Attendance, KeptRun, Runtime, SessionHeader};
use herald_store::InboxItem;
use std::path::PathBuf;
use std::sync::Arc;

/// Everything a webhook-started agent run needs besides its event.
pub struct RunTemplate {
    /// The profile's model, tools, skills, limits and approval policy (the webhook
    /// surface of the session host).
    pub runtime: Arc<Runtime>,
    /// `platform_toolsets.webhook`.
    pub platform_toolsets: Option<Vec<String>>,
    pub cwd: PathBuf,
    pub system_prompt: String,
    /// Where sessions are kept (`state.db`); `None` keeps none.
    pub state_db: Option<PathBuf>,
}

/// Builds the run template of a named profile (`<home>/profiles/<name>`: its config,
/// model, skills); `None` when the profile has no usable model.
pub type ProfileTemplates = Box<dyn Fn(&str) -> Option<RunTemplate> + Send + Sync>;

/// What one agent run came to.
pub(super) enum RunOutcome {
    Answer(String),
    Retry(String),
    Dead(String),
    Interrupted,
}

/// The template for an event's profile: the default one, or the named profile's (built
/// once; a profile without a usable model runs with the default, warned once).
fn template_for(shared: &Shared, profile: Option<&str>) -> Arc<RunTemplate> {
    let (Some(name), Some(make)) = (profile.filter(|p| *p != "default"), &shared.profiles) else {
        return shared.template.clone();
    };
    let Ok(mut cache) = shared.profile_cache.lock() else {
        return shared.template.clone();
    };
    let built = cache.entry(name.to_owned()).or_insert_with(|| {
        let t = make(name).map(Arc::new);
        if t.is_none() {
            tracing::warn!(
                profile = name,
                "profile has no usable model; its webhook runs use the default profile's"
            );
        }
        t
    });
    built.clone().unwrap_or_else(|| shared.template.clone())
}

pub(super) async fn run_agent(shared: &Arc<Shared>, item: &InboxItem) -> RunOutcome {
    let template = template_for(shared, item.profile.as_deref());
    let t = &*template;
    let session = format!("webhook:{}:{}", item.route, item.delivery_id);
    let route_toolsets = item.toolsets.as_ref().map(string_list);
    let (tool_names, dropped) =
        toolsets::webhook_tools(route_toolsets.as_deref(), t.platform_toolsets.as_deref());
    if !dropped.is_empty() {
        tracing::warn!(route = %item.route, dropped = ?dropped, "toolsets not allowed on webhook runs were dropped");
    }
    let tools = t.runtime.tools(&tool_names);
    // What the model is offered: the toolsets' tools that exist and are available here.
    let offered: Vec<String> = tools.iter().map(|t| t.name().to_owned()).collect();
    let skill_names = string_list(&item.skills);
    let (message, skill, missing) = if skill_names.is_empty() {
        (item.prompt.clone(), None, Vec::new())
    } else {
        t.runtime
            .skills
            .invocation_message(&skill_names, &item.prompt, &session)
    };
    for m in missing {
        tracing::warn!(route = %item.route, skill = %m, "route skill not installed; skipped");
    }
    let agent = Agent::with_client(
        AgentConfig {
            endpoint: t.runtime.endpoint.clone(),
            retry: t.runtime.retry.clone(),
            tools,
            max_iterations: t.runtime.max_iterations,
            cwd: t.cwd.clone(),
            approvals: Arc::new(t.runtime.approvals.approvals(Attendance::Unattended)),
            system_prompt: t.system_prompt.clone(),
            plugins: Plugins::default(),
            session_id: session.clone(),
            platform: t.runtime.platform.name().into(),
            provider: t.runtime.provider.clone(),
            clarifier: None,
        },
        shared.client.clone(),
    );
    if let Ok(mut h) = shared.handles.lock() {
        h.insert(item.id, agent.handle());
    }
    tracing::info!(inbox_id = item.id, route = %item.route, delivery_id = %item.delivery_id, session = %session, skill = ?skill, tools = ?offered, "agent run started");
    let mut appended: Vec<ChatMessage> = Vec::new();
    let result = agent
        .run_turn(&[], &message, &mut |event| {
            if let AgentEvent::MessageAppended(m) = event {
                appended.push(m);
            }
        })
        .await;
    if let Ok(mut h) = shared.handles.lock() {
        h.remove(&item.id);
    }
    if let Some(keeper) = &shared.sessions {
        keeper.keep(KeptRun {
            session: SessionHeader {
                id: session,
                source: "webhook".into(),
                model: t.runtime.endpoint.model.clone(),
                system_prompt: t.system_prompt.clone(),
                cwd: t.cwd.display().to_string(),
            },
            messages: appended,
        });
    }
    if result.interrupted {
        return RunOutcome::Interrupted;
    }
    let answer = result.final_response.trim();
    if !result.failed && !answer.is_empty() {
        return RunOutcome::Answer(result.final_response.clone());
    }
    let error = result
        .error
        .clone()
        .unwrap_or_else(|| "the run ended without an answer".into());
    if result.failed && result.error_retryable {
        RunOutcome::Retry(error)
    } else {
        RunOutcome::Dead(error)
    }
}
