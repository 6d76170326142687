//! `github_comment`: `gh pr comment <n> --repo <owner/repo> --body <text>` through the
//! GitHub CLI, as an argument vector (no shell), with a 30-second limit.

use crate::{OutgoingMessage, Receipt, SendError, SendFuture, Target};
use std::sync::LazyLock;
use std::time::Duration;

/// The time limit for one `gh` run.
pub const GH_TIMEOUT: Duration = Duration::from_secs(30);
/// How much of gh's output is kept (its error text is what is reported).
const GH_OUTPUT: usize = 8192;

static REPO: LazyLock<Option<regex::Regex>> =
    LazyLock::new(|| regex::Regex::new(r"^[A-Za-z0-9._-]+/[A-Za-z0-9._-]+$").ok());

pub struct GithubComment {
    /// The program to run (`gh`, found on PATH).
    pub program: String,
}

/// `repo` and `pr_number` checked before any process starts.
pub fn validate(message: &OutgoingMessage) -> Result<(String, u64), SendError> {
    let repo = message.extra_text("repo").ok_or_else(|| {
        SendError::permanent("github_comment: deliver_extra.repo is missing (owner/name)")
    })?;
    if !REPO.as_ref().is_some_and(|re| re.is_match(&repo)) {
        return Err(SendError::permanent(format!(
            "github_comment: repo {repo:?} is not owner/name"
        )));
    }
    let number = message.extra_text("pr_number").ok_or_else(|| {
        SendError::permanent("github_comment: deliver_extra.pr_number is missing")
    })?;
    let pr = number
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| {
            SendError::permanent(format!(
                "github_comment: pr_number {number:?} is not a positive integer"
            ))
        })?;
    Ok((repo, pr))
}

impl GithubComment {
    async fn comment(&self, message: &OutgoingMessage) -> Result<Receipt, SendError> {
        let (repo, pr) = validate(message)?;
        let mut cmd = herald_process::command(&self.program);
        cmd.args([
            "pr",
            "comment",
            &pr.to_string(),
            "--repo",
            &repo,
            "--body",
            &message.text,
        ]);
        match herald_process::run_bounded(cmd, GH_TIMEOUT, GH_OUTPUT).await {
            Ok(done) if done.status.success() => Ok(Receipt::default()),
            Ok(done) => {
                let err = String::from_utf8_lossy(&done.stderr).trim().to_owned();
                let hint = if err.contains("auth login")
                    || err.contains("not logged")
                    || err.contains("authentication")
                {
                    " (run `gh auth login`)"
                } else {
                    ""
                };
                Err(SendError::permanent(format!(
                    "github_comment: gh exited with {}: {err}{hint}",
                    done.status
                )))
            }
            Err(herald_process::RunFailed::Spawn(e)) => Err(SendError::permanent(format!(
                "github_comment: cannot run `{}` ({e}): install the GitHub CLI and run `gh auth login`",
                self.program
            ))),
            Err(herald_process::RunFailed::Timeout) => Err(SendError::transient(
                format!(
                    "github_comment: gh timed out after {}s",
                    GH_TIMEOUT.as_secs()
                ),
                None,
            )),
            Err(herald_process::RunFailed::Wait(e)) => Err(SendError::transient(
                format!("github_comment: waiting for gh failed: {e}"),
                None,
            )),
        }
    }
}

impl Target for GithubComment {
    fn name(&self) -> &str {
        "github_comment"
    }
    fn send<'a>(&'a self, message: &'a OutgoingMessage) -> SendFuture<'a> {
        Box::pin(self.comment(message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msg(extra: serde_json::Value) -> OutgoingMessage {
        OutgoingMessage::new("hi", extra.as_object().cloned().unwrap())
    }

    #[test]
    fn validation_refuses_injection() {
        assert_eq!(
            validate(&msg(json!({"repo": "o/r", "pr_number": " 12 "}))).unwrap(),
            ("o/r".into(), 12)
        );
        assert_eq!(
            validate(&msg(json!({"repo": "o/r", "pr_number": 7})))
                .unwrap()
                .1,
            7
        );
        for bad in [
            json!({"repo": "o/r; rm -rf /", "pr_number": 1}),
            json!({"repo": "o/r/x", "pr_number": 1}),
            json!({"repo": "--help", "pr_number": 1}),
            json!({"repo": "o/r", "pr_number": 0}),
            json!({"repo": "o/r", "pr_number": "-3"}),
            json!({"repo": "o/r", "pr_number": "7.5"}),
            json!({"repo": "o/r", "pr_number": "--body=x"}),
            json!({"pr_number": 1}),
        ] {
            assert!(validate(&msg(bad.clone())).is_err(), "{bad}");
        }
    }
}
