//! Dangerous commands asked of the IDE (acp.md §5): `session/request_permission` with
//! the spec's options, the outcome mapped onto the host's decisions; no answer within
//! `approvals.timeout` (60 s by default) is a deny.

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

/// Asks the IDE about `command`; anything but an allow (an error, a cancel, silence)
/// is a deny.
pub async fn ask(
    cx: &ConnectionTo<Client>,
    session_id: &str,
    command: &str,
    reason: &str,
    within: Duration,
) -> Decision {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let text = ContentBlock::Text(TextContent::new(format!("{reason}\n$ {command}")));
    let fields = ToolCallUpdateFields::new()
        .title(format!("{reason}: {command}"))
        .kind(ToolKind::Execute)
        .status(ToolCallStatus::Pending)
        .content(vec![ToolCallContent::from(text)]);
    let call = ToolCallUpdate::new(format!("perm-check-{n}"), fields);
    let request = RequestPermissionRequest::new(session_id.to_owned(), call, options());
    selected(cx, request, within)
        .await
        .map_or(Decision::Deny, |option| decision(&option))
}

/// The option the IDE selected; `None` for a cancel, an error or silence for `within`.
pub async fn selected(
    cx: &ConnectionTo<Client>,
    request: RequestPermissionRequest,
    within: Duration,
) -> Option<String> {
    let answer = cx.send_request(request).block_task();
    match tokio::time::timeout(within, answer).await {
        Ok(Ok(r)) => match r.outcome {
            RequestPermissionOutcome::Selected(s) => Some(s.option_id.to_string()),
            _ => None,
        },
        _ => None,
    }
}
