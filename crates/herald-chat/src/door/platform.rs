//! What a platform gives the door: how a stored message reads, and how text, buttons,
//! edits and typing reach a chat.

use super::outcome::SendFailure;
use crate::key::Source;
use herald_store::InboxItem;
use std::future::Future;

/// Where a message goes: a chat (and a topic in it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatRef {
    pub chat_id: String,
    pub thread_id: Option<String>,
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
    /// Files sent with the message (photos reach the model as images, others are saved
    /// in the session's folder).
    pub files: Vec<Attachment>,
    /// The message's own id (an answer replies to it, as `reply_to_mode` says).
    pub message_id: Option<String>,
}

/// A file attached to a message, as the platform names it.
#[derive(Debug, Clone)]
pub struct Attachment {
    pub file_id: String,
    pub name: Option<String>,
    /// Its size, when the platform says.
    pub size: Option<u64>,
    pub mime: Option<String>,
    pub kind: AttachmentKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachmentKind {
    Photo,
    Document,
    Voice,
    Audio,
    Video,
}

/// A file an answer sends (a `MEDIA:` line), read and checked.
#[derive(Debug, Clone)]
pub struct OutFile {
    pub name: String,
    pub bytes: Vec<u8>,
    pub kind: OutKind,
}

/// How a file is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutKind {
    Photo,
    Voice,
    Audio,
    Video,
    Document,
}

/// What a reaction on the user's message says of its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    Working,
    Done,
    Failed,
    /// The turn was cancelled: the reaction goes.
    Clear,
}

/// A file fetched from the platform: its bytes and the platform's path (its extension
/// says its type).
#[derive(Debug, Clone)]
pub struct Downloaded {
    pub bytes: Vec<u8>,
    pub path: String,
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
        reply_to: Option<&str>,
    ) -> impl Future<Output = Result<Vec<String>, SendFailure>> + Send;
    /// Sends `text` as it is (no formatting, at most one message, no wait on a flood):
    /// the message's id.
    fn send_plain(
        &self,
        chat: &ChatRef,
        text: &str,
    ) -> impl Future<Output = Result<String, SendFailure>> + Send;
    /// Shows that an answer is being written (refreshed while a turn runs).
    fn typing(&self, chat: &ChatRef) -> impl Future<Output = ()> + Send;
    /// The message an inbox entry holds, or why the door leaves it alone.
    fn read(&self, item: &InboxItem) -> impl Future<Output = Result<Inbound, String>> + Send;
    /// The chat an entry is from, cheaply (entries of one chat are taken in order).
    fn chat_of(&self, item: &InboxItem) -> Option<String>;
    /// Sends an approval request with Allow once / Session / Always / Deny buttons
    /// whose data is `ap:<token>:<o|s|a|d>`: the id of the message.
    fn send_approval(
        &self,
        chat: &ChatRef,
        token: &str,
        text: &str,
    ) -> impl Future<Output = Result<Option<String>, SendFailure>> + Send;
    /// Replaces a message's text (and takes its buttons away); `formatted`: the text is
    /// Markdown to render, else shown as it is.
    fn edit(
        &self,
        chat: &ChatRef,
        message_id: &str,
        text: &str,
        formatted: bool,
    ) -> impl Future<Output = Result<(), SendFailure>> + Send;
    /// Deletes one of the bot's messages (a preview the answer replaces).
    fn delete(&self, chat: &ChatRef, message_id: &str) -> impl Future<Output = ()> + Send;
    /// Fetches a file the platform keeps, refusing more than `max` bytes.
    fn download(
        &self,
        file_id: &str,
        max: u64,
    ) -> impl Future<Output = Result<Downloaded, String>> + Send;
    /// Sends a file to `chat`: the id of the message.
    fn send_file(
        &self,
        chat: &ChatRef,
        file: OutFile,
    ) -> impl Future<Output = Result<String, SendFailure>> + Send;
    /// Marks the user's message with a reaction (when the platform's setting turns
    /// reactions on; else nothing).
    fn react(
        &self,
        chat: &ChatRef,
        message_id: &str,
        mark: Mark,
    ) -> impl Future<Output = ()> + Send;
    /// Answers a button press (the client stops its spinner).
    fn answer_click(&self, click_id: &str, text: &str) -> impl Future<Output = ()> + Send;
}
