//! The turn settings Hermes's TUI toggles for one session (`config.set fast`,
//! `reasoning`, `yolo`), kept with the live conversation: fast mode as OpenAI's
//! priority processing (`service_tier: "priority"`), the reasoning effort as
//! `reasoning_effort` in the session's requests, yolo as the session's own. A model
//! switch keeps them where the new model takes them.

use crate::conversation::Conversation;
use herald_llm::Endpoint;
use serde_json::Value;

/// A setting asked of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Setting {
    /// Fast mode on, off, or (`None`) switched.
    Fast(Option<bool>),
    /// A reasoning effort: `none`, `minimal`, `low`, `medium`, `high`, `xhigh`, `max`,
    /// `ultra`.
    Reasoning(String),
    /// The session's yolo on, off, or (`None`) switched.
    Yolo(Option<bool>),
}

/// Why a setting was refused (in Hermes's words).
#[derive(Debug, thiserror::Error)]
pub enum SettingRefused {
    #[error("fast mode is not available for this model")]
    FastUnavailable,
    #[error("unknown reasoning value: {0}")]
    UnknownEffort(String),
}

/// The reasoning efforts Hermes knows.
pub const EFFORTS: [&str; 8] = [
    "none", "minimal", "low", "medium", "high", "xhigh", "max", "ultra",
];

const SERVICE_TIER: &str = "service_tier";
const REASONING_EFFORT: &str = "reasoning_effort";

/// Whether `model` takes OpenAI's priority processing (Hermes's rule: an OpenAI
/// flagship, `gpt-*`, `o1`, `o3`, `o4`, with or without the `openai/` prefix).
pub fn fast_available(model: &str) -> bool {
    let base = model.rsplit('/').next().unwrap_or(model);
    let base = base.split(':').next().unwrap_or(base).to_ascii_lowercase();
    ["gpt-", "o1", "o3", "o4"]
        .iter()
        .any(|p| base.starts_with(p))
}

/// Whether `endpoint` asks for priority processing (fast mode).
fn is_fast(endpoint: &Endpoint) -> bool {
    endpoint.extra_body.get(SERVICE_TIER) == Some(&Value::from("priority"))
}

impl Conversation {
    /// Whether fast mode is on.
    pub fn fast(&self) -> bool {
        self.session().endpoint().is_some_and(|e| is_fast(&e))
    }

    /// The reasoning effort asked of this session (`None`: the provider's default).
    pub fn reasoning_effort(&self) -> Option<String> {
        let endpoint = self.session().endpoint()?;
        let effort = endpoint.extra_body.get(REASONING_EFFORT)?;
        effort.as_str().map(str::to_owned)
    }

    /// Whether the session's approvals are given unasked now.
    pub fn yolo(&self) -> bool {
        self.session().0.approvals.in_yolo()
    }

    /// Applies `setting`; the value as Hermes answers it (`fast`/`normal`, the effort,
    /// `1`/`0`).
    pub(crate) fn apply(&self, setting: Setting) -> Result<String, SettingRefused> {
        match setting {
            Setting::Fast(on) => {
                let on = on.unwrap_or(!self.fast());
                self.set_fast(on)?;
                Ok(if on { "fast" } else { "normal" }.to_owned())
            }
            Setting::Reasoning(level) => {
                let level = level.trim().to_ascii_lowercase();
                let level = match level.as_str() {
                    "false" | "disabled" => "none".to_owned(),
                    _ => level,
                };
                if !EFFORTS.contains(&level.as_str()) {
                    return Err(SettingRefused::UnknownEffort(level));
                }
                self.with_endpoint(|e| {
                    e.extra_body
                        .insert(REASONING_EFFORT.into(), Value::from(level.clone()));
                });
                Ok(level)
            }
            Setting::Yolo(on) => {
                let approvals = &self.session().0.approvals;
                match on {
                    Some(on) => approvals.set_session_yolo(on),
                    None => {
                        approvals.toggle_session_yolo();
                    }
                }
                // Yolo as it now holds: a process started with it stays in it.
                Ok(if approvals.in_yolo() { "1" } else { "0" }.to_owned())
            }
        }
    }

    fn set_fast(&self, on: bool) -> Result<(), SettingRefused> {
        if on && !fast_available(&self.model()) {
            return Err(SettingRefused::FastUnavailable);
        }
        self.with_endpoint(|e| match on {
            true => {
                e.extra_body
                    .insert(SERVICE_TIER.into(), Value::from("priority"));
            }
            false => {
                e.extra_body.remove(SERVICE_TIER);
            }
        });
        Ok(())
    }

    fn with_endpoint(&self, change: impl FnOnce(&mut Endpoint)) {
        let session = self.session();
        if let Some(mut endpoint) = session.endpoint() {
            change(&mut endpoint);
            session.set_endpoint(endpoint);
        }
    }

    /// After a model switch: the settings the old endpoint carried, where the new
    /// model takes them (fast mode only on a model that has it).
    pub(crate) fn carry_settings(&self, before: Option<&Endpoint>) {
        let Some(before) = before else {
            return;
        };
        let fast = is_fast(before);
        let effort = before.extra_body.get(REASONING_EFFORT).cloned();
        let fast = fast && fast_available(&self.model());
        self.with_endpoint(|e| {
            if fast {
                e.extra_body
                    .insert(SERVICE_TIER.into(), Value::from("priority"));
            }
            if let Some(effort) = effort {
                e.extra_body.insert(REASONING_EFFORT.into(), effort);
            }
        });
    }
}
