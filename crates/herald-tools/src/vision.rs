//! `vision_analyze`: asks the model about an image (an `http(s)` or `data:` URL, or in
//! interactive runs a local file), through the same chat completions endpoint.

use base64::Engine;
use herald_agent::tool::{Tool, ToolContext, ToolFuture};
use herald_llm::{LlmClient, SharedEndpoint};
use serde_json::{Value, json};

/// Largest local image sent.
pub const MAX_IMAGE_BYTES: u64 = 10 * 1024 * 1024;

pub struct VisionAnalyze {
    pub client: LlmClient,
    pub endpoint: SharedEndpoint,
    /// Local file paths allowed (never for webhook-started runs).
    pub allow_local_files: bool,
}

fn mime_for(path: &std::path::Path) -> &'static str {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("png") => "image/png",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        _ => "image/jpeg",
    }
}

impl VisionAnalyze {
    async fn image_url(&self, source: &str, ctx: &ToolContext) -> Result<String, String> {
        let lower = source.trim().to_ascii_lowercase();
        if lower.starts_with("http://")
            || lower.starts_with("https://")
            || lower.starts_with("data:image/")
        {
            return Ok(source.trim().to_owned());
        }
        if !self.allow_local_files {
            return Err("only http(s) and data: image URLs are accepted in this run".into());
        }
        let path = if std::path::Path::new(source).is_absolute() {
            std::path::PathBuf::from(source)
        } else {
            ctx.cwd.join(source)
        };
        let meta = tokio::fs::metadata(&path)
            .await
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if meta.len() > MAX_IMAGE_BYTES {
            return Err(format!("{} is larger than 10 MiB", path.display()));
        }
        let bytes = tokio::fs::read(&path)
            .await
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Ok(format!(
            "data:{};base64,{}",
            mime_for(&path),
            base64::engine::general_purpose::STANDARD.encode(bytes)
        ))
    }
}

impl Tool for VisionAnalyze {
    fn name(&self) -> &str {
        "vision_analyze"
    }
    fn description(&self) -> &str {
        "Describe or answer a question about an image given by URL (or a local file in interactive runs)."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
            "image_url": {"type": "string"}, "question": {"type": "string"}
        }, "required": ["image_url"]})
    }
    fn parallel_safe(&self) -> bool {
        true
    }
    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let Some(source) = args["image_url"].as_str() else {
                return json!({"error": "`image_url` is required"}).to_string();
            };
            let question = args["question"]
                .as_str()
                .unwrap_or("Describe this image in detail.");
            let url = match self.image_url(source, ctx).await {
                Ok(u) => u,
                Err(e) => return json!({ "error": e }).to_string(),
            };
            let endpoint = self.endpoint.get();
            let body = json!({
                "model": endpoint.model,
                "messages": [{"role": "user", "content": [
                    {"type": "text", "text": question},
                    {"type": "image_url", "image_url": {"url": url}}
                ]}],
                "stream": true,
                "stream_options": {"include_usage": true}
            });
            match self.client.stream_body(&endpoint, &body, &mut |_| {}).await {
                Ok(c) => {
                    let text = c
                        .choices
                        .first()
                        .and_then(|ch| ch.message.content.clone())
                        .unwrap_or_default();
                    json!({ "analysis": text }).to_string()
                }
                Err(e) => json!({ "error": format!("vision model call failed: {}", e.message) })
                    .to_string(),
            }
        })
    }
}
