//! What a session is on the host: its typed errors (the codes of each wire are mapped
//! at the front door) and the one conversion between stored rows and messages.

use herald_protocol::{ChatMessage, Role};
use herald_store::StoreError;
use herald_store::sessions::{NewMessage, RewindRefused, StoredMessage};

/// Why a session operation was refused or failed; nothing was written when refused.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("no session with id {0}")]
    NotFound(String),
    /// The session runs a turn already.
    #[error("session {0} is busy with a turn")]
    Busy(String),
    /// Malformed rewind parameters (a boolean or non-integer ordinal, a confirmation
    /// without a target, an ordinal alone on a stored session).
    #[error("{0}")]
    BadRewind(String),
    /// A rewind target without `confirm_truncate`.
    #[error("truncation needs confirm_truncate")]
    NotConfirmed,
    /// The cut would empty the transcript without `confirm_empty_truncate`.
    #[error("the cut would leave nothing: confirm_empty_truncate is needed")]
    WouldEmpty,
    /// The target is no longer (or never was) a live user turn of the session.
    #[error("target user message is no longer in session history: {0}")]
    StaleTarget(String),
    /// The ordinal and the row id name different turns.
    #[error("truncate_before_user_ordinal and truncate_before_row_id name different turns")]
    Disagree,
    /// As many prompts as a conversation keeps wait already behind its turn.
    #[error("{0} prompts wait already; send this one when the turn ends")]
    QueueFull(usize),
    /// Too many runs are live at once.
    #[error("too many runs at once ({0}); try again when one has finished")]
    TooManyRuns(usize),
    #[error("the session store failed: {0}")]
    Store(#[from] StoreError),
    /// The model could not summarize the conversation.
    #[error("compression failed: {0}")]
    Compress(String),
}

/// What a client is told of a failure inside herald (the store): its detail can name
/// paths and internals, so it stays in the log.
pub const FAILED_INSIDE: &str =
    "The server could not complete the request; the reason is in its log.";

impl SessionError {
    /// What every front door tells its client of this error: the client's own mistakes
    /// in their words; a failure of the store as [`FAILED_INSIDE`], its detail logged
    /// here, once per failure.
    pub fn told(&self) -> std::borrow::Cow<'static, str> {
        match self {
            SessionError::Store(e) => {
                tracing::error!(error = %e, "a request failed in the session store");
                std::borrow::Cow::Borrowed(FAILED_INSIDE)
            }
            other => std::borrow::Cow::Owned(other.to_string()),
        }
    }
}

impl From<RewindRefused> for SessionError {
    fn from(r: RewindRefused) -> SessionError {
        match r {
            RewindRefused::StaleRow(_) | RewindRefused::OrdinalOutOfRange { .. } => {
                SessionError::StaleTarget(r.to_string())
            }
            RewindRefused::Disagree { .. } => SessionError::Disagree,
            RewindRefused::RowIdRequired => SessionError::BadRewind(r.to_string()),
            RewindRefused::WouldEmpty => SessionError::WouldEmpty,
        }
    }
}

/// A message as a row to store.
pub fn message_row(m: &ChatMessage) -> NewMessage {
    NewMessage {
        role: m.role.as_str().to_owned(),
        content: m.content.clone(),
        tool_call_id: m.tool_call_id.clone(),
        tool_calls: (!m.tool_calls.is_empty())
            .then(|| serde_json::to_string(&m.tool_calls).unwrap_or_default()),
        tool_name: m.name.clone(),
        reasoning: m.reasoning.clone(),
        finish_reason: None,
    }
}

/// A stored row back as a message (`None` for rows of other roles).
pub fn to_message(r: StoredMessage) -> Option<ChatMessage> {
    let role = match r.role.as_str() {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "tool" => Role::Tool,
        _ => return None,
    };
    Some(ChatMessage {
        role,
        content: r.content,
        images: Vec::new(),
        tool_calls: r
            .tool_calls
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default(),
        tool_call_id: r.tool_call_id,
        name: r.tool_name,
        reasoning: None,
    })
}
