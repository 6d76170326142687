//! Runs across instances sharing one store: the controls (`/stop`, `/steer`,
//! `/approval`) and event streams another instance relays to the runs of this host,
//! and this host's requests for the runs of others.

use super::Host;
use crate::runs::{RunEvents, RunHandle};
use crate::sessions::SessionError;
use herald_store::sessions::{
    ControlReply, Followed, Follower, Relayed, RelayedEvents, RunControl,
};
use std::sync::Arc;

/// A front door's serialisation of a run's events for another instance that follows
/// them: it takes the events and gives each one as the door's wire shows it, in order.
pub type EventRelay = Arc<dyn Fn(RunEvents) -> RelayedEvents + Send + Sync>;

impl Host {
    /// Sends `control` to the instance that runs `run_id` when another instance
    /// sharing the store does (a run this process runs is reached through [`Host::run`]).
    pub async fn relay(&self, run_id: &str, control: RunControl) -> Result<Relayed, SessionError> {
        Ok(self
            .store
            .relay_run_control(run_id.to_owned(), control)
            .await?)
    }

    /// Follows the events of the unfinished run `run_id` another instance runs, as
    /// that instance's front door serialised them.
    pub async fn follow(&self, run_id: &str) -> Result<Followed, SessionError> {
        Ok(self.store.follow_run(run_id.to_owned()).await?)
    }

    /// Has this host's runs' events serialised by `relay` for other instances that
    /// follow them (the first door to ask sets it).
    pub fn relay_events_with(&self, relay: EventRelay) {
        let _ = self.event_relay.set(relay);
    }

    /// Has the controls other instances relay to this host's runs applied to them.
    pub fn serve_relayed_controls(self: &Arc<Self>) {
        let me = Arc::downgrade(self);
        self.store.on_run_control(Arc::new(move |run_id, control| {
            let host = me.upgrade()?;
            let run = host.run(&run_id)?;
            match control {
                RunControl::Stop => run.interrupt(),
                RunControl::Steer { text } => {
                    if let Err(e) = run.steer(&text) {
                        tracing::info!(run = %run_id, "a relayed steer was not taken: {e}");
                    }
                }
                RunControl::Approve {
                    request_id,
                    choice,
                    all,
                } => return Some(relayed_approval(&run, request_id.as_deref(), &choice, all)),
                RunControl::Follow { follower } => return Some(host.followed(&run, follower)),
            }
            None
        }));
    }

    /// Hands `run`'s events to the instance `follower` names, as this host's door puts
    /// them on the wire; refused once they were taken (one reader, as on one instance).
    fn followed(&self, run: &RunHandle, follower: Follower) -> ControlReply {
        let not_found = || ControlReply::Refused {
            code: "run_not_found".into(),
            message: format!("Run not found: {}", run.id()),
        };
        let Some(relay) = self.event_relay.get() else {
            return not_found();
        };
        let Some(events) = run.take_events() else {
            return not_found();
        };
        self.store.forward_run_events(follower, relay(events));
        ControlReply::Following
    }
}

/// An approval another instance relayed for `run`, answered as the API would.
fn relayed_approval(
    run: &RunHandle,
    request_id: Option<&str>,
    choice: &str,
    all: bool,
) -> ControlReply {
    let refused = |code: &str, message: String| ControlReply::Refused {
        code: code.to_owned(),
        message,
    };
    let Some(decision) = herald_agent::approval::Decision::parse(choice) else {
        return refused(
            "invalid_approval_choice",
            "choice must be once, session, always or deny".into(),
        );
    };
    match run.approve(request_id, decision, all) {
        Ok(resolved) => ControlReply::Done { resolved },
        Err(crate::RunError::NotActive) => refused(
            "approval_not_active",
            "The run has no approval session".into(),
        ),
        Err(crate::RunError::UnknownRequest(r)) => {
            refused("approval_not_pending", format!("No pending approval {r}"))
        }
        Err(_) => refused(
            "approval_not_pending",
            "Nothing is waiting for approval".into(),
        ),
    }
}
