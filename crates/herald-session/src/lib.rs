//! The session host: the layer every front door (webhook runs, `herald chat`, and the
//! HTTP API, JSON-RPC and ACP to come) goes through to reach the agent core.
//!
//! It owns what a front door must not build for itself: the [`Runtime`] of a profile
//! (the model chosen from the `model` blocks, the tool registry with the configured
//! terminal, web and vision tools, the skills library, SOUL.md, the limits and retries)
//! and one [`ApprovalPolicy`] (`approvals.*`, `command_allowlist`, the hard-line floor),
//! applied the same way on every surface; a surface with nobody to ask says so with
//! [`Attendance::Unattended`]. Sessions are written through one [`SessionWriter`] and
//! read back with one conversion.
//!
//! It must not speak any wire format, print, or know which front door calls it.

pub mod approvals;
pub mod model_select;
pub mod runtime;
pub mod sessions;

pub use approvals::{ApprovalPolicy, Attendance};
pub use model_select::SelectError;
pub use runtime::{ModelChoice, Platform, Runtime, RuntimeError};
pub use sessions::{KeptRun, SessionHeader, SessionWriter};
