//! Dangerous commands asked of the IDE (acp.md §5): `session/request_permission` with
//! the spec's options, the outcome mapped onto the host's decisions; no answer within
//! `approvals.timeout` (60 s by default) is a deny, decided by the host's own timer (its
//! denial says so to the model); this door only stops waiting a little after it.

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ContentBlock, PermissionOption, PermissionOptionKind, RequestPermissionOutcome,
    RequestPermissionRequest, TextContent, ToolCallContent, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind,
};
use herald_session::Decision;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

static NEXT: AtomicU64 = AtomicU64::new(1);

/// How long past `approvals.timeout` the door keeps waiting, so that the host's timer
/// (not this one) decides a silence.
const GRACE: Duration = Duration::from_secs(2);

/// What the IDE did with one permission request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// It selected this option.
    Selected(String),
    /// It cancelled or answered with an error.
    Refused,
    /// It said nothing before the host's timeout (and the grace after it).
    Silent,
}

fn options() -> Vec<PermissionOption> {
    [
        ("allow_once", "Allow once", PermissionOptionKind::AllowOnce),
        (
            "allow_session",
            "Allow for this session",
            PermissionOptionKind::AllowAlways,
        ),
        (
            "allow_always",
            "Always allow",
            PermissionOptionKind::AllowAlways,
        ),
        ("deny", "Deny", PermissionOptionKind::RejectOnce),
        (
            "deny_always",
            "Always deny",
            PermissionOptionKind::RejectAlways,
        ),
    ]
    .into_iter()
    .map(|(id, name, kind)| PermissionOption::new(id, name, kind))
    .collect()
}

fn decision(option: &str) -> Decision {
    match option {
        "allow_once" => Decision::Once,
        "allow_session" => Decision::Session,
        "allow_always" => Decision::Always,
        _ => Decision::Deny,
    }
}

/// Asks the IDE about `command`: an allow, or a deny for an error or a cancel; `None`
/// for silence, which the host's timeout has already answered.
pub async fn ask(
    cx: &ConnectionTo<Client>,
    session_id: &str,
    command: &str,
    reason: &str,
    within: Duration,
) -> Option<Decision> {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let text = ContentBlock::Text(TextContent::new(format!("{reason}\n$ {command}")));
    let fields = ToolCallUpdateFields::new()
        .title(format!("{reason}: {command}"))
        .kind(ToolKind::Execute)
        .status(ToolCallStatus::Pending)
        .content(vec![ToolCallContent::from(text)]);
    let call = ToolCallUpdate::new(format!("perm-check-{n}"), fields);
    let request = RequestPermissionRequest::new(session_id.to_owned(), call, options());
    match selected(cx, request, within).await {
        Answer::Selected(option) => Some(decision(&option)),
        Answer::Refused => Some(Decision::Deny),
        Answer::Silent => None,
    }
}

/// What the IDE did with `request`, waited for until `within` and its grace have passed.
pub async fn selected(
    cx: &ConnectionTo<Client>,
    request: RequestPermissionRequest,
    within: Duration,
) -> Answer {
    let answer = cx.send_request(request).block_task();
    match tokio::time::timeout(within + GRACE, answer).await {
        Ok(Ok(r)) => match r.outcome {
            RequestPermissionOutcome::Selected(s) => Answer::Selected(s.option_id.to_string()),
            _ => Answer::Refused,
        },
        Ok(Err(_)) => Answer::Refused,
        Err(_) => Answer::Silent,
    }
}
