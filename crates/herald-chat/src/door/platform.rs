//! What a platform gives the door: how a stored message reads, and how text, buttons,
//! edits and typing reach a chat.

use super::outcome::SendFailure;
use crate::key::Source;
use herald_store::InboxItem;
use std::future::Future;

/// Where a message goes: a chat (and a topic in it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatRef {
    pub chat_id: i64,
    pub thread_id: Option<i64>,
    /// A group (its own, slower send limit).
    pub group: bool,
}

/// A message the door acts on.
#[derive(Debug, Clone)]
pub struct Inbound {
    pub source: Source,
    pub chat: ChatRef,
    pub text: String,
    /// The sender is on no allow-list and wrote in private: their name (for pairing).
    pub stranger: Option<String>,
    /// A button pressed under one of the bot's messages.
    pub click: Option<Click>,
    /// Images sent with the message (the platform's file ids).
    pub images: Vec<String>,
    /// The message's own id (an answer replies to it, as `reply_to_mode` says).
    pub message_id: Option<i64>,
}

/// A button pressed: its platform id (to answer), its data, the message it is under
/// and who pressed it.
#[derive(Debug, Clone)]
pub struct Click {
    pub id: String,
    pub data: String,
    pub message_id: String,
    pub by: String,
}

/// What a platform does for the door.
pub trait Platform: Send + Sync + 'static {
    /// The platform's name (`telegram`), as sessions' `source`.
    const NAME: &'static str;
    /// Sends `text` (Markdown as the model writes it) to `chat`, as a reply to message
    /// `reply_to` when given (the platform's reply mode says which parts): the ids of
    /// the messages it became.
    fn send(
        &self,
        chat: &ChatRef,
        text: &str,
        reply_to: Option<i64>,
    ) -> impl Future<Output = Result<Vec<String>, SendFailure>> + Send;
    /// Shows that an answer is being written (refreshed while a turn runs).
    fn typing(&self, chat: &ChatRef) -> impl Future<Output = ()> + Send;
    /// The message an inbox entry holds, or why the door leaves it alone.
    fn read(&self, item: &InboxItem) -> Result<Inbound, String>;
    /// The chat an entry is from, cheaply (entries of one chat are taken in order).
    fn chat_of(&self, item: &InboxItem) -> Option<i64>;
    /// Sends an approval request with Allow once / Session / Always / Deny buttons
    /// whose data is `ap:<token>:<o|s|a|d>`: the id of the message.
    fn send_approval(
        &self,
        chat: &ChatRef,
        token: &str,
        text: &str,
    ) -> impl Future<Output = Result<Option<String>, SendFailure>> + Send;
    /// Replaces a message's text (and takes its buttons away).
    fn edit(&self, chat: &ChatRef, message_id: &str, text: &str)
    -> impl Future<Output = ()> + Send;
    /// An image the platform keeps, as a `data:` URL (at most
    /// [`herald_session::images::MAX_ATTACHED_BYTES`]).
    fn image(&self, file_id: &str) -> impl Future<Output = Result<String, String>> + Send;
    /// Answers a button press (the client stops its spinner).
    fn answer_click(&self, click_id: &str, text: &str) -> impl Future<Output = ()> + Send;
}
