//! The skills tools: `skills_list` and `skill_view` over a [`SkillLibrary`].

use herald_agent::skills::SkillLibrary;
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
    fn run<'a>(&'a self, args: Value, _ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let Some(name) = args["name"].as_str() else {
                return json!({"error": "`name` is required"}).to_string();
            };
            match self.library.load(name) {
                Some(body) => json!({"name": name, "content": body}).to_string(),
                None => json!({"error": format!("no skill named `{name}`; use skills_list to see what is installed")}).to_string(),
            }
        })
    }
}
