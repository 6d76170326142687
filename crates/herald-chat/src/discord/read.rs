//! A stored Discord payload as the door's [`Inbound`]: the gates of [`super::access`],
//! Hermes's sessions (a DM, a channel per user, a thread shared), the thread a mention
//! opens, and button presses.

use super::Discord;
use super::access::{Place, Verdict, thread_name};
use super::api::{ApiError, Body};
use super::wire::{Interaction, Message, Payload};
use crate::door::{Attachment, AttachmentKind, ChatRef, Click, Inbound};
use crate::key::{ChatType, Source, session_key};
use herald_store::InboxItem;
use reqwest::Method;
use serde_json::json;

/// Discord's code for "a thread was already created for this message".
const THREAD_EXISTS: &str = "160004";

pub(super) async fn read(d: &Discord, item: &InboxItem) -> Result<Inbound, String> {
    let payload: Payload = serde_json::from_str(item.payload.text())
        .map_err(|e| format!("not a Discord payload: {e}"))?;
    match payload {
        Payload::Message(m) => message(d, m).await,
        Payload::Interaction(i) => press(d, i).await,
    }
}

async fn message(d: &Discord, m: Message) -> Result<Inbound, String> {
    let place = match &m.guild_id {
        Some(_) => Some(d.place(&m.channel_id).await),
        None => None,
    };
    let mut source = source_of(&m, place.as_ref());
    let mentioned = match d.access.judge(&m, place.as_ref()) {
        Verdict::Ignore(why) => return Err(why.to_owned()),
        Verdict::Answer { mentioned } => mentioned,
        Verdict::IfBotThread => {
            let key = session_key(&source, d.behaviour.rules);
            let stored = matches!(d.host.keyed_session(&key).await, Ok(Some(_)));
            match d.bot_thread(&m.channel_id) || stored {
                true => false,
                false => return Err("a thread message without a mention".into()),
            }
        }
    };
    let allowed = d.access.authorized(&m) || d.pairing.is_approved("discord", &m.author.id);
    let stranger = match (allowed, &place) {
        (true, _) => None,
        (false, None) if !m.author.bot => Some(
            m.author
                .global_name
                .clone()
                .unwrap_or(m.author.username.clone()),
        ),
        (false, _) => return Err(format!("user {} is not allowed", m.author.id)),
    };
    let text = d.access.without_mention(&m.content);
    let files: Vec<Attachment> = m.attachments.iter().map(attachment).collect();
    if text.is_empty() && files.is_empty() {
        return Err("a mention with neither text nor a file".into());
    }
    let mut chat = ChatRef {
        chat_id: m.channel_id.clone(),
        thread_id: source.thread_id.clone(),
        group: place.is_some(),
    };
    if let Some(p) = place.as_ref().filter(|p| wants_thread(d, p, &m, mentioned)) {
        let thread = open_thread(d, p, &m, &text).await?;
        source = Source {
            platform: "discord",
            chat_type: ChatType::Thread,
            chat_id: thread.clone(),
            thread_id: Some(thread.clone()),
            user_id: Some(m.author.id.clone()),
        };
        chat.chat_id = thread.clone();
        chat.thread_id = Some(thread);
    }
    Ok(Inbound {
        source,
        chat,
        text,
        stranger,
        click: None,
        files,
        // Where the message lives (a reaction or a reply finds it there).
        message_id: Some(format!("{}/{}", m.channel_id, m.id)),
    })
}

/// Hermes's session source: a DM, a channel (per user), or a thread (shared).
fn source_of(m: &Message, place: Option<&Place>) -> Source {
    let (chat_type, thread_id) = match place {
        None => (ChatType::Dm, None),
        Some(p) if p.parent.is_some() => (ChatType::Thread, Some(p.channel.clone())),
        Some(_) => (ChatType::Group, None),
    };
    Source {
        platform: "discord",
        chat_type,
        chat_id: m.channel_id.clone(),
        thread_id,
        user_id: Some(m.author.id.clone()),
    }
}

/// A mention in a server channel opens a thread (`DISCORD_AUTO_THREAD`), unless the
/// channel is free-response or listed in `DISCORD_NO_THREAD_CHANNELS`, or it is a reply.
fn wants_thread(d: &Discord, p: &Place, m: &Message, mentioned: bool) -> bool {
    d.behaviour.auto_thread
        && mentioned
        && p.parent.is_none()
        && m.kind != 19
        && !d.access.free(p)
        && !d.behaviour.no_thread_channels.contains(&p.channel)
}

/// Opens the message's thread (its id is the message's); one that exists already
/// (the message taken again) is used. When Discord refuses, the channel is told and
/// the message is not answered, as in Hermes.
async fn open_thread(d: &Discord, p: &Place, m: &Message, text: &str) -> Result<String, String> {
    let path = format!("/channels/{}/messages/{}/threads", p.channel, m.id);
    let body = json!({"name": thread_name(text), "auto_archive_duration": 1440});
    match d.api.call(Method::POST, &path, Body::Json(body)).await {
        Ok(t) => {
            let id = t["id"].as_str().unwrap_or(&m.id).to_owned();
            d.mark_thread(&id);
            Ok(id)
        }
        Err(ApiError::Refused { message, .. })
            if message.contains(THREAD_EXISTS) || message.contains("already been created") =>
        {
            d.mark_thread(&m.id);
            Ok(m.id.clone())
        }
        Err(e) => {
            tracing::warn!(error = %e, "discord: cannot open a thread for a mention");
            let notice = "⚠️ Hermes could not create a Discord thread for this message, so the request was not processed. Please retry.";
            let body = json!({"content": notice, "allowed_mentions": {"parse": []}});
            let path = format!("/channels/{}/messages", p.channel);
            let _ = d.api.call(Method::POST, &path, Body::Json(body)).await;
            Err(format!("no thread could be opened: {e}"))
        }
    }
}

/// A button pressed; the presser is authorized again.
/// A button pressed, or a slash command (`/name args`, answered as a message in its
/// channel); the user is authorized again.
async fn press(d: &Discord, i: Interaction) -> Result<Inbound, String> {
    if !matches!(i.kind, 2 | 3) {
        return Err("an interaction that is neither a button nor a command".into());
    }
    let user = i.presser().ok_or("a button press without its presser")?;
    let roles = i
        .member
        .as_ref()
        .map(|m| m.roles.as_slice())
        .unwrap_or_default();
    let allowed =
        d.access.authorized_user(user, roles) || d.pairing.is_approved("discord", &user.id);
    if !allowed {
        return Err(format!(
            "user {} may not answer this bot's buttons",
            user.id
        ));
    }
    let channel = i
        .channel_id
        .clone()
        .ok_or("a button press without its channel")?;
    let dm = i.guild_id.is_none();
    // In a thread, a command is the thread's (its session is the thread's).
    let thread = match dm {
        true => None,
        false => d.place(&channel).await.parent.map(|_| channel.clone()),
    };
    let chat_type = match (dm, &thread) {
        (true, _) => ChatType::Dm,
        (false, Some(_)) => ChatType::Thread,
        (false, None) => ChatType::Group,
    };
    let (text, click) = match i.kind {
        2 => (slash_line(&i), None),
        _ => (
            String::new(),
            Some(Click {
                id: i.id.clone(),
                data: i
                    .data
                    .as_ref()
                    .map(|c| c.custom_id.clone())
                    .unwrap_or_default(),
                message_id: i.message.as_ref().map(|m| m.id.clone()).unwrap_or_default(),
                by: user.global_name.clone().unwrap_or(user.username.clone()),
            }),
        ),
    };
    Ok(Inbound {
        source: Source {
            platform: "discord",
            chat_type,
            chat_id: channel.clone(),
            thread_id: thread.clone(),
            user_id: Some(user.id.clone()),
        },
        chat: ChatRef {
            chat_id: channel,
            thread_id: thread,
            group: !dm,
        },
        text,
        stranger: None,
        click,
        files: Vec::new(),
        message_id: None,
    })
}

/// A slash command as the line typed: `/name args`.
fn slash_line(i: &Interaction) -> String {
    let Some(data) = &i.data else {
        return String::new();
    };
    let args: Vec<String> = data
        .options
        .iter()
        .filter_map(|o| match &o.value {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Null => None,
            other => Some(other.to_string()),
        })
        .collect();
    format!("/{} {}", data.name, args.join(" "))
        .trim_end()
        .to_owned()
}

/// An attachment as the door names it (its URL is its id: Discord's CDN serves it).
fn attachment(a: &super::wire::Attachment) -> Attachment {
    let mime = a.content_type.clone().unwrap_or_default();
    let kind = match mime.split('/').next().unwrap_or_default() {
        "image" => AttachmentKind::Photo,
        "audio" => AttachmentKind::Audio,
        "video" => AttachmentKind::Video,
        _ => AttachmentKind::Document,
    };
    Attachment {
        file_id: a.url.clone(),
        name: Some(a.filename.clone()),
        size: a.size,
        mime: a.content_type.clone(),
        kind,
    }
}
