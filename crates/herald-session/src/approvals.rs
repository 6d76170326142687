//! One approval policy for every surface: `approvals.mode` (`off` approves every command
//! but the floor and the deny rules), `approvals.deny`, `approvals.timeout`,
//! `command_allowlist` and `HERMES_YOLO_MODE` (which also answers plugins' requests for
//! approval, as `approvals.mode: off` does not). Only who answers differs between
//! surfaces.

use herald_agent::{Approvals, Approver};
use herald_config::AgentSettings;
use std::path::PathBuf;
use std::time::Duration;

/// Who can answer an approval request on a surface.
pub enum Attendance {
    /// A human answers through this approver.
    Attended(Box<dyn Approver>),
    /// Nobody can answer: a command that needs approval is denied.
    Unattended,
}

/// The approval settings of a profile.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalPolicy {
    /// Approve everything but the hard-line floor and `deny`, plugins' requests for
    /// approval too (`HERMES_YOLO_MODE`, `--yolo`).
    pub yolo: bool,
    /// Approve every command but the hard-line floor and `deny` (`approvals.mode:
    /// off`); a plugin's request for approval still goes to a human.
    pub mode_off: bool,
    pub deny: Vec<String>,
    pub allowlist: Vec<String>,
    pub timeout: Option<Duration>,
    /// Where an "always" answer is saved: the home's attended approvals, apart from
    /// `command_allowlist` ([`herald_config::always_approvals`]).
    pub always_file: PathBuf,
}

impl ApprovalPolicy {
    pub fn from_settings(
        settings: &AgentSettings,
        always_file: PathBuf,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> ApprovalPolicy {
        let mode_off = settings.approvals_mode.as_deref() == Some("off");
        let yolo_env = env("HERMES_YOLO_MODE").is_some_and(|v| !v.is_empty() && v != "0");
        ApprovalPolicy {
            yolo: yolo_env,
            mode_off,
            deny: settings.approvals_deny.clone(),
            allowlist: settings.command_allowlist.clone(),
            timeout: settings.approvals_timeout_secs.map(Duration::from_secs),
            always_file,
        }
    }

    /// How long a surface waits for a human's answer: `approvals.timeout`, else 60 s.
    pub fn answer_within(&self) -> Duration {
        self.timeout.unwrap_or(herald_agent::DEFAULT_TIMEOUT)
    }

    /// The approval state of one session on `surface`. An attended session also gets
    /// the "always" answers given on attended surfaces, and keeps its own there, tagged
    /// with `surface`; an unattended one gets only `command_allowlist`.
    pub fn approvals(&self, attendance: Attendance, surface: &str) -> Approvals {
        let approver = match attendance {
            Attendance::Attended(a) => Some(a),
            Attendance::Unattended => None,
        };
        let attended = approver.is_some();
        let mut approvals = Approvals::new(self.yolo, self.deny.clone(), approver)
            .with_allowlist(self.allowlist.clone());
        approvals.mode_off = self.mode_off;
        if let Some(t) = self.timeout {
            approvals.timeout = t;
        }
        if attended {
            approvals = approvals.with_attended_always(self.attended_always());
            let (file, surface) = (self.always_file.clone(), surface.to_owned());
            approvals.persist_always = Some(Box::new(move |key: &str| {
                if let Err(e) = herald_config::always_approvals::add(&file, key, &surface) {
                    tracing::warn!(file = %file.display(), "could not save the \"always\" approval: {e}");
                }
            }));
        }
        approvals
    }

    /// The pattern keys answered "always" on attended surfaces (none when the file is
    /// damaged: it never widens what runs unasked).
    fn attended_always(&self) -> Vec<String> {
        match herald_config::always_approvals::load(&self.always_file) {
            Ok(entries) => entries.into_iter().map(|a| a.pattern).collect(),
            Err(e) => {
                tracing::warn!(file = %self.always_file.display(), "the attended \"always\" approvals could not be read, so none apply: {e}");
                Vec::new()
            }
        }
    }

    /// The verdict on a command nobody can be asked about (the TUI's `!command`): the
    /// floor, `approvals.deny`, yolo, `command_allowlist`, and for an `attended`
    /// surface its "always" answers; a dangerous command none of them lets through is
    /// refused.
    pub async fn check_unasked(&self, command: &str, attended: bool) -> herald_agent::Verdict {
        let mut approvals = Approvals::new(self.yolo, self.deny.clone(), None)
            .with_allowlist(self.allowlist.clone());
        approvals.mode_off = self.mode_off;
        if attended {
            approvals = approvals.with_attended_always(self.attended_always());
        }
        approvals.check(command).await
    }
}
