//! Questions a run puts to a front door that answers later (HTTP, JSON-RPC, ACP): each
//! approval or clarify request goes out as a run event with its request id and waits
//! here until [`crate::RunHandle`] answers that id, in any order. A request whose
//! waiting ends (answered, timed out, run stopped) leaves the table.

use crate::runs::{PromptAsk, RunCell, RunError, RunEventKind, RunState};
use herald_agent::tool::{Clarifier, ClarifyRequest, PromptFuture, Prompter, SecretRequest};
use herald_agent::{ApprovalRequest, Approver, Decision};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::{mpsc, oneshot};

pub(crate) type Waiting<T> = Mutex<Vec<(String, oneshot::Sender<T>)>>;

/// What a run's task passes on, in the order it happened: the agent's events and the
/// requests put to the front door.
pub(crate) enum Step {
    Agent(herald_agent::AgentEvent),
    Ask(RunEventKind),
    /// The turn is over: nothing follows.
    End,
}

/// The requests of a session's current run that wait for an answer.
#[derive(Default)]
pub(crate) struct Pending {
    pub approvals: Waiting<Decision>,
    clarifies: Waiting<Option<String>>,
    prompts: Waiting<String>,
    /// The run the session is running now, and its task's queue (where request events
    /// go, after whatever the agent emitted before).
    current: Mutex<(Weak<RunCell>, Option<mpsc::UnboundedSender<Step>>)>,
}

fn remove<T>(waiting: &Waiting<T>, id: &str) -> Option<oneshot::Sender<T>> {
    let mut w = waiting.lock().ok()?;
    let at = w.iter().position(|(i, _)| i == id)?;
    Some(w.remove(at).1)
}

impl Pending {
    pub fn set_current(&self, cell: &Arc<RunCell>, queue: mpsc::UnboundedSender<Step>) {
        if let Ok(mut c) = self.current.lock() {
            *c = (Arc::downgrade(cell), Some(queue));
        }
    }

    fn current(&self) -> Option<Arc<RunCell>> {
        self.current.lock().ok()?.0.upgrade()
    }

    pub(crate) fn tell(&self, kind: RunEventKind) {
        if let Ok(c) = self.current.lock()
            && let Some(queue) = &c.1
        {
            let _ = queue.send(Step::Ask(kind));
        }
    }

    /// Whether the request `id` still waits for an answer.
    pub fn is_waiting(&self, id: &str) -> bool {
        fn has<T>(w: &Waiting<T>, id: &str) -> bool {
            w.lock()
                .map(|w| w.iter().any(|(i, _)| i == id))
                .unwrap_or(false)
        }
        has(&self.approvals, id) || has(&self.clarifies, id) || has(&self.prompts, id)
    }

    pub fn any_approval(&self) -> bool {
        self.approvals
            .lock()
            .map(|a| !a.is_empty())
            .unwrap_or(false)
    }

    /// Takes request `id` off the table (the oldest when `None`; every one with
    /// `all`), with where its answer goes.
    pub fn take_approvals(
        &self,
        id: Option<&str>,
        all: bool,
    ) -> Result<Vec<(String, oneshot::Sender<Decision>)>, RunError> {
        let mut waiting = self.approvals.lock().map_err(|_| RunError::NotPending)?;
        if waiting.is_empty() {
            return Err(RunError::NotPending);
        }
        Ok(match (id, all) {
            (_, true) => std::mem::take(&mut *waiting),
            (None, false) => vec![waiting.remove(0)],
            (Some(id), false) => {
                let at = waiting
                    .iter()
                    .position(|(i, _)| i == id)
                    .ok_or_else(|| RunError::UnknownRequest(id.to_owned()))?;
                vec![waiting.remove(at)]
            }
        })
    }

    pub fn clarify(&self, id: &str, answer: String) -> Result<(), RunError> {
        let none_waiting = self.clarifies.lock().map(|c| c.is_empty()).unwrap_or(true);
        if none_waiting {
            return Err(RunError::NotPending);
        }
        let tx = remove(&self.clarifies, id).ok_or_else(|| RunError::UnknownRequest(id.into()))?;
        let _ = tx.send(Some(answer));
        Ok(())
    }

    pub fn answer_prompt(&self, id: &str, answer: String) -> Result<(), RunError> {
        let tx = remove(&self.prompts, id).ok_or_else(|| RunError::UnknownRequest(id.into()))?;
        let _ = tx.send(answer);
        Ok(())
    }

    /// Drops every waiting request: approvals are denied, questions go unanswered.
    pub fn cancel_all(&self) {
        if let Ok(mut p) = self.prompts.lock() {
            p.clear();
        }
        if let Ok(mut a) = self.approvals.lock() {
            a.clear();
        }
        if let Ok(mut c) = self.clarifies.lock() {
            c.clear();
        }
    }
}

/// Takes a request off the table when its waiting ends for any reason (answered,
/// timed out, the turn dropped), and puts the run back to `running` when no approval
/// is left.
struct Leave<'a> {
    pending: &'a Pending,
    id: String,
}

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        drop(remove(&self.pending.approvals, &self.id));
        drop(remove(&self.pending.clarifies, &self.id));
        drop(remove(&self.pending.prompts, &self.id));
        if !self.pending.any_approval()
            && let Some(cell) = self.pending.current()
            && cell.state() == RunState::WaitingForApproval
        {
            cell.set_state(RunState::Running);
        }
    }
}

fn request_id(id: &str) -> String {
    if id.is_empty() {
        format!("req_{}", uuid::Uuid::new_v4().simple())
    } else {
        id.to_owned()
    }
}

impl Pending {
    /// Puts request `id` in `table`, tells the front door with the event `ask` makes
    /// of the id, and waits for the answer (`None` when the waiting ends without one).
    pub async fn wait<T>(
        &self,
        table: &Waiting<T>,
        id: &str,
        ask: impl FnOnce(String) -> RunEventKind,
    ) -> Option<T> {
        let mut id = request_id(id);
        let (tx, rx) = oneshot::channel();
        if let Ok(mut w) = table.lock() {
            // Two askers with one id (subagents whose providers number their calls
            // alike) get two requests.
            if w.iter().any(|(i, _)| *i == id) {
                id = format!("{id}-{}", &uuid::Uuid::new_v4().simple().to_string()[..6]);
            }
            w.push((id.clone(), tx));
        }
        let _leave = Leave {
            pending: self,
            id: id.clone(),
        };
        self.tell(ask(id));
        rx.await.ok()
    }
}

/// Approvals answered by request id through the run handle.
pub(crate) struct RequestApprover(pub Arc<Pending>);

impl Approver for RequestApprover {
    fn ask<'a>(
        &'a self,
        request: ApprovalRequest<'a>,
    ) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
        Box::pin(async move {
            let ask = |request_id| RunEventKind::ApprovalRequested {
                request_id,
                command: request.command.to_owned(),
                reason: request.reason.to_owned(),
                pattern_key: request.key.to_owned(),
            };
            let pending = &self.0;
            let answer = pending.wait(&pending.approvals, request.id, ask).await;
            answer.unwrap_or(Decision::Deny)
        })
    }
}

/// `clarify` questions answered by request id through the run handle.
pub(crate) struct RequestClarifier(pub Arc<Pending>);

impl Clarifier for RequestClarifier {
    fn ask<'a>(
        &'a self,
        request: ClarifyRequest<'a>,
    ) -> Pin<Box<dyn Future<Output = Option<String>> + Send + 'a>> {
        Box::pin(async move {
            let ask = |request_id| RunEventKind::ClarifyRequested {
                request_id,
                question: request.question.to_owned(),
                choices: request.choices.to_vec(),
            };
            let pending = &self.0;
            pending
                .wait(&pending.clarifies, request.id, ask)
                .await
                .flatten()
        })
    }
}

/// How long a prompt waits for its answer, as Hermes's TUI gateway waits.
fn prompt_timeout(ask: &PromptAsk) -> std::time::Duration {
    match ask {
        PromptAsk::Sudo => std::time::Duration::from_secs(120),
        PromptAsk::Secret { .. } => std::time::Duration::from_secs(300),
    }
}

/// sudo passwords and skill secrets asked through the run handle (the TUI gateway's
/// `sudo.request` / `secret.request`). The sudo password is kept for the session; a
/// secret is kept in the home's `.env`.
pub(crate) struct RequestPrompter {
    pub pending: Arc<Pending>,
    pub env_file: std::path::PathBuf,
    pub sudo: Mutex<Option<String>>,
}

impl RequestPrompter {
    /// Asks, waiting at most the prompt's time; `None` when nobody answered in time.
    async fn ask(&self, ask: PromptAsk) -> Option<String> {
        let request_id = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
        let limit = prompt_timeout(&ask);
        let kind = ask.kind();
        let make = |request_id| RunEventKind::PromptRequested { request_id, ask };
        let waited = self.pending.wait(&self.pending.prompts, &request_id, make);
        match tokio::time::timeout(limit, waited).await {
            Ok(answer) => answer,
            Err(_) => {
                self.pending
                    .tell(RunEventKind::PromptExpired { request_id, kind });
                None
            }
        }
    }
}

impl Prompter for RequestPrompter {
    fn sudo_password(&self) -> PromptFuture<'_> {
        Box::pin(async move {
            let kept = self.sudo.lock().ok().and_then(|s| s.clone());
            if kept.is_some() {
                return kept;
            }
            let given = self.ask(PromptAsk::Sudo).await.filter(|p| !p.is_empty())?;
            if let Ok(mut s) = self.sudo.lock() {
                *s = Some(given.clone());
            }
            Some(given)
        })
    }

    fn forget_sudo(&self) {
        if let Ok(mut s) = self.sudo.lock() {
            *s = None;
        }
    }

    fn has_secret(&self, env_var: &str) -> bool {
        herald_config::process_env(env_var).is_some_and(|v| !v.is_empty())
    }

    fn secret<'a>(&'a self, request: SecretRequest<'a>) -> PromptFuture<'a> {
        Box::pin(async move {
            // A variable that may not be written (PATH, LD_PRELOAD ...) is never asked.
            if !herald_config::env_file::writable(request.env_var) {
                return None;
            }
            let ask = PromptAsk::Secret {
                env_var: request.env_var.to_owned(),
                prompt: request.prompt.to_owned(),
                skill_name: request.skill_name.to_owned(),
                help: request.help.map(str::to_owned),
                required_for: request.required_for.map(str::to_owned),
            };
            let value = self.ask(ask).await.filter(|v| !v.is_empty())?;
            match herald_config::env_file::set_value(&self.env_file, request.env_var, &value) {
                Ok(()) => Some(value),
                Err(e) => {
                    // The value itself is never logged.
                    tracing::warn!(
                        variable = request.env_var,
                        "cannot keep the secret in .env: {e}"
                    );
                    None
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_prompt_nobody_answers_gives_up_at_hermess_time_and_leaves_the_table() {
        let prompter = RequestPrompter {
            pending: Arc::new(Pending::default()),
            env_file: std::env::temp_dir().join("never-written.env"),
            sudo: Mutex::new(None),
        };
        let started = tokio::time::Instant::now();
        assert_eq!(prompter.sudo_password().await, None);
        assert_eq!(started.elapsed(), std::time::Duration::from_secs(120));
        assert!(prompter.pending.prompts.lock().unwrap().is_empty());
        let request = SecretRequest {
            env_var: "K",
            prompt: "p",
            skill_name: "s",
            help: None,
            required_for: None,
        };
        let started = tokio::time::Instant::now();
        assert_eq!(prompter.secret(request).await, None);
        assert_eq!(started.elapsed(), std::time::Duration::from_secs(300));
    }
}
