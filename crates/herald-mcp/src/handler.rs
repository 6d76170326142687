//! What herald answers an MCP server that speaks first: a changed tool list starts a
//! refresh; a sampling request goes to the server's sampling [`crate::sampling::Policy`]
//! when its `sampling` is enabled, and is refused otherwise.

#![allow(deprecated)] // Sampling is deprecated by SEP-2577, but servers written for Hermes use it.
use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    Implementation,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use std::sync::Arc;

/// herald's side of one connection.
#[derive(Clone)]
pub struct Handler {
    pub(crate) changed: Arc<tokio::sync::Notify>,
    pub(crate) sampling: Option<Arc<crate::sampling::Policy>>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if self.sampling.is_some() {
            // With tools: a server may then send tools and get tool-use answers.
            let mut sampling = rmcp::model::SamplingCapability::default();
            sampling.tools = Some(Default::default());
            capabilities.sampling = Some(sampling);
        }
        ClientConfig::new(
            capabilities,
            Implementation::new("herald", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed.notify_one();
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, rmcp::ErrorData> {
        let Some(policy) = &self.sampling else {
            return Err(rmcp::ErrorData::invalid_request(
                "sampling is disabled for this server",
                None,
            ));
        };
        let params = serde_json::to_value(&params)
            .map_err(|e| rmcp::ErrorData::internal_error(e.to_string(), None))?;
        let answer = policy
            .answer(&params)
            .await
            .map_err(|e| rmcp::ErrorData::new(rmcp::model::ErrorCode(-1), e, None))?;
        serde_json::from_value(answer)
            .map_err(|e| rmcp::ErrorData::internal_error(e.to_string(), None))
    }
}
