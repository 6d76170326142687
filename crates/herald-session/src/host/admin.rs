//! The host's stored sessions as a whole: listing, counters, titles, deleting, undo.

use super::{Host, Session, saved_history};
use crate::sessions::SessionError;
use herald_store::sessions::{SessionSummary, SessionUsage, TitleRefused};

impl Host {
    /// The most recently started stored sessions, newest first.
    pub fn list_sessions(&self, limit: usize) -> Result<Vec<SessionSummary>, SessionError> {
        self.read(|r| r.list(limit))
    }

    /// A stored session's model and token counters.
    pub fn session_usage(&self, id: &str) -> Result<Option<SessionUsage>, SessionError> {
        self.read(|r| r.usage(id))
    }

    /// A stored session's title.
    pub fn session_title(&self, id: &str) -> Result<Option<String>, SessionError> {
        match self.read(|r| r.session(id))? {
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

    /// Deletes a stored session; false when there was none.
    pub async fn delete_session(&self, id: &str) -> Result<bool, SessionError> {
        Ok(self.store.delete_session(id.to_owned()).await?)
    }

    /// Undoes `session`'s last exchange (refused while it runs a turn); how many
    /// messages left its history.
    pub async fn undo(&self, session: &Session) -> Result<usize, SessionError> {
        if session.running().is_some() {
            return Err(SessionError::Busy(session.id().to_owned()));
        }
        let removed = self.store.undo(session.id().to_owned()).await?;
        session.set_history(saved_history(self.read(|r| r.history(session.id()))?));
        Ok(removed)
    }
}
