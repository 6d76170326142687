//! Fake platform servers on 127.0.0.1 that record what herald sent and answer from a
//! script (then a default answer), speaking each platform's wire format.

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use herald_test_support::{listen_in_thread, serve_in_thread};
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
}

#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: String,
    pub delay: Duration,
}

impl Reply {
    pub fn json(status: u16, body: Value) -> Reply {
        Reply {
            status,
            headers: vec![],
            body: body.to_string(),
            delay: Duration::ZERO,
        }
    }
    pub fn with_header(mut self, k: &'static str, v: &str) -> Reply {
        self.headers.push((k, v.to_owned()));
        self
    }
}

#[derive(Clone)]
struct State {
    recorded: Arc<Mutex<Vec<Recorded>>>,
    script: Arc<Mutex<VecDeque<Reply>>>,
    default: Arc<Mutex<Reply>>,
}

pub struct Fake {
    pub base: String,
    state: State,
    _runtime: std::thread::JoinHandle<()>,
}

impl Fake {
    /// Starts a fake answering `default` unless a scripted reply is queued.
    pub fn start(default: Reply) -> Fake {
        let state = State {
            recorded: Arc::default(),
            script: Arc::default(),
            default: Arc::new(Mutex::new(default)),
        };
        let (addr, runtime) =
            serve_in_thread(Router::new().fallback(handle).with_state(state.clone()));
        Fake {
            base: format!("http://{addr}"),
            state,
            _runtime: runtime,
        }
    }

    pub fn push(&self, reply: Reply) {
        self.state.script.lock().unwrap().push_back(reply);
    }

    pub fn set_default(&self, reply: Reply) {
        *self.state.default.lock().unwrap() = reply;
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state.recorded.lock().unwrap().clone()
    }
}

async fn handle(
    axum::extract::State(st): axum::extract::State<State>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(answer) = bot_side(uri.path()).await {
        return answer;
    }
    let raw = String::from_utf8_lossy(&body).into_owned();
    st.recorded.lock().unwrap().push(Recorded {
        method: method.to_string(),
        path: uri.to_string(),
        headers,
        body: serde_json::from_str(&raw).unwrap_or(Value::Null),
    });
    let reply = st
        .script
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or_else(|| st.default.lock().unwrap().clone());
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let mut resp = (StatusCode::from_u16(reply.status).unwrap(), reply.body).into_response();
    resp.headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    for (k, v) in reply.headers {
        resp.headers_mut().insert(k, v.parse().unwrap());
    }
    resp
}

/// The calls a Telegram bot herald serves makes besides its sends (the token that
/// delivers also turns the bot on): answered as the Bot API does, neither recorded nor
/// taking a scripted reply meant for the sends a test looks at.
async fn bot_side(path: &str) -> Option<Response> {
    let method = path.rsplit('/').next()?;
    let result = match method {
        "getMe" => {
            serde_json::json!({"id": 1, "is_bot": true, "first_name": "Fake", "username": "fake_bot"})
        }
        "getUpdates" => {
            tokio::time::sleep(std::time::Duration::from_secs(20)).await;
            serde_json::json!([])
        }
        "deleteWebhook" | "setWebhook" | "setMyCommands" | "sendChatAction" => {
            serde_json::json!(true)
        }
        _ => return None,
    };
    let body = serde_json::json!({"ok": true, "result": result}).to_string();
    let mut resp = (StatusCode::OK, body).into_response();
    resp.headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    Some(resp)
}

pub fn telegram_ok() -> Reply {
    Reply::json(
        200,
        serde_json::json!({"ok": true, "result": {"message_id": 1}}),
    )
}

/// One message an SMTP client handed over.
#[derive(Debug, Clone, Default)]
pub struct Mail {
    pub auth: Option<String>,
    pub from: String,
    pub to: Vec<String>,
    pub data: String,
}

/// A plain-text SMTP server (no TLS) that accepts everything and records it; the first
/// `fail_first` transactions get a transient 451 at DATA.
pub struct FakeSmtp {
    pub port: u16,
    pub mails: Arc<Mutex<Vec<Mail>>>,
    _thread: std::thread::JoinHandle<()>,
}

impl FakeSmtp {
    pub fn start(fail_first: usize) -> FakeSmtp {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
        let mails: Arc<Mutex<Vec<Mail>>> = Arc::default();
        let failures = Arc::new(Mutex::new(fail_first));
        let m = mails.clone();
        let (addr, thread) = listen_in_thread(move |listener| async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let (m, failures) = (m.clone(), failures.clone());
                tokio::spawn(async move {
                    let (r, mut w) = stream.into_split();
                    let mut lines = BufReader::new(r).lines();
                    let _ = w.write_all(b"220 fake.smtp ESMTP\r\n").await;
                    let mut mail = Mail::default();
                    while let Ok(Some(line)) = lines.next_line().await {
                        let upper = line.to_ascii_uppercase();
                        let reply: &[u8] = if upper.starts_with("EHLO") || upper.starts_with("HELO")
                        {
                            b"250-fake.smtp\r\n250-AUTH PLAIN LOGIN\r\n250 8BITMIME\r\n"
                        } else if upper.starts_with("AUTH") {
                            mail.auth = Some(line.clone());
                            b"235 2.7.0 ok\r\n"
                        } else if upper.starts_with("MAIL FROM") {
                            mail.from = line[10..].trim().to_owned();
                            b"250 ok\r\n"
                        } else if upper.starts_with("RCPT TO") {
                            mail.to.push(line[8..].trim().to_owned());
                            b"250 ok\r\n"
                        } else if upper == "DATA" {
                            let fail = {
                                let mut f = failures.lock().unwrap();
                                if *f > 0 {
                                    *f -= 1;
                                    true
                                } else {
                                    false
                                }
                            };
                            if fail {
                                b"451 4.3.0 try again later\r\n"
                            } else {
                                let _ = w.write_all(b"354 go ahead\r\n").await;
                                let mut data = String::new();
                                while let Ok(Some(l)) = lines.next_line().await {
                                    if l == "." {
                                        break;
                                    }
                                    data.push_str(&l);
                                    data.push('\n');
                                }
                                mail.data = data;
                                m.lock().unwrap().push(std::mem::take(&mut mail));
                                b"250 2.0.0 queued as fake1\r\n"
                            }
                        } else if upper == "QUIT" {
                            let _ = w.write_all(b"221 bye\r\n").await;
                            break;
                        } else {
                            b"250 ok\r\n"
                        };
                        let _ = w.write_all(reply).await;
                    }
                });
            }
        });
        FakeSmtp {
            port: addr.port(),
            mails,
            _thread: thread,
        }
    }
}
