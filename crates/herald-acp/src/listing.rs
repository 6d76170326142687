//! `session/list` (acp.md §2): stored sessions that have a prompt, newest first,
//! filtered by folder, paginated by the last session id seen.

use crate::AcpServer;
use agent_client_protocol::v1::schema::{ListSessionsRequest, ListSessionsResponse, SessionInfo};

/// Sessions per page.
pub const PAGE: usize = 50;
/// Stored sessions looked at, at most.
const SCAN: usize = 10_000;

/// Unix seconds as RFC 3339 (`None` when out of range).
fn rfc3339(secs: f64) -> Option<String> {
    let nanos = (secs * 1e9) as i128;
    jiff::Timestamp::from_nanosecond(nanos)
        .ok()
        .map(|t| t.round(jiff::Unit::Second).unwrap_or(t).to_string())
}

pub async fn list(server: &AcpServer, request: &ListSessionsRequest) -> ListSessionsResponse {
    let all = server.host.list_sessions(SCAN).await.unwrap_or_default();
    let cwd = request.cwd.as_ref().map(|c| c.display().to_string());
    let mut matching = all
        .into_iter()
        .filter(|s| s.message_count > 0)
        .filter(|s| cwd.is_none() || s.cwd == cwd)
        .skip_while(|s| request.cursor.as_ref().is_some_and(|c| &s.id != c))
        .skip(usize::from(request.cursor.is_some()));
    let page: Vec<SessionInfo> = matching
        .by_ref()
        .take(PAGE)
        .map(|s| {
            let title = s
                .title
                .clone()
                .or_else(|| Some(s.preview.clone()).filter(|p| !p.is_empty()));
            SessionInfo::new(s.id.clone(), s.cwd.clone().unwrap_or_default())
                .title(title)
                .updated_at(rfc3339(s.updated_at))
        })
        .collect();
    let more = matching.next().is_some();
    let next = page
        .last()
        .filter(|_| more)
        .map(|s| s.session_id.to_string());
    ListSessionsResponse::new(page).next_cursor(next)
}
