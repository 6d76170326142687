//! The skills tools: `skills_list` and `skill_view` over a [`SkillLibrary`].

use herald_agent::skill_setup::RequiredEnv;
use herald_agent::skills::SkillLibrary;
use herald_agent::tool::SecretRequest;
use herald_agent::tool::{Tool, ToolContext, ToolFuture};
use serde_json::{Value, json};

pub struct SkillsList {
    pub library: SkillLibrary,
}

impl Tool for SkillsList {
    fn name(&self) -> &str {
        "skills_list"
    }
    fn description(&self) -> &str {
        "List installed skills with their descriptions."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {}})
    }
    fn parallel_safe(&self) -> bool {
        true
    }
    fn run<'a>(&'a self, _args: Value, _ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let skills: Vec<Value> = self
                .library
                .discover()
                .into_iter()
                .map(|s| json!({"name": s.name, "description": s.description, "category": s.category}))
                .collect();
            json!({ "skills": skills }).to_string()
        })
    }
}

pub struct SkillView {
    pub library: SkillLibrary,
}

impl Tool for SkillView {
    fn name(&self) -> &str {
        "skill_view"
    }
    fn description(&self) -> &str {
        "Load a skill's instructions by name."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]})
    }
    fn parallel_safe(&self) -> bool {
        true
    }
    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let Some(name) = args["name"].as_str() else {
                return json!({"error": "`name` is required"}).to_string();
            };
            match self.library.load_with_needs(name) {
                Some((body, needs)) => viewed(name, body, &needs, ctx).await.to_string(),
                None => json!({"error": format!("no skill named `{name}`; use skills_list to see what is installed")}).to_string(),
            }
        })
    }
}

/// A loaded skill as `skill_view` answers it: its body, and whether the variables it
/// needs are set. A missing one is asked for through the front door's prompter (the
/// TUI's `secret.request`), which keeps the answer in `.env`; what stays missing is
/// named, with what to do, as Hermes reports it.
async fn viewed(name: &str, body: String, needs: &[RequiredEnv], ctx: &ToolContext) -> Value {
    let is_set = |var: &str| match &ctx.prompter {
        Some(p) => p.has_secret(var),
        None => std::env::var(var).is_ok_and(|v| !v.is_empty()),
    };
    let mut missing = Vec::new();
    let mut skipped = false;
    for need in needs.iter().filter(|n| !n.optional && !is_set(&n.name)) {
        let given = match &ctx.prompter {
            Some(p) => {
                let request = SecretRequest {
                    env_var: &need.name,
                    prompt: &need.prompt,
                    skill_name: name,
                    help: need.help.as_deref(),
                    required_for: need.required_for.as_deref(),
                };
                p.secret(request).await.is_some()
            }
            None => false,
        };
        if !given {
            skipped |= ctx.prompter.is_some();
            missing.push(need.name.clone());
        }
    }
    let required: Vec<Value> = needs
        .iter()
        .map(|n| json!({"name": n.name, "prompt": n.prompt, "help": n.help, "required_for": n.required_for, "optional": n.optional}))
        .collect();
    let mut out = json!({
        "success": true, "name": name, "content": body,
        "required_environment_variables": required,
        "missing_required_environment_variables": missing,
        "setup_needed": !missing.is_empty(),
        "setup_skipped": skipped,
        "readiness_status": if missing.is_empty() { "available" } else { "setup_needed" },
    });
    if !missing.is_empty() {
        let vars: Vec<String> = missing.iter().map(|m| format!("${m}")).collect();
        let help = needs
            .iter()
            .find_map(|n| n.help.clone())
            .unwrap_or_default();
        out["setup_note"] = json!(
            format!(
                "Setup needed before using this skill: missing env {}. {help}",
                vars.join(", ")
            )
            .trim_end()
            .to_owned()
        );
    }
    out
}
