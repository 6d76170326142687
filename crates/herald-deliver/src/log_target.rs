//! `log`: the message goes to herald's log (first 200 characters).

use crate::{OutgoingMessage, Receipt, SendFuture, Target};

pub struct LogTarget;

impl Target for LogTarget {
    fn name(&self) -> &str {
        "log"
    }
    fn send<'a>(&'a self, message: &'a OutgoingMessage) -> SendFuture<'a> {
        let preview: String = message.text.chars().take(200).collect();
        tracing::info!(target: "herald::deliver", message = %preview, "delivered to log");
        Box::pin(async { Ok(Receipt::default()) })
    }
}
