//! What herald answers an MCP server that speaks first: a changed tool list starts a
//! refresh; a sampling request goes to the [`Sampler`] when the server's `sampling` is
//! enabled, and is refused otherwise.

#![allow(deprecated)] // Sampling is deprecated by SEP-2577, but servers written for Hermes use it.
use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    Implementation,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// Answers a server's `sampling/createMessage` (its params as JSON) with a result as
/// JSON, or an error message.
pub trait Sampler: Send + Sync {
    fn sample(
        &self,
        params: Value,
    ) -> Pin<Box<dyn Future<Output = Result<Value, String>> + Send + '_>>;
}

/// herald's side of one connection.
#[derive(Clone)]
pub struct Handler {
    pub(crate) changed: Arc<tokio::sync::Notify>,
    pub(crate) sampler: Option<Arc<dyn Sampler>>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if self.sampler.is_some() {
            capabilities.sampling = Some(Default::default());
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
        let Some(sampler) = &self.sampler else {
            return Err(rmcp::ErrorData::invalid_request(
                "sampling is disabled for this server",
                None,
            ));
        };
        let params = serde_json::to_value(&params)
            .map_err(|e| rmcp::ErrorData::internal_error(e.to_string(), None))?;
        let answer = sampler
            .sample(params)
            .await
            .map_err(|e| rmcp::ErrorData::new(rmcp::model::ErrorCode(-1), e, None))?;
        serde_json::from_value(answer)
            .map_err(|e| rmcp::ErrorData::internal_error(e.to_string(), None))
    }
}
