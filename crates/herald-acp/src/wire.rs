//! What the crate's v1 schema lacks and acp.md §2 gives: the `models` field beside
//! `modes` in the answers to `session/new`, `load`, `resume` and `fork`, and
//! `session/set_model` (a null result when the session is unknown), and `authenticate`
//! answered null, not with an error, when it does not authenticate (as Hermes does).

use agent_client_protocol::v1::schema::{
    AuthenticateRequest, AuthenticateResponse, ForkSessionRequest, ForkSessionResponse,
    LoadSessionRequest, LoadSessionResponse, NewSessionRequest, NewSessionResponse,
    ResumeSessionRequest, ResumeSessionResponse,
};
use agent_client_protocol::{JsonRpcRequest, JsonRpcResponse};
use serde::{Deserialize, Serialize};

/// One model offered.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelInfo {
    pub model_id: String,
    pub name: String,
}

/// The session's model and the ones it may switch to.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Models {
    pub current_model_id: String,
    pub available_models: Vec<ModelInfo>,
}

impl Models {
    pub fn new(current: &str, offered: &[String]) -> Models {
        let mut ids: Vec<String> = offered.to_vec();
        if !ids.iter().any(|m| m == current) {
            ids.insert(0, current.to_owned());
        }
        Models {
            current_model_id: current.to_owned(),
            available_models: ids
                .into_iter()
                .map(|m| ModelInfo {
                    name: m.clone(),
                    model_id: m,
                })
                .collect(),
        }
    }
}

/// A response of the schema with `models` beside it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WithModels<T> {
    #[serde(flatten)]
    pub inner: T,
    pub models: Models,
}

/// Declares a request of the schema answered with its response plus `models`, or
/// null (an unknown session to load).
macro_rules! with_models {
    ($req:ident, $answer:ident, $method:literal, $inner_req:ty, $inner_resp:ty) => {
        #[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
        #[request(method = $method, response = $answer)]
        pub struct $req(pub $inner_req);

        #[derive(Debug, Clone, Serialize, Deserialize, JsonRpcResponse)]
        pub struct $answer(pub Option<WithModels<$inner_resp>>);
    };
}

with_models!(
    NewSession,
    NewSessionAnswer,
    "session/new",
    NewSessionRequest,
    NewSessionResponse
);
with_models!(
    LoadSession,
    LoadSessionAnswer,
    "session/load",
    LoadSessionRequest,
    LoadSessionResponse
);
with_models!(
    ResumeSession,
    ResumeSessionAnswer,
    "session/resume",
    ResumeSessionRequest,
    ResumeSessionResponse
);
with_models!(
    ForkSession,
    ForkSessionAnswer,
    "session/fork",
    ForkSessionRequest,
    ForkSessionResponse
);

/// `session/set_model`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "session/set_model", response = SetModelAnswer)]
#[serde(rename_all = "camelCase")]
pub struct SetModel {
    pub session_id: String,
    pub model_id: String,
}

/// `{}` when switched; null when the session is unknown.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcResponse)]
pub struct SetModelAnswer(pub Option<serde_json::Map<String, serde_json::Value>>);

/// `authenticate`, answered as Hermes does: `{}` when it authenticates, else null.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "authenticate", response = AuthenticateAnswer)]
pub struct Authenticate(pub AuthenticateRequest);

/// `{}` when authenticated; null for a method id that is not one (no error).
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcResponse)]
pub struct AuthenticateAnswer(pub Option<AuthenticateResponse>);
