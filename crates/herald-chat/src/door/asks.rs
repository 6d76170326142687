//! What a run asks the people in a chat: approvals (buttons, typed `/approve` and
//! `/deny`, a bare "yes" or "no") and `clarify` questions (the next plain message
//! answers). A button pressed after its request ended says so honestly.

use super::wire::{Asked, ChatWire};
use super::{ChatDoor, ChatRef, Click, Platform};
use herald_session::{Decision, Live, Op};

/// What an approval's message says once it expired.
pub(crate) const EXPIRED: &str = "⌛ This approval expired; nothing was run.";

impl<P: Platform> ChatDoor<P> {
    /// Asks for an approval with buttons (their token kept with the request), or in
    /// words when the buttons cannot be sent.
    pub(crate) async fn ask_approval(
        &self,
        live: &Live<ChatWire>,
        request_id: String,
        command: &str,
        reason: &str,
    ) {
        let token = new_token();
        let shown: String = command.chars().take(3800).collect();
        let text =
            format!("⚠️ **Command Approval Required**\n\n```\n{shown}\n```\nReason: {reason}");
        match self
            .platform
            .send_approval(&live.wire.chat, &token, &text)
            .await
        {
            Ok(message_id) => {
                self.remember_token(&token, &live.id);
                live.wire.ask(
                    token,
                    Asked {
                        request_id,
                        message_id,
                    },
                );
            }
            Err(e) => {
                tracing::warn!(error = %e.message, "cannot send approval buttons; asking in words");
                self.tell(&live.wire.chat, &approval_text(command, reason))
                    .await;
            }
        }
    }

    /// A button pressed: the decision goes to the run when its request still waits;
    /// else the message says the approval expired.
    pub(crate) async fn clicked(
        &self,
        live: Option<&Live<ChatWire>>,
        chat: &ChatRef,
        click: &Click,
    ) {
        let parsed = parse_button(&click.data);
        let asked = parsed
            .zip(live)
            .and_then(|((token, _), l)| l.wire.take_asked(token));
        let answered = match (parsed, asked, live) {
            (Some((_, decision)), Some(a), Some(l)) => {
                let op = Op::Approve {
                    request_id: Some(a.request_id),
                    decision,
                    all: false,
                };
                l.conversation.submit(op).await.ok().map(|_| decision)
            }
            _ => None,
        };
        let text = match answered {
            Some(decision) => decided(decision, Some(&click.by)),
            None => EXPIRED.to_owned(),
        };
        let note = if answered.is_some() { "" } else { EXPIRED };
        self.platform.answer_click(&click.id, note).await;
        self.edit_note(chat, &click.message_id, &text).await;
    }

    /// A bare "yes", "no", "always" ... while an approval waits answers the oldest;
    /// when none waits any more, the buttons say they expired.
    pub(crate) async fn approve_by_word(&self, live: &Live<ChatWire>, decision: Decision) {
        let op = Op::Approve {
            request_id: None,
            decision,
            all: false,
        };
        if live.conversation.submit(op).await.is_err() {
            self.expire_asks(live).await;
            self.tell(&live.wire.chat, "No pending command to approve.")
                .await;
        }
    }

    /// The run ended (or its requests timed out): every button left says it expired.
    pub(crate) async fn expire_asks(&self, live: &Live<ChatWire>) {
        for asked in live.wire.take_all_asked() {
            self.close_prompt(&live.wire.chat, &asked, EXPIRED).await;
        }
    }

    /// Edits an approval's message to say how it ended (its buttons go).
    pub(crate) async fn close_prompt(&self, chat: &ChatRef, asked: &Asked, text: &str) {
        if let Some(m) = &asked.message_id {
            self.edit_note(chat, m, text).await;
        }
    }

    /// Replaces a message's text with a note; a failure is logged (the note is a
    /// courtesy).
    async fn edit_note(&self, chat: &ChatRef, message_id: &str, text: &str) {
        if let Err(e) = self.platform.edit(chat, message_id, text, false).await {
            tracing::debug!(error = %e.message, "cannot edit a chat message");
        }
    }

    /// The answer to a `clarify` question (a number picks a choice).
    pub(crate) async fn clarified(&self, live: &Live<ChatWire>, request_id: String, text: &str) {
        let op = Op::Clarify {
            request_id,
            answer: text.to_owned(),
        };
        if let Err(e) = live.conversation.submit(op).await {
            self.tell(&live.wire.chat, &format!("⚠️ {}", e.told()))
                .await;
        }
    }
}

/// Hermes's text form of an approval request (`_format_exec_approval_fallback`).
pub(crate) fn approval_text(command: &str, reason: &str) -> String {
    let shown: String = command.chars().take(3800).collect();
    format!(
        "⚠️ Dangerous command requires approval:\n```\n{shown}\n```\nReason: {reason}\n\nReply /approve to execute, /approve session to approve this pattern for the session, /approve always to approve permanently, or /deny to cancel."
    )
}

/// A clarify question with its numbered choices.
pub(crate) fn clarify_text(question: &str, choices: &[String]) -> String {
    let mut text = format!("❓ {question}");
    for (i, c) in choices.iter().enumerate() {
        text.push_str(&format!("\n{}. {c}", i + 1));
    }
    if !choices.is_empty() {
        text.push_str("\n\nReply with a number or your own answer.");
    }
    text
}

/// A reply to a clarify question: a choice's number picks the choice.
pub(crate) fn clarify_answer(text: &str, choices: &[String]) -> String {
    let picked = text
        .trim()
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_sub(1))
        .and_then(|i| choices.get(i));
    picked.cloned().unwrap_or_else(|| text.trim().to_owned())
}

/// What an approval's message says once decided (by whom, when a button said it).
pub(crate) fn decided(decision: Decision, by: Option<&str>) -> String {
    let what = match decision {
        Decision::Once => "✅ Approved once",
        Decision::Session => "✅ Approved for this session",
        Decision::Always => "✅ Approved always",
        Decision::Deny => "❌ Denied",
    };
    match by {
        Some(name) => format!("{what} by {name}"),
        None => what.to_owned(),
    }
}

/// `ap:<token>:<o|s|a|d>`.
pub(crate) fn parse_button(data: &str) -> Option<(&str, Decision)> {
    let rest = data.strip_prefix("ap:")?;
    let (token, choice) = rest.rsplit_once(':')?;
    let decision = match choice {
        "o" => Decision::Once,
        "s" => Decision::Session,
        "a" => Decision::Always,
        "d" => Decision::Deny,
        _ => return None,
    };
    Some((token, decision))
}

/// The words Hermes takes as an answer while an approval waits.
pub(crate) fn bare_answer(text: &str) -> Option<Decision> {
    let word = text.trim().trim_end_matches(['.', '!']).to_lowercase();
    match word.as_str() {
        "yes" | "y" | "ok" | "okay" | "approve" | "confirm" | "👍" => Some(Decision::Once),
        "session" => Some(Decision::Session),
        "always" => Some(Decision::Always),
        "no" | "n" | "deny" | "reject" | "cancel" | "👎" => Some(Decision::Deny),
        _ => None,
    }
}

/// A short random token for a button's data (Telegram allows 64 bytes).
fn new_token() -> String {
    format!("{:016x}", rand::random::<u64>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buttons_words_and_choices_are_read() {
        assert_eq!(parse_button("ap:00ff:d"), Some(("00ff", Decision::Deny)));
        assert!(parse_button("ap:00ff:x").is_none());
        assert!(parse_button("mp:1").is_none());
        assert_eq!(bare_answer("Yes!"), Some(Decision::Once));
        assert_eq!(bare_answer("always"), Some(Decision::Always));
        assert_eq!(bare_answer("yes please"), None);
        let choices = vec!["red".to_owned(), "blue".to_owned()];
        assert_eq!(clarify_answer("2", &choices), "blue");
        assert_eq!(clarify_answer("green", &choices), "green");
        assert_eq!(clarify_answer("7", &choices), "7");
    }
}
