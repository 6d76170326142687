//! The host's stored sessions as a whole: listing, counters, titles, deleting, undo.

use super::{Host, Session};
use crate::sessions::SessionError;
use herald_protocol::{ChatMessage, Role};
use herald_store::sessions::{NewMessage, SessionSummary, SessionUsage, TitleRefused};

const SUMMARIZE: &str = "You compress conversations. Summarize the conversation below so that an assistant can carry on from it: the user's goals, the decisions made, facts learned, files and commands involved, and what is still open. Be concise and concrete; write the summary only.";

/// What a compression did.
#[derive(Debug, Clone, PartialEq)]
pub struct Compressed {
    /// Messages replaced by the summary.
    pub removed: usize,
    /// Recent messages kept after it.
    pub kept: usize,
    pub summary: String,
}

fn transcript(history: &[super::Saved]) -> String {
    history
        .iter()
        .filter_map(|s| {
            let m = &s.message;
            let text = m.content.as_deref().unwrap_or_default();
            let calls: Vec<&str> = m
                .tool_calls
                .iter()
                .map(|c| c.function.name.as_str())
                .collect();
            match (text.is_empty(), calls.is_empty()) {
                (true, true) => None,
                (true, false) => Some(format!("{}: [calls {}]", m.role.as_str(), calls.join(", "))),
                _ => Some(format!("{}: {text}", m.role.as_str())),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

impl Host {
    /// The most recently started stored sessions, newest first.
    pub async fn list_sessions(&self, limit: usize) -> Result<Vec<SessionSummary>, SessionError> {
        Ok(self.store.list(limit).await?)
    }

    /// A stored session's model and token counters.
    pub async fn session_usage(&self, id: &str) -> Result<Option<SessionUsage>, SessionError> {
        Ok(self.store.usage(id.to_owned()).await?)
    }

    /// A stored session's title.
    pub async fn session_title(&self, id: &str) -> Result<Option<String>, SessionError> {
        match self.store.session(id.to_owned()).await? {
            Some(row) => Ok(row.title),
            None => Err(SessionError::NotFound(id.to_owned())),
        }
    }

    /// Sets a stored session's title; the title as kept, or why not.
    pub async fn set_session_title(
        &self,
        id: &str,
        title: String,
    ) -> Result<Result<String, TitleRefused>, SessionError> {
        Ok(self.store.set_title(id.to_owned(), title).await?)
    }

    /// A stored session's header (`None`: no such session).
    pub async fn session_row(
        &self,
        id: &str,
    ) -> Result<Option<herald_store::sessions::SessionRow>, SessionError> {
        Ok(self.store.session(id.to_owned()).await?)
    }

    /// A stored session's live messages, in order, as kept.
    pub async fn stored_messages(
        &self,
        id: &str,
    ) -> Result<Vec<herald_store::sessions::StoredMessage>, SessionError> {
        Ok(self.store.history(id.to_owned()).await?)
    }

    /// Creates an empty stored session (its first turn fills it); false when one of
    /// this id exists already.
    pub async fn create_session(
        &self,
        session: herald_store::sessions::NewSession,
    ) -> Result<bool, SessionError> {
        if self.store.session(session.id.clone()).await?.is_some() {
            return Ok(false);
        }
        let id = session.id.clone();
        self.store.ensure_session(session)?;
        // An awaited write queued after it: the session is there once this returns.
        self.store.finish_turn(id, (0, 0, 0), None).await?;
        Ok(true)
    }

    /// Ends a stored session with `reason` (as Hermes's `end_reason`); false without it.
    pub async fn end_session(&self, id: &str, reason: &str) -> Result<bool, SessionError> {
        Ok(self
            .store
            .end_session(id.to_owned(), reason.to_owned())
            .await?)
    }

    /// Copies a stored session's live messages into a new session `new_id` whose parent
    /// it is (titled `name`, else the next title of its lineage) and ends it as
    /// `branched`, as Hermes's `/branch` does; the new title, `None` without the parent.
    pub async fn fork_session(
        &self,
        parent: &str,
        new_id: &str,
        name: Option<String>,
    ) -> Result<Option<String>, SessionError> {
        let title = self
            .store
            .branch(parent.to_owned(), new_id.to_owned(), name)
            .await?;
        if title.is_some() {
            self.end_session(parent, "branched").await?;
        }
        Ok(title)
    }

    /// Deletes a stored session; false when there was none.
    pub async fn delete_session(&self, id: &str) -> Result<bool, SessionError> {
        Ok(self.store.delete_session(id.to_owned()).await?)
    }

    /// Compresses `session`'s context: everything before its last user message is
    /// summarized by the session's model (with `focus`, when given) and replaced by the
    /// summary; the last exchange stays as it was. Nothing to compress is no change.
    pub async fn compress(
        &self,
        session: &Session,
        focus: Option<&str>,
    ) -> Result<Compressed, SessionError> {
        if session.running().is_some() {
            return Err(SessionError::Busy(session.id().to_owned()));
        }
        let history = session.history();
        let cut = history
            .iter()
            .rposition(|s| s.message.role == Role::User)
            .unwrap_or(0);
        if cut == 0 {
            let kept = history.len();
            return Ok(Compressed {
                removed: 0,
                kept,
                summary: String::new(),
            });
        }
        let focus = focus
            .map(|f| format!("Focus on: {f}\n\n"))
            .unwrap_or_default();
        let ask = [
            ChatMessage::system(SUMMARIZE),
            ChatMessage::user(format!("{focus}{}", transcript(&history[..cut]))),
        ];
        let endpoint = session
            .endpoint()
            .unwrap_or_else(|| self.runtime.endpoint());
        let answer = self
            .client
            .stream_once(&endpoint, &ask, &[], &mut |_| {})
            .await
            .map_err(|e| SessionError::Compress(e.message))?;
        let summary = answer
            .choices
            .into_iter()
            .next()
            .and_then(|c| c.message.content)
            .filter(|s| !s.trim().is_empty())
            .ok_or_else(|| SessionError::Compress("the model returned no summary".into()))?;
        let row = NewMessage {
            role: "user".into(),
            content: Some(format!("[Summary of the earlier conversation]\n{summary}")),
            ..Default::default()
        };
        let kept = history.len() - cut;
        self.store
            .compact(session.id().to_owned(), row, kept)
            .await?;
        session.set_history(self.history_of(session).await?);
        session.state().compressions += 1;
        Ok(Compressed {
            removed: cut,
            kept,
            summary,
        })
    }

    /// Undoes `session`'s last exchange (refused while it runs a turn); how many
    /// messages left its history.
    pub async fn undo(&self, session: &Session) -> Result<usize, SessionError> {
        if session.running().is_some() {
            return Err(SessionError::Busy(session.id().to_owned()));
        }
        let removed = self.store.undo(session.id().to_owned()).await?;
        session.set_history(self.history_of(session).await?);
        Ok(removed)
    }
}
