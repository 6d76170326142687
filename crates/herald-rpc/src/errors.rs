//! Error codes (rpc-gateway.md §1.3 and §7) and how session-host errors map onto them.

use herald_session::{OpError, RunError, SessionError, SwitchRefused, TitleRefused};
use serde_json::Value;

/// A JSON-RPC error: code, message and optional data.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub const PARSE: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const UNKNOWN_METHOD: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const HANDLER: i64 = -32000;
    pub const MISSING: i64 = 4000;
    pub const NO_SESSION: i64 = 4001;
    pub const BAD_VALUE: i64 = 4002;
    pub const MALFORMED: i64 = 4004;
    pub const ID_REQUIRED: i64 = 4006;
    pub const STORED_NOT_FOUND: i64 = 4007;
    pub const NOTHING_TO_BRANCH: i64 = 4008;
    pub const BUSY: i64 = 4009;
    pub const NO_STEER: i64 = 4010;
    pub const UNKNOWN_COMMAND: i64 = 4011;
    pub const TEXT_REQUIRED: i64 = 4012;
    pub const NOT_IN_HISTORY: i64 = 4018;
    pub const TITLE_REQUIRED: i64 = 4021;
    pub const TITLE_INVALID: i64 = 4022;
    pub const SESSION_ACTIVE: i64 = 4023;
    pub const WOULD_EMPTY: i64 = 4028;
    pub const NOT_CONFIRMED: i64 = 4029;
    pub const DISAGREE: i64 = 4030;
    pub const LIVE_CAP: i64 = 4090;
    pub const FAILED: i64 = 5000;
    pub const CONFIG_FAILED: i64 = 5001;
    pub const APPROVAL_FAILED: i64 = 5004;
    pub const COMPRESS_FAILED: i64 = 5005;
    pub const LIST_FAILED: i64 = 5006;
    pub const TITLE_FAILED: i64 = 5007;
    pub const PERSIST_FAILED: i64 = 5008;
    pub const CLI_TIMEOUT: i64 = 5016;
    pub const CLI_FAILED: i64 = 5017;
    pub const CATALOG_FAILED: i64 = 5020;
    pub const MODEL_OPTIONS_FAILED: i64 = 5033;

    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn no_session() -> RpcError {
        RpcError::new(RpcError::NO_SESSION, "session not found")
    }

    /// A session-host error, with `fallback` as the code of a store failure.
    pub fn session(e: SessionError, fallback: i64) -> RpcError {
        let code = match &e {
            SessionError::NotFound(_) => RpcError::NO_SESSION,
            SessionError::Busy(_) => RpcError::BUSY,
            SessionError::BadRewind(_) => RpcError::MALFORMED,
            SessionError::NotConfirmed => RpcError::NOT_CONFIRMED,
            SessionError::WouldEmpty => RpcError::WOULD_EMPTY,
            SessionError::StaleTarget(_) => RpcError::NOT_IN_HISTORY,
            SessionError::Disagree => RpcError::DISAGREE,
            SessionError::TooManyRuns(_) | SessionError::QueueFull(_) => RpcError::BUSY,
            SessionError::Store(_) => fallback,
            SessionError::Compress(_) => RpcError::COMPRESS_FAILED,
        };
        let message = match &e {
            SessionError::Busy(_) => "session busy".to_owned(),
            SessionError::StaleTarget(_) => {
                "target user message is no longer in session history".to_owned()
            }
            other => other.told().into_owned(),
        };
        RpcError::new(code, message)
    }

    /// A run handle's refusal.
    /// A refused operation on a live conversation; a store failure is `fallback`.
    pub fn op(e: OpError, fallback: i64) -> RpcError {
        match e {
            OpError::Session(e) => RpcError::session(e, fallback),
            OpError::Run(e) => RpcError::run(e),
            OpError::Switch(SwitchRefused::Busy) => RpcError::new(RpcError::BUSY, "session busy"),
            OpError::Switch(e) => RpcError::new(RpcError::BAD_VALUE, e.to_string()),
            OpError::Title(TitleRefused::Empty) => {
                RpcError::new(RpcError::TITLE_REQUIRED, "title is required")
            }
            OpError::Title(e) => RpcError::new(RpcError::TITLE_INVALID, e.to_string()),
            OpError::Setting(e) => RpcError::new(RpcError::BAD_VALUE, e.to_string()),
            OpError::NothingRunning => RpcError::new(RpcError::BUSY, e.to_string()),
        }
    }

    pub fn run(e: RunError) -> RpcError {
        match e {
            RunError::EmptySteer => RpcError::new(RpcError::BAD_VALUE, "text is required"),
            RunError::SteerNotAccepted => RpcError::new(RpcError::NO_STEER, e.to_string()),
            RunError::NotAcceptingSteer(_) => RpcError::new(RpcError::NO_STEER, e.to_string()),
            RunError::NotActive | RunError::NotPending | RunError::UnknownRequest(_) => {
                RpcError::new(RpcError::BUSY, e.to_string())
            }
        }
    }
}
