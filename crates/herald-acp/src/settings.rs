//! Changing a session (acp.md §2): `session/set_mode`, `session/set_config_option`
//! (the edit approval policy, the model, and any other id kept as given) and
//! `session/set_model`.

use crate::modes::{EDIT_POLICY_OPTION, EditPolicy, MODEL_OPTION};
use crate::{AcpServer, AcpSession, lock, prompt};
use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CurrentModeUpdate, SessionConfigOptionValue, SessionUpdate, SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse, SetSessionModeRequest, SetSessionModeResponse,
};
use std::sync::Arc;

type AcpResult<T> = Result<T, agent_client_protocol::Error>;

fn invalid(why: String) -> agent_client_protocol::Error {
    agent_client_protocol::Error::invalid_params().data(why)
}

impl AcpServer {
    fn live(&self, id: &str) -> AcpResult<Arc<AcpSession>> {
        self.session(id)
            .ok_or_else(|| invalid(format!("no session {id}")))
    }

    /// Sets the session's mode (an unknown id is `default`) and tells the IDE.
    pub(crate) fn set_mode(
        &self,
        request: &SetSessionModeRequest,
        cx: &ConnectionTo<Client>,
    ) -> AcpResult<SetSessionModeResponse> {
        let live = self.live(&request.session_id.to_string())?;
        let policy = EditPolicy::from_mode(&request.mode_id.to_string());
        live.wire.gate.set_policy(policy);
        tell_mode(cx, &live, policy);
        Ok(SetSessionModeResponse::new())
    }

    /// Sets an option; a changed edit approval policy also sends `current_mode_update`
    /// (a herald extension: Hermes sends none, and the IDE's mode picker went stale).
    pub(crate) async fn set_config_option(
        &self,
        request: &SetSessionConfigOptionRequest,
        cx: &ConnectionTo<Client>,
    ) -> AcpResult<SetSessionConfigOptionResponse> {
        let live = self.live(&request.session_id.to_string())?;
        let value = match &request.value {
            SessionConfigOptionValue::ValueId { value } => value.to_string(),
            SessionConfigOptionValue::Boolean { value } => value.to_string(),
            _ => return Err(invalid("an option value of an unknown kind".to_owned())),
        };
        match request.config_id.to_string().as_str() {
            EDIT_POLICY_OPTION => {
                let policy = EditPolicy::from_value(&value)
                    .ok_or_else(|| invalid(format!("no edit approval policy {value:?}")))?;
                let before = live.wire.gate.policy();
                live.wire.gate.set_policy(policy);
                if before != policy {
                    tell_mode(cx, &live, policy);
                }
            }
            MODEL_OPTION => self.switch_model(&live, &value).await.map_err(invalid)?,
            other => {
                lock(&live.wire.other_options).insert(other.to_owned(), value);
            }
        }
        Ok(SetSessionConfigOptionResponse::new(
            self.describe(&live).options,
        ))
    }

    /// Switches `live` to the model of `spec` (`provider:model` allowed) for its next
    /// turns.
    pub(crate) async fn switch_model(&self, live: &AcpSession, spec: &str) -> Result<(), String> {
        let op = herald_session::Op::SetModel(spec.to_owned());
        live.conversation
            .submit(op)
            .await
            .map(drop)
            .map_err(|e| format!("cannot switch the model: {}", e.told()))
    }
}

/// Tells the IDE the session's mode is now `policy`'s.
fn tell_mode(cx: &ConnectionTo<Client>, live: &AcpSession, policy: EditPolicy) {
    let update = SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(policy.mode_id()));
    prompt::update(cx, &live.id, update);
}
