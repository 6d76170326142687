//! A stored Slack payload as the door's [`Inbound`]: the gates of [`super::access`],
//! Hermes's thread choice (each top-level message its own thread and session by
//! default), the `!` prefix Slack needs for commands in threads, button presses and
//! slash commands.

use super::Slack;
use super::access::{Verdict, is_dm};
use super::wire::{BlockActions, Event, Payload, SlashCommand};
use crate::door::{Attachment, AttachmentKind, ChatRef, Click, Inbound};
use crate::key::{ChatType, Source, session_key};
use herald_session::commands::canonical;
use herald_store::InboxItem;

pub(super) async fn read(slack: &Slack, item: &InboxItem) -> Result<Inbound, String> {
    let payload: Payload = serde_json::from_str(item.payload.text())
        .map_err(|e| format!("not a Slack payload: {e}"))?;
    match payload {
        Payload::Event(cb) => message(slack, cb.event).await,
        Payload::Actions(a) => click(slack, a),
        Payload::Slash(s) => slash(slack, s),
        Payload::Other => Err(format!("{} payloads are not served", item.event_type)),
    }
}

/// A `message` or `app_mention` event.
async fn message(slack: &Slack, e: Event) -> Result<Inbound, String> {
    if !matches!(e.kind.as_str(), "message" | "app_mention") {
        return Err(format!("{} events are not served", e.kind));
    }
    let access = &slack.access;
    let verdict = access.judge(&e);
    let dm = is_dm(&e) || e.channel_type.as_deref() == Some("mpim");
    let thread = thread_of(slack, &e, dm);
    let source = Source {
        platform: "slack",
        chat_type: if dm { ChatType::Dm } else { ChatType::Group },
        chat_id: e.channel.clone(),
        thread_id: thread.clone(),
        user_id: e.user.clone(),
    };
    let mentioned = match verdict {
        Verdict::Ignore(why) => return Err(why.to_owned()),
        Verdict::Answer { mentioned } => mentioned,
        Verdict::IfSession => {
            let key = session_key(&source, slack.behaviour.rules);
            match slack.host.keyed_session(&key).await {
                Ok(Some(_)) => false,
                _ => return Err("a thread reply without a mention".into()),
            }
        }
    };
    let user = e.user.clone().unwrap_or_default();
    let stranger = match allowed(slack, &user) {
        true => None,
        false if is_dm(&e) && e.bot_id.is_none() && !user.is_empty() => Some(user.clone()),
        false => return Err(format!("user {user} is not allowed")),
    };
    if mentioned
        && !access.strict_mention
        && let Some(t) = &thread
    {
        access.threads.add(&e.channel, t);
    }
    let text = access.without_mention(&commands_typed(&e.text));
    let files: Vec<Attachment> = e.files.iter().map(attachment).collect();
    if text.is_empty() && files.is_empty() {
        return Err("a message with neither text nor a file".into());
    }
    if is_dm(&e) || mentioned {
        slack.mark(&e.ts);
    }
    // Replies go in the thread; with `reply_in_thread: false` a message that is its
    // own thread root is answered flat.
    let reply_thread = thread.filter(|t| slack.behaviour.reply_in_thread || *t != e.ts);
    Ok(Inbound {
        source,
        chat: ChatRef {
            chat_id: e.channel.clone(),
            thread_id: reply_thread,
            group: !dm,
        },
        text,
        stranger,
        click: None,
        files,
        message_id: Some(e.ts),
    })
}

fn allowed(slack: &Slack, user: &str) -> bool {
    slack.access.authorized(user) || slack.pairing.is_approved("slack", user)
}

/// The thread a message belongs to, as Hermes picks it: a reply's thread; else, by
/// default, the message itself (its own thread and session).
fn thread_of(slack: &Slack, e: &Event, dm: bool) -> Option<String> {
    if let Some(t) = &e.thread_ts {
        return Some(t.clone());
    }
    let own = match dm {
        true => slack.behaviour.dm_threads,
        false => slack.behaviour.reply_in_thread,
    };
    own.then(|| e.ts.clone())
}

/// `!new` as `/new`: Slack refuses slash commands in threads, so Hermes takes `!` for a
/// known command (`!nice work` stays text).
fn commands_typed(text: &str) -> String {
    let Some(rest) = text.strip_prefix('!') else {
        return text.to_owned();
    };
    let (word, args) = rest
        .trim_start()
        .split_once(char::is_whitespace)
        .unwrap_or((rest.trim_start(), ""));
    let name = word.split('@').next().unwrap_or_default().to_lowercase();
    match !name.is_empty() && !name.contains('/') && canonical(&name).is_some() {
        true => format!("/{name} {args}").trim_end().to_owned(),
        false => text.to_owned(),
    }
}

/// A button pressed; the presser is authorized again.
fn click(slack: &Slack, a: BlockActions) -> Result<Inbound, String> {
    let Some(action) = a.actions.first() else {
        return Err("a block action without an action".into());
    };
    let channel = a
        .container
        .channel_id
        .clone()
        .or(a.channel.map(|c| c.id))
        .ok_or("a block action without its channel")?;
    if !allowed(slack, &a.user.id) {
        return Err(format!(
            "user {} may not answer this bot's buttons",
            a.user.id
        ));
    }
    let data = action.value.clone().unwrap_or_default();
    let by = a.user.name.or(a.user.username).unwrap_or(a.user.id.clone());
    let thread = a.container.thread_ts.clone();
    Ok(Inbound {
        source: Source {
            platform: "slack",
            chat_type: if channel.starts_with('D') {
                ChatType::Dm
            } else {
                ChatType::Group
            },
            chat_id: channel.clone(),
            thread_id: thread.clone(),
            user_id: Some(a.user.id),
        },
        chat: ChatRef {
            group: !channel.starts_with('D'),
            chat_id: channel,
            thread_id: thread,
        },
        text: String::new(),
        stranger: None,
        click: Some(Click {
            id: a.trigger_id,
            data,
            message_id: a.container.message_ts.unwrap_or_default(),
            by,
        }),
        files: Vec::new(),
        message_id: None,
    })
}

/// A slash command: `/hermes <sub> rest` is `/<sub> rest` (text alone is a message,
/// nothing is `/help`); another command is itself. It has no thread (as Hermes).
fn slash(slack: &Slack, s: SlashCommand) -> Result<Inbound, String> {
    if !allowed(slack, &s.user_id) {
        return Err(format!("user {} is not allowed", s.user_id));
    }
    let text = s.text.trim();
    let line = match s.command.trim_start_matches('/') {
        "hermes" | "herald" => {
            let first = text.split_whitespace().next().unwrap_or_default();
            match (text.is_empty(), canonical(first)) {
                (true, _) => "/help".to_owned(),
                (false, Some(_)) => format!("/{text}"),
                (false, None) => text.to_owned(),
            }
        }
        other => format!("/{other} {text}").trim().to_owned(),
    };
    let dm = s.channel_id.starts_with('D');
    Ok(Inbound {
        source: Source {
            platform: "slack",
            chat_type: if dm { ChatType::Dm } else { ChatType::Group },
            chat_id: s.channel_id.clone(),
            thread_id: None,
            user_id: Some(s.user_id),
        },
        chat: ChatRef {
            chat_id: s.channel_id,
            thread_id: None,
            group: !dm,
        },
        text: line,
        stranger: None,
        click: None,
        files: Vec::new(),
        message_id: None,
    })
}

/// A file as the door names it (`slack_audio` clips are voice notes).
fn attachment(f: &super::wire::File) -> Attachment {
    let mime = f.mimetype.clone().unwrap_or_default();
    let kind = match mime.split('/').next().unwrap_or_default() {
        "image" => AttachmentKind::Photo,
        "audio" => AttachmentKind::Audio,
        "video" if f.subtype.as_deref() == Some("slack_audio") => AttachmentKind::Voice,
        "video" => AttachmentKind::Video,
        _ => AttachmentKind::Document,
    };
    Attachment {
        file_id: f.id.clone(),
        name: f.name.clone(),
        size: f.size,
        mime: f.mimetype.clone(),
        kind,
    }
}

#[cfg(test)]
mod tests {
    use super::commands_typed;

    #[test]
    fn a_bang_names_a_known_command_only() {
        assert_eq!(commands_typed("!new"), "/new");
        assert_eq!(commands_typed("!approve session"), "/approve session");
        assert_eq!(commands_typed("!stop@hermes"), "/stop");
        assert_eq!(commands_typed("!NEW now"), "/new now");
        assert_eq!(commands_typed("!nice work"), "!nice work");
        assert_eq!(commands_typed("!"), "!");
        assert_eq!(commands_typed("! new"), "/new");
        assert_eq!(commands_typed("!\u{a0}\u{a0}new"), "/new");
        assert_eq!(commands_typed("!  help me"), "/help me");
        assert_eq!(commands_typed("plain"), "plain");
    }
}
