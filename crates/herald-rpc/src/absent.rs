//! The answers Hermes's gateway gives when a feature is off, for the features herald
//! does not have (the desktop pet, Nous Portal billing and subscriptions, the learning
//! journey, browser and voice control): the TUI shows them as off instead of printing
//! `unknown method` into the transcript.

use crate::errors::RpcError;
use crate::params;
use serde_json::{Value, json};

/// The methods answered here.
pub const METHODS: [&str; 20] = [
    "pet.cells",
    "pet.gallery",
    "pet.select",
    "billing.state",
    "billing.charge",
    "billing.charge_status",
    "billing.auto_reload",
    "billing.step_up",
    "subscription.state",
    "subscription.preview",
    "subscription.change",
    "subscription.resume",
    "subscription.upgrade",
    "learning.frames",
    "learning.detail",
    "learning.delete",
    "learning.edit",
    "browser.manage",
    "voice.toggle",
    "voice.record",
];

/// What a Nous Portal method says to a user who is not logged in (herald has no portal).
fn not_logged_in() -> RpcError {
    RpcError::new(
        4015,
        "not logged into Nous Portal: herald has no portal account",
    )
}

/// The answer to one of [`METHODS`].
pub fn answer(method: &str, p: params::Hub) -> Result<Value, RpcError> {
    match method {
        "pet.cells" => Ok(json!({"enabled": false})),
        "pet.gallery" => Ok(json!({"enabled": false, "active": "", "pets": []})),
        "pet.select" => Err(RpcError::new(5031, "pets are not available in herald")),
        "billing.state" | "subscription.state" => Ok(json!({"ok": true, "logged_in": false})),
        "learning.frames" => Ok(json!({
            "frames": [], "legend": [], "categories": [], "buckets": [], "summary": [],
            "axis": {"start": "oldest", "end": "now"}, "count": 0, "cols": 0, "rows": 0,
        })),
        "learning.detail" | "learning.delete" | "learning.edit" => Ok(json!({
            "ok": false, "message": "herald keeps no learning journey",
        })),
        "browser.manage" => browser(p),
        "voice.toggle" => voice(p),
        "voice.record" => Err(RpcError::new(4015, "voice mode is off")),
        _ => Err(not_logged_in()),
    }
}

fn browser(p: params::Hub) -> Result<Value, RpcError> {
    match p.action.as_deref().unwrap_or("status") {
        "status" => Ok(json!({"connected": false, "url": ""})),
        "disconnect" => Ok(json!({"connected": false})),
        _ => Err(RpcError::new(
            4015,
            "browser tools are not available in herald",
        )),
    }
}

fn voice(p: params::Hub) -> Result<Value, RpcError> {
    match p.action.as_deref().unwrap_or("status") {
        "status" | "off" => Ok(json!({
            "enabled": false, "record_key": "ctrl+b", "tts": false, "available": false,
            "details": "voice mode is not available in herald",
        })),
        _ => Err(RpcError::new(4015, "voice mode is not available in herald")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_is_answered_without_unknown_method() {
        for m in METHODS {
            match answer(m, params::Hub::default()) {
                Ok(v) => assert!(v.is_object(), "{m}"),
                Err(e) => assert!(e.code >= 4000, "{m}: {e:?}"),
            }
        }
        assert_eq!(
            answer("pet.cells", params::Hub::default()).unwrap(),
            json!({"enabled": false})
        );
    }
}
