//! `clarify`: asks the human a question. In runs with no one to ask (webhooks, `-q`),
//! it answers so at once and the model should go on with its best judgement.

use herald_agent::tool::{Tool, ToolContext, ToolFuture};
use serde_json::{Value, json};

pub struct Clarify;

impl Tool for Clarify {
    fn name(&self) -> &str {
        "clarify"
    }
    fn description(&self) -> &str {
        "Ask the user a clarifying question when the request is ambiguous."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"question": {"type": "string"}, "choices": {"type": "array", "items": {"type": "string"}}}, "required": ["question"]})
    }
    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let question = args["question"].as_str().unwrap_or("").to_owned();
            let choices = herald_agent::tool::string_list(&args["choices"]);
            let Some(clarifier) = &ctx.clarifier else {
                return json!({"answer": null, "error": "No one is available to answer questions in this run; proceed with your best judgement and state your assumptions."}).to_string();
            };
            ctx.notify(herald_agent::AgentEvent::ClarifyRequested {
                call_id: ctx.call_id.clone(),
                question: question.clone(),
            });
            let request = herald_agent::tool::ClarifyRequest {
                id: &ctx.call_id,
                question: &question,
                choices: &choices,
            };
            match clarifier.ask(request).await {
                Some(answer) => json!({ "answer": answer }).to_string(),
                None => json!({"answer": null, "error": "No answer came; proceed with your best judgement and state your assumptions."}).to_string(),
            }
        })
    }
}
