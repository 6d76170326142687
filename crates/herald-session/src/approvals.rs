//! One approval policy for every surface: `approvals.mode` (`off` approves everything but
//! the floor and the deny rules), `approvals.deny`, `approvals.timeout`,
//! `command_allowlist` and `HERMES_YOLO_MODE`. Only who answers differs between surfaces.

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
    /// Approve everything but the hard-line floor and `deny` (`approvals.mode: off`,
    /// `HERMES_YOLO_MODE`, `--yolo`).
    pub yolo: bool,
    pub deny: Vec<String>,
    pub allowlist: Vec<String>,
    pub timeout: Option<Duration>,
    /// Where an "always" answer is saved (`command_allowlist` in this config file).
    pub config_file: PathBuf,
}

impl ApprovalPolicy {
    pub fn from_settings(
        settings: &AgentSettings,
        config_file: PathBuf,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> ApprovalPolicy {
        let mode_off = settings.approvals_mode.as_deref() == Some("off");
        let yolo_env = env("HERMES_YOLO_MODE").is_some_and(|v| !v.is_empty() && v != "0");
        ApprovalPolicy {
            yolo: mode_off || yolo_env,
            deny: settings.approvals_deny.clone(),
            allowlist: settings.command_allowlist.clone(),
            timeout: settings.approvals_timeout_secs.map(Duration::from_secs),
            config_file,
        }
    }

    /// How long a surface waits for a human's answer: `approvals.timeout`, else 60 s.
    pub fn answer_within(&self) -> Duration {
        self.timeout.unwrap_or(herald_agent::DEFAULT_TIMEOUT)
    }

    /// The approval state of one session on a surface.
    pub fn approvals(&self, attendance: Attendance) -> Approvals {
        let (approver, attended) = match attendance {
            Attendance::Attended(a) => (Some(a), true),
            Attendance::Unattended => (None, false),
        };
        let mut approvals = Approvals::new(self.yolo, self.deny.clone(), approver)
            .with_allowlist(self.allowlist.clone());
        if let Some(t) = self.timeout {
            approvals.timeout = t;
        }
        if attended {
            let file = self.config_file.clone();
            approvals.persist_always = Some(Box::new(move |key: &str| {
                if let Err(e) =
                    herald_config::default_config::append_to_list(&file, "command_allowlist", key)
                {
                    tracing::warn!("could not save the approval: {e}");
                }
            }));
        }
        approvals
    }
}
