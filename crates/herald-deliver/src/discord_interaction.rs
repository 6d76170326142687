//! The answer to a Discord interaction a `source: discord` route deferred: the first
//! part edits the deferred response (`PATCH /webhooks/{application}/{token}/messages/@original`),
//! the rest are follow-up messages. The interaction token is the credential (it lasts
//! 15 minutes), so no bot token is needed.

use crate::discord::Discord;
use crate::split::{DISCORD_MAX_CHARS, char_len, split_message};
use crate::{OutgoingMessage, Receipt, SendError, SendFuture, Target};

/// The `deliver_extra` keys the gateway fills from the interaction.
pub const APPLICATION_ID: &str = "application_id";
pub const INTERACTION_TOKEN: &str = "interaction_token";

pub struct DiscordInteraction(pub Discord);

impl DiscordInteraction {
    async fn send_text(&self, message: &OutgoingMessage) -> Result<Receipt, SendError> {
        let (Some(app), Some(token)) = (
            message.extra_text(APPLICATION_ID),
            message.extra_text(INTERACTION_TOKEN),
        ) else {
            return Err(SendError::permanent(
                "discord_interaction: the event carries no interaction (application_id and token): \
                 only a `source: discord` route can deliver here",
            ));
        };
        let is_id = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        // Only the characters Discord's tokens use, never a `..` path segment.
        let token_ok = token
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
            && !token.contains("..")
            && token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
        if !is_id(&app) || !token_ok {
            return Err(SendError::permanent(
                "discord_interaction: the interaction's application id or token is malformed",
            ));
        }
        let hook = format!(
            "{}/webhooks/{app}/{token}",
            self.0.base_url.trim_end_matches('/')
        );
        let mut receipt = Receipt::default();
        let parts = split_message(&message.text, DISCORD_MAX_CHARS, char_len);
        for (i, part) in parts.iter().enumerate() {
            let (method, url) = if i == 0 {
                (reqwest::Method::PATCH, format!("{hook}/messages/@original"))
            } else {
                (reqwest::Method::POST, format!("{hook}?wait=true"))
            };
            let sent = self.0.request(method, &url, None, part).await?;
            receipt.message_ids.extend(sent);
        }
        Ok(receipt)
    }
}

impl Target for DiscordInteraction {
    fn name(&self) -> &str {
        "discord_interaction"
    }
    fn send<'a>(&'a self, message: &'a OutgoingMessage) -> SendFuture<'a> {
        Box::pin(self.send_text(message))
    }
}
