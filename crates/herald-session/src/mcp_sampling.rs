//! MCP servers' sampling requests through the host's provider: the runtime's endpoint
//! (the server's model when its `sampling.model` or hint names one), herald's
//! provider client, no tools of herald's own.

use crate::runtime::Runtime;
use herald_llm::LlmClient;
use herald_mcp::Sampler;
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;
use std::sync::Weak;

/// Answers sampling requests with one runtime's model (held weakly: the runtime holds
/// the servers, which hold this).
pub struct HostSampler {
    pub client: LlmClient,
    pub runtime: Weak<Runtime>,
}

impl Sampler for HostSampler {
    fn complete(
        &self,
        mut body: Value,
    ) -> Pin<Box<dyn Future<Output = Result<Value, String>> + Send + '_>> {
        Box::pin(async move {
            let runtime = self.runtime.upgrade().ok_or("herald is stopping")?;
            let mut endpoint = runtime.endpoint();
            if let Some(model) = body["model"].as_str().filter(|m| !m.is_empty()) {
                endpoint.model = model.to_owned();
            }
            body["model"] = Value::String(endpoint.model.clone());
            let completion = self
                .client
                .stream_body(&endpoint, &body, &mut |_| {})
                .await
                .map_err(|e| e.message)?;
            serde_json::to_value(&completion).map_err(|e| e.to_string())
        })
    }
}
