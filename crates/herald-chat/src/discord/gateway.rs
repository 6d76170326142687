//! Discord's gateway WebSocket (v10, JSON), one connection at a time:
//!
//! - Hello, then Identify with Hermes's intents, or Resume when a session is kept;
//! - each message and interaction is committed to the inbox before its sequence
//!   number is kept, and the session (id, sequence, `resume_gateway_url`) is kept in
//!   the home, so a restart resumes and Discord replays what herald did not keep;
//! - heartbeats at Discord's interval; a heartbeat not acknowledged before the next is
//!   due means a zombie connection: it is closed (counted, logged) before a new one
//!   resumes, so two connections never answer at once;
//! - Reconnect and a resumable Invalid Session resume; a session that cannot be resumed
//!   identifies again; a close code that no retry mends (a wrong token, an intent not
//!   enabled in the Developer Portal) is reported and not retried;
//! - a button press (INTERACTION_CREATE) is answered within Discord's three seconds
//!   once committed (a deferred update); the door edits the message.

use super::api::{Body, RestApi};
use crate::intake::Intake;
use futures_util::{SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

/// Intents: guilds, guild messages, direct messages, message content (privileged).
pub const INTENTS: u64 = (1 << 0) | (1 << 9) | (1 << 12) | (1 << 15);
/// The members intent (privileged), asked only when the allow-list needs it.
pub const MEMBERS_INTENT: u64 = 1 << 1;
/// The largest frame read (a READY of a big bot is some hundreds of KiB).
const MAX_FRAME: usize = 8 << 20;
/// The gateway when `GET /gateway/bot` does not answer.
const DEFAULT_URL: &str = "wss://gateway.discord.gg";

/// A session kept between connections and restarts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Session {
    pub session_id: String,
    pub seq: Option<u64>,
    pub resume_url: String,
}

/// Where the session is kept (`<home>/chat-state/discord-session.json`, 0600).
#[derive(Debug, Clone)]
pub struct SessionFile(pub PathBuf);

impl SessionFile {
    pub fn load(&self) -> Option<Session> {
        let text = std::fs::read_to_string(&self.0).ok()?;
        serde_json::from_str(&text)
            .ok()
            .filter(|s: &Session| !s.session_id.is_empty())
    }
    pub fn save(&self, session: &Session) {
        let Ok(text) = serde_json::to_string(session) else {
            return;
        };
        if let Err(e) = write_private(&self.0, &text) {
            tracing::warn!(error = %e, "discord: cannot keep the gateway session; a restart identifies anew");
        }
    }
    pub fn clear(&self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

pub(crate) fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(text.as_bytes())?;
    std::fs::rename(&tmp, path)
}

/// One bot's gateway connection.
pub struct Gateway {
    pub api: Arc<RestApi>,
    pub token: String,
    pub intents: u64,
    pub intake: Intake,
    pub session: SessionFile,
}

/// How a connection ended.
#[derive(Debug)]
enum Ended {
    /// Connect again (resuming when a session is kept).
    Again(String),
    /// The session cannot be resumed: identify anew.
    Anew(String),
    /// No retry mends it.
    Fatal(String),
    Stopped,
}

/// What a frame asks of the connection.
enum Step {
    Go,
    End(Ended),
}

impl Gateway {
    /// Keeps one connection until `stop` (or a fatal close).
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut failures = 0u32;
        let mut url = None;
        loop {
            let base = match &url {
                Some(u) => String::clone(u),
                None => {
                    let found = self.gateway_url().await;
                    url = Some(found.clone());
                    found
                }
            };
            let (ended, ready) = self.connect(&base, failures, &mut stop).await;
            if ready {
                // A connection that got READY or RESUMED was no failure.
                failures = 0;
            }
            let status = &self.intake.status;
            match ended {
                Ended::Stopped => return,
                Ended::Fatal(why) => {
                    tracing::error!("discord: {why}");
                    status.failed(why);
                    return;
                }
                Ended::Anew(why) => {
                    self.session.clear();
                    tracing::info!(reason = %why, "discord: the session cannot be resumed; identifying anew");
                }
                Ended::Again(why) => {
                    status.restarted();
                    status.failed(format!("the gateway connection ended: {why}"));
                    tracing::warn!(reason = %why, "discord: the gateway connection ended; connecting again");
                }
            }
            failures += 1;
            let wait = backoff(failures);
            tokio::select! {
                _ = crate::stopped(&mut stop) => return,
                _ = tokio::time::sleep(wait) => {}
            }
            if failures > 3 {
                url = None;
            }
        }
    }

    async fn gateway_url(&self) -> String {
        match self
            .api
            .call(reqwest::Method::GET, "/gateway/bot", Body::None)
            .await
        {
            Ok(v) => v["url"].as_str().unwrap_or(DEFAULT_URL).to_owned(),
            Err(e) => {
                tracing::warn!(error = %e, "discord: GET /gateway/bot failed; using the default gateway");
                DEFAULT_URL.to_owned()
            }
        }
    }

    /// One connection: resumes the kept session or identifies; ends with why, and
    /// whether it got READY or RESUMED. After failures in a row the session is resumed
    /// through the base gateway (its resume host may be gone).
    async fn connect(
        &self,
        base: &str,
        failures: u32,
        stop: &mut watch::Receiver<bool>,
    ) -> (Ended, bool) {
        let mut ready = false;
        let ended = self.connection(base, failures, stop, &mut ready).await;
        (ended, ready)
    }

    async fn connection(
        &self,
        base: &str,
        failures: u32,
        stop: &mut watch::Receiver<bool>,
        ready: &mut bool,
    ) -> Ended {
        let mut session = self.session.load();
        let host = session
            .as_ref()
            .map(|s| s.resume_url.clone())
            .filter(|u| !u.is_empty() && failures < 3)
            .unwrap_or_else(|| base.to_owned());
        let url = format!("{}/?v=10&encoding=json", host.trim_end_matches('/'));
        let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
            .max_message_size(Some(MAX_FRAME))
            .max_frame_size(Some(MAX_FRAME));
        let connect =
            tokio_tungstenite::connect_async_with_config(url.as_str(), Some(config), false);
        let mut ws = match tokio::time::timeout(Duration::from_secs(20), connect).await {
            Ok(Ok((ws, _))) => ws,
            Ok(Err(e)) => return Ended::Again(format!("cannot connect: {e}")),
            Err(_) => return Ended::Again("cannot connect: timed out".into()),
        };
        let interval = match hello(&mut ws).await {
            Ok(i) => i,
            Err(why) => return Ended::Again(why),
        };
        let opening = match &session {
            Some(s) => {
                json!({"op": 6, "d": {"token": self.token, "session_id": s.session_id, "seq": s.seq}})
            }
            None => json!({"op": 2, "d": {
                "token": self.token,
                "intents": self.intents,
                "properties": {"os": std::env::consts::OS, "browser": "herald", "device": "herald"},
            }}),
        };
        if ws
            .send(Message::Text(opening.to_string().into()))
            .await
            .is_err()
        {
            return Ended::Again("cannot identify".into());
        }
        let mut beat = tokio::time::interval_at(
            tokio::time::Instant::now() + interval.mul_f64(jitter()),
            interval,
        );
        beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut acked = true;
        let ended = loop {
            let frame = tokio::select! {
                _ = crate::stopped(stop) => break Ended::Stopped,
                _ = beat.tick() => {
                    if !acked {
                        break Ended::Again("no heartbeat acknowledgement (a zombie connection)".into());
                    }
                    acked = false;
                    let seq = session.as_ref().and_then(|s| s.seq);
                    if ws.send(Message::Text(json!({"op": 1, "d": seq}).to_string().into())).await.is_err() {
                        break Ended::Again("cannot send a heartbeat".into());
                    }
                    continue;
                }
                f = ws.next() => f,
            };
            let text = match frame {
                Some(Ok(Message::Text(t))) => t,
                Some(Ok(Message::Close(c))) => break closed(c),
                Some(Ok(_)) => continue,
                Some(Err(e)) => break Ended::Again(e.to_string()),
                None => break Ended::Again("the connection ended".into()),
            };
            let Ok(frame) = serde_json::from_str::<Value>(text.as_str()) else {
                continue;
            };
            match frame["op"].as_u64() {
                Some(11) => acked = true,
                Some(1) => {
                    let seq = session.as_ref().and_then(|s| s.seq);
                    let _ = ws
                        .send(Message::Text(json!({"op": 1, "d": seq}).to_string().into()))
                        .await;
                }
                Some(7) => break Ended::Again("Discord asked for a reconnect".into()),
                Some(9) if frame["d"].as_bool() == Some(true) => {
                    break Ended::Again("invalid session (resumable)".into());
                }
                Some(9) => break Ended::Anew("invalid session".into()),
                Some(0) => match self.dispatch(&frame, &mut session, ready).await {
                    Step::Go => {}
                    Step::End(e) => break e,
                },
                _ => {}
            }
        };
        // The old connection is closed before the next one opens (no zombie answers).
        let code = match ended {
            // A stop keeps the session resumable (Discord ends it on 1000).
            Ended::Fatal(_) => CloseCode::Normal,
            _ => CloseCode::Library(4000),
        };
        let _ = tokio::time::timeout(
            Duration::from_secs(2),
            ws.close(Some(CloseFrame {
                code,
                reason: "".into(),
            })),
        )
        .await;
        ended
    }

    /// A dispatch: READY keeps the session; messages and interactions are committed,
    /// then their sequence kept.
    async fn dispatch(
        &self,
        frame: &Value,
        session: &mut Option<Session>,
        ready: &mut bool,
    ) -> Step {
        let seq = frame["s"].as_u64();
        let kind = frame["t"].as_str().unwrap_or_default();
        match kind {
            "READY" => {
                let d = &frame["d"];
                let kept = Session {
                    session_id: d["session_id"].as_str().unwrap_or_default().to_owned(),
                    seq,
                    resume_url: d["resume_gateway_url"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                };
                self.session.save(&kept);
                *session = Some(kept);
                *ready = true;
                self.intake.status.polled(herald_store::now_ms());
                tracing::info!("discord: connected to the gateway");
                return Step::Go;
            }
            "RESUMED" => {
                *ready = true;
                self.intake.status.polled(herald_store::now_ms());
                tracing::info!("discord: the gateway session resumed; missed events follow");
            }
            "MESSAGE_CREATE" | "INTERACTION_CREATE" => {
                let payload = json!({"t": kind, "d": frame["d"]});
                if let Err(e) = self.intake.commit(&payload).await {
                    // Not kept: the sequence stays, so a resume replays it.
                    tracing::error!(error = %e, "discord: cannot store an event; the connection is resumed to have it again");
                    return Step::End(Ended::Again("the store refused an event".into()));
                }
                if kind == "INTERACTION_CREATE" {
                    self.answer_interaction(&frame["d"]);
                }
            }
            _ => {}
        }
        if let (Some(s), Some(seq)) = (session.as_mut(), seq) {
            s.seq = Some(seq);
            if matches!(kind, "MESSAGE_CREATE" | "INTERACTION_CREATE" | "RESUMED") {
                self.session.save(s);
            }
        }
        Step::Go
    }

    /// A button press is answered at once with a deferred update (Discord's three
    /// seconds); the door edits the message when it takes the press.
    fn answer_interaction(&self, d: &Value) {
        let (Some(id), Some(token)) = (d["id"].as_str(), d["token"].as_str()) else {
            return;
        };
        // A button: a deferred update (the door edits the message); a slash command: a
        // word only its user sees (the door's reply comes as a message).
        let answer = match d["type"].as_u64() {
            Some(3) => json!({"type": 6}),
            Some(2) => {
                let name = d["data"]["name"].as_str().unwrap_or_default();
                json!({"type": 4, "data": {"content": format!("Running `/{name}`…"), "flags": 64}})
            }
            _ => return,
        };
        let path = format!("/interactions/{id}/{token}/callback");
        let api = self.api.clone();
        // Discord waits three seconds; a rate-limited answer is not waited out longer.
        tokio::spawn(async move {
            let answered = api.call(reqwest::Method::POST, &path, Body::Json(answer));
            match tokio::time::timeout(Duration::from_millis(2_500), answered).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "discord: cannot answer a button press"),
                Err(_) => tracing::warn!(
                    "discord: a button press was not answered within Discord's three seconds"
                ),
            }
        });
    }
}

/// Reads Hello: the heartbeat interval.
async fn hello<S>(ws: &mut S) -> Result<Duration, String>
where
    S: futures_util::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    let first = tokio::time::timeout(Duration::from_secs(20), ws.next()).await;
    let Ok(Some(Ok(Message::Text(text)))) = first else {
        return Err("no Hello".into());
    };
    let v: Value = serde_json::from_str(text.as_str()).map_err(|_| "a Hello that is not JSON")?;
    let ms = v["d"]["heartbeat_interval"]
        .as_u64()
        .filter(|_| v["op"] == 10)
        .ok_or("the first frame is not Hello")?;
    Ok(Duration::from_millis(ms.clamp(100, 120_000)))
}

/// What a close code means.
fn closed(frame: Option<CloseFrame>) -> Ended {
    let code = frame.as_ref().map_or(1000, |f| u16::from(f.code));
    let reason = frame.map(|f| f.reason.to_string()).unwrap_or_default();
    match code {
        4004 => Ended::Fatal("the bot token was refused (close 4004): set DISCORD_BOT_TOKEN to the token on the Bot page of the Developer Portal".into()),
        4014 => Ended::Fatal("a privileged intent is not enabled (close 4014): turn on MESSAGE CONTENT INTENT (and SERVER MEMBERS INTENT when DISCORD_ALLOWED_USERS names usernames or DISCORD_ALLOWED_ROLES is set) on the Bot page of the Developer Portal".into()),
        4010..=4013 => Ended::Fatal(format!("the gateway refused the connection (close {code}: {reason})")),
        4007 | 4009 => Ended::Anew(format!("close {code}: {reason}")),
        _ => Ended::Again(format!("closed by Discord ({code}: {reason})")),
    }
}

/// The first heartbeat's fraction of the interval, as Discord asks (random).
fn jitter() -> f64 {
    rand::random::<f64>().clamp(0.05, 1.0)
}

/// 1 s, doubling, at most a minute.
fn backoff(failures: u32) -> Duration {
    let secs = 1u64 << failures.saturating_sub(1).min(6);
    Duration::from_secs(secs).min(Duration::from_secs(60))
}

/// A Discord payload's kind and dedup key: messages by their id (live, replayed or
/// read back, one entry), interactions by theirs.
pub fn identify(payload: &Value) -> Option<(&'static str, String)> {
    herald_webhook::sender::discord_chat_key(payload["t"].as_str()?, payload["d"]["id"].as_str()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_codes_say_whether_to_retry() {
        let frame = |code: u16| {
            Some(CloseFrame {
                code: CloseCode::from(code),
                reason: "r".into(),
            })
        };
        assert!(matches!(closed(frame(4014)), Ended::Fatal(m) if m.contains("MESSAGE CONTENT")));
        assert!(matches!(closed(frame(4004)), Ended::Fatal(_)));
        assert!(matches!(closed(frame(4009)), Ended::Anew(_)));
        assert!(matches!(closed(frame(4000)), Ended::Again(_)));
        assert!(matches!(closed(None), Ended::Again(_)));
    }

    #[test]
    fn a_session_is_kept_private_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let file = SessionFile(dir.path().join("chat-state").join("discord-session.json"));
        assert!(file.load().is_none());
        let s = Session {
            session_id: "abc".into(),
            seq: Some(7),
            resume_url: "wss://r".into(),
        };
        file.save(&s);
        assert_eq!(file.load(), Some(s));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file.0).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        file.clear();
        assert!(file.load().is_none());
        let m = json!({"t": "MESSAGE_CREATE", "d": {"id": "5"}});
        assert_eq!(identify(&m).unwrap().1, "msg:5");
    }
}
