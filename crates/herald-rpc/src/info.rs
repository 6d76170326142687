//! `session.info` and `session.usage` as Hermes's TUI reads them: the session's model,
//! tools by toolset, skills by category, folder and git branch, title, running state,
//! usage with the context window, and the system prompt.

use crate::events::Info;
use crate::frame;
use crate::gateway::Live;
use crate::outbox::Out;
use crate::results::Usage;
use herald_session::Host;
use std::collections::BTreeMap;
use std::path::Path;

/// The session's usage: the store's counts and the context it holds now.
pub async fn usage(live: &Live) -> Usage {
    let host = live.conversation.host();
    let session = live.conversation.session();
    let stored = host.session_usage(session.id()).await.ok().flatten();
    let u = stored.unwrap_or_default();
    let used = session.context_tokens();
    let max = host.runtime().context_window().max(1);
    Usage {
        model: session
            .endpoint()
            .map(|e| e.model)
            .or(u.model)
            .unwrap_or_default(),
        input: u.input_tokens,
        output: u.output_tokens,
        prompt: u.input_tokens,
        completion: u.output_tokens,
        total: u.input_tokens + u.output_tokens,
        calls: u.api_calls,
        reasoning: 0,
        context_used: used,
        context_max: max,
        context_percent: (used.saturating_mul(100) / max).min(100),
        compressions: session.compressions(),
        active_subagents: u32::try_from(host.active_subagents(session.id())).unwrap_or(u32::MAX),
        cost_usd: Some(session.cost_usd()).filter(|c| *c > 0.0),
    }
}

/// `session.info`'s payload.
pub async fn info(live: &Live) -> Info {
    let host = live.conversation.host().clone();
    let session = live.conversation.session();
    let title = host.session_title(session.id()).await.ok().flatten();
    let usage = usage(live).await;
    let (h, cwd) = (host.clone(), session.cwd().to_path_buf());
    let on_disk = move || Ok((skills_by_category(&h), git_branch(&cwd)));
    let (skills, branch) = crate::blocking(on_disk).await.unwrap_or_default();
    let runtime = host.runtime();
    let tools = session.tools_by_toolset();
    let mode = runtime.settings.approvals_mode.clone();
    let fast = live.conversation.fast();
    Info {
        model: usage.model.clone(),
        provider: runtime.provider.clone(),
        reasoning_effort: live.conversation.reasoning_effort().unwrap_or_default(),
        service_tier: if fast { "priority" } else { "" },
        fast,
        yolo: runtime.approvals.mode_off || live.conversation.yolo(),
        approval_mode: mode.unwrap_or_else(|| "manual".into()),
        tools,
        skills,
        cwd: session.cwd().display().to_string(),
        branch,
        project: None,
        personality: "",
        running: live.conversation.busy(),
        title: title.unwrap_or_default(),
        stored_session_id: session.id().to_owned(),
        desktop_contract: 4,
        version: env!("CARGO_PKG_VERSION"),
        release_date: "",
        update_behind: None,
        update_command: "",
        usage,
        profile_name: "default",
        mcp_servers: [],
        system_prompt: session.system_prompt().to_owned(),
        credential_warning: credential_warning(&host),
    }
}

/// Said when no credential resolves for the provider (the first message would fail).
fn credential_warning(host: &Host) -> Option<String> {
    let runtime = host.runtime();
    (!runtime.credential_resolves()).then(|| {
        format!(
            "No API key configured for provider '{}'. First message will fail.",
            runtime.provider
        )
    })
}

/// The installed skills by category (`general` for the ones at the top).
pub fn skills_by_category(host: &Host) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for s in host.runtime().skills.discover() {
        let category = match s.category.is_empty() {
            true => "general".to_owned(),
            false => s.category,
        };
        out.entry(category).or_default().push(s.name);
    }
    out
}

/// The branch `HEAD` names in the git checkout holding `dir`, or "" (detached, or not
/// a checkout). Reads `.git/HEAD` (or the file a `.git` file points to); runs no git.
fn git_branch(dir: &Path) -> String {
    const MAX_HEAD: u64 = 4096;
    for folder in dir.ancestors() {
        let dot_git = folder.join(".git");
        let git_dir = match std::fs::read_to_string(&dot_git) {
            Ok(pointer) => match pointer.trim().strip_prefix("gitdir:") {
                Some(p) => folder.join(p.trim()),
                None => return String::new(),
            },
            Err(_) if dot_git.is_dir() => dot_git,
            Err(_) => continue,
        };
        let head = git_dir.join("HEAD");
        let small = std::fs::metadata(&head).is_ok_and(|m| m.len() <= MAX_HEAD);
        let text = if small {
            std::fs::read_to_string(head).unwrap_or_default()
        } else {
            String::new()
        };
        return text
            .trim()
            .strip_prefix("ref: refs/heads/")
            .unwrap_or_default()
            .to_owned();
    }
    String::new()
}

/// Sends `session.info` (after a turn, or a change such as the model).
pub async fn announce(live: &Live) {
    let payload = info(live).await;
    let event = frame::event("session.info", Some(&live.id), Some(payload));
    live.wire.emit(Out::Frame(event)).await;
}

/// `session.info` after a turn, as Hermes sends it: `running` false (a queued turn
/// that follows announces itself with its `message.start`).
pub async fn announce_turn_end(live: &Live) {
    let mut payload = info(live).await;
    payload.running = false;
    let event = frame::event("session.info", Some(&live.id), Some(payload));
    live.wire.emit(Out::Frame(event)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_branch_is_read_from_head_in_the_folder_or_above() {
        let repo = tempfile::tempdir().unwrap();
        let git = repo.path().join(".git");
        std::fs::create_dir(&git).unwrap();
        std::fs::write(git.join("HEAD"), "ref: refs/heads/feature/x\n").unwrap();
        let deep = repo.path().join("a/b");
        std::fs::create_dir_all(&deep).unwrap();
        assert_eq!(git_branch(&deep), "feature/x");
        std::fs::write(git.join("HEAD"), "0123abcd\n").unwrap();
        assert_eq!(git_branch(repo.path()), "", "detached");
        let worktree = tempfile::tempdir().unwrap();
        std::fs::write(
            worktree.path().join(".git"),
            format!("gitdir: {}\n", git.display()),
        )
        .unwrap();
        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        assert_eq!(git_branch(worktree.path()), "main");
    }
}
