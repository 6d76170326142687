//! Slash commands in a chat, from herald-session's one command table; what the table
//! leaves to the door: `/new` and `/reset` (the running turn stopped first, as Hermes
//! does), `/queue TEXT` (a turn of its own, answered), `/sethome`, and the queue a
//! `/stop` drops.

use super::wire::ChatWire;
use super::{ChatDoor, ChatRef, Platform};
use herald_session::commands::canonical;
use herald_session::{Live, Op, Opening, Outcome, Reply};
use herald_store::InboxItem;
use std::time::Duration;

/// How long `/new` waits for a stopped turn to end.
const STOP_WAIT: Duration = Duration::from_secs(10);

impl<P: Platform> ChatDoor<P> {
    /// A slash line: answered by the command table; its reply sent.
    pub(crate) async fn command(
        &self,
        live: &Live<ChatWire>,
        item: &InboxItem,
        started: i64,
        line: &str,
    ) {
        let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let name = canonical(word).map(|c| c.name);
        if name == Some("queue") && !rest.trim().is_empty() {
            return self
                .prompt(live, item.id, started, rest.trim().into(), true, None)
                .await;
        }
        if matches!(name, Some("new") | Some("reset")) {
            self.stop_turn(live).await;
        }
        let c = &live.conversation;
        let mut reply = table_reply(live, line).await;
        if matches!(reply, Reply::Unknown { .. })
            && let Some(dashed) = skill_spelling(line)
        {
            reply = table_reply(live, &dashed).await;
        }
        let said = match reply {
            Reply::Output(text) => text,
            Reply::ModelSwitched(model) => format!("Model switched to {model}."),
            Reply::New => match c.submit(Op::New(Opening(self.options(&live.id)))).await {
                Ok(_) => "✨ New session started.".to_owned(),
                Err(e) => format!("⚠️ {}", e.told()),
            },
            Reply::Resume(stored) => match c
                .submit(Op::Resume(stored, Opening(self.options(&live.id))))
                .await
            {
                Ok(Outcome::Switched { id, messages }) => {
                    format!("Resumed session {id} ({messages} messages).")
                }
                Ok(_) => "Resumed.".to_owned(),
                Err(e) => format!("⚠️ {}", e.told()),
            },
            Reply::SetHome => self.set_home(&live.wire.chat),
            Reply::Send(text) => {
                return self
                    .prompt(live, item.id, started, text.into(), false, None)
                    .await;
            }
            Reply::NotACommand | Reply::Unknown { .. } | Reply::Quit => {
                return self
                    .prompt(live, item.id, started, line.into(), false, None)
                    .await;
            }
        };
        if name == Some("stop") {
            self.dropped(live).await;
        }
        self.tell(&live.wire.chat, &said).await;
        self.finish(item.id, started, "delivered", "command").await;
    }

    /// Stops the running turn and drops the queue, waiting (a while) for it to end.
    async fn stop_turn(&self, live: &Live<ChatWire>) {
        let c = &live.conversation;
        if !c.busy() {
            return;
        }
        let _ = c.submit(Op::Stop).await;
        let until = tokio::time::Instant::now() + STOP_WAIT;
        while c.busy() && tokio::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.dropped(live).await;
    }

    /// The prompts a stop dropped: their entries are done, unanswered.
    async fn dropped(&self, live: &Live<ChatWire>) {
        for t in live.wire.drop_waiting() {
            self.finish(t.inbox_id, t.started_ms, "dropped", "dropped by /stop")
                .await;
        }
    }

    /// `/sethome`: this chat (and topic) is the platform's home channel, kept in `.env`
    /// as Hermes keeps it (`<PLATFORM>_HOME_CHANNEL`, `_THREAD_ID`).
    fn set_home(&self, chat: &ChatRef) -> String {
        let prefix = P::NAME.to_uppercase();
        let env = self.conversations.host().runtime().home.env_file();
        let chat_id = chat.chat_id.clone();
        let thread = chat.thread_id.clone().unwrap_or_default();
        let keys = [
            (format!("{prefix}_HOME_CHANNEL"), chat_id.clone()),
            (format!("{prefix}_HOME_CHANNEL_THREAD_ID"), thread),
        ];
        for (key, value) in &keys {
            if let Err(e) = herald_config::env_file::set_value(&env, key, value) {
                return format!("Failed to save home channel: {e}");
            }
        }
        format!(
            "✅ Home channel set to **{chat_id}** (ID: {chat_id}).\nCron jobs and cross-platform messages will be delivered here."
        )
    }
}

/// What the command table answers to `line`.
async fn table_reply(live: &Live<ChatWire>, line: &str) -> Reply {
    match live.conversation.submit(Op::Command(line.to_owned())).await {
        Ok(Outcome::Reply(r)) => r,
        Ok(_) => Reply::NotACommand,
        Err(e) => Reply::Output(format!("⚠️ {}", e.told())),
    }
}

/// A command as the menu spells it (`/web_research`: Telegram allows no `-`) in the
/// spelling of skills (`/web-research`), to try when the first is unknown.
fn skill_spelling(line: &str) -> Option<String> {
    let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    if !word.contains('_') {
        return None;
    }
    let dashed = word.replace('_', "-");
    Some(match rest.is_empty() {
        true => dashed,
        false => format!("{dashed} {rest}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn menu_spellings_become_the_tables() {
        assert_eq!(
            skill_spelling("/web_research now").as_deref(),
            Some("/web-research now")
        );
        assert_eq!(skill_spelling("/new"), None);
    }
}
