//! `log`: the message goes to herald's log, quoted and escaped (a model's answer or a
//! payload's text cannot start a line of its own) and cut to 200 bytes.

use crate::{OutgoingMessage, Receipt, SendFuture, Target};
use herald_webhook::quoted::quoted;

pub struct LogTarget;

impl Target for LogTarget {
    fn name(&self) -> &str {
        "log"
    }
    fn send<'a>(&'a self, message: &'a OutgoingMessage) -> SendFuture<'a> {
        tracing::info!(target: "herald::deliver", message = %quoted(&message.text), "delivered to log");
        Box::pin(async { Ok(Receipt::default()) })
    }
}
