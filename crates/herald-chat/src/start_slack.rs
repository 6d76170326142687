//! Starting a Slack app inside `herald gateway run`: Socket Mode (the app token) and
//! the Events API (the signing secret, a path on the webhook listener) feed one door;
//! its dispatcher; all stopped together.

use crate::BotStatus;
use crate::ChatBot;
use crate::door::ChatDoor;
use crate::pairing::PairingStore;
use crate::slack::access::Access;
use crate::slack::api::WebApi;
use crate::slack::intake::Intake;
use crate::slack::socket::SocketMode;
use crate::slack::{Behaviour, Slack};
use crate::start::StartError;
use herald_session::Host;
use herald_store::Store;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};

/// The inbox route of the app's payloads (one Slack app per home, as Hermes's primary
/// token).
pub const ROUTE: &str = "chat:slack:app";

/// What a Slack app is started with.
pub struct SlackStart {
    /// `SLACK_BOT_TOKEN` (`xoxb-`).
    pub bot_token: String,
    /// `SLACK_APP_TOKEN` (`xapp-`): Socket Mode.
    pub app_token: Option<String>,
    /// `SLACK_SIGNING_SECRET`: the Events API.
    pub events: Option<SlackEvents>,
    /// The Web API's address (`https://slack.com/api/`).
    pub base_url: String,
    pub access: Access,
    pub behaviour: Behaviour,
    pub pairing: PairingStore,
    /// Unknown users in DMs get a pairing code (else they are ignored).
    pub pair_strangers: bool,
    pub display: herald_config::chat_display::ChatDisplay,
    pub client: reqwest::Client,
    /// Socket liveness (shorter in tests).
    pub ping_every: Duration,
    pub pong_within: Duration,
}

/// The Events API: where Slack posts, and the secret it signs with.
#[derive(Clone)]
pub struct SlackEvents {
    pub secret: String,
    /// `/slack/events` by default.
    pub path: String,
}

/// Starts a Slack app on `host` (its conversations) and `store` (its inbox).
pub fn start_slack(
    start: SlackStart,
    host: Arc<Host>,
    tools: Vec<String>,
    store: Store,
    lease: Duration,
) -> Result<ChatBot, StartError> {
    if start.app_token.is_none() && start.events.is_none() {
        return Err(StartError::Slack(
            "neither SLACK_APP_TOKEN (Socket Mode) nor SLACK_SIGNING_SECRET (the Events API) is set: Slack's events cannot reach herald".into(),
        ));
    }
    if let Some(e) = &start.events
        && !crate::start::servable(&e.path)
    {
        return Err(StartError::Slack(format!(
            "the Events API path {} is not one herald can serve: use letters, digits and - _ . ~ between slashes (/slack/events)",
            e.path
        )));
    }
    let receiving = receiving(&start);
    let status = Arc::new(BotStatus::with_limits(
        "slack",
        receiving,
        crate::slack::LIMITS,
    ));
    let (stop, stopped) = watch::channel(false);
    let wake = Arc::new(Notify::new());
    let intake = Intake {
        store: store.clone(),
        route: ROUTE.to_owned(),
        platform: "slack",
        wake: wake.clone(),
        status: status.clone(),
        identify: crate::slack::intake::identify,
    };
    let timeout = Duration::from_secs(20);
    let mut tasks = Vec::new();
    if let Some(app_token) = &start.app_token {
        let app = Arc::new(WebApi::new(
            start.client.clone(),
            &start.base_url,
            app_token,
            timeout,
        ));
        let (ping_every, pong_within) = (start.ping_every, start.pong_within);
        let (intake, stop) = (intake.clone(), stopped.clone());
        tasks.push(tokio::spawn(async move {
            let again = stop.clone();
            let (store, status) = (intake.store.clone(), intake.status.clone());
            let serve = move || {
                let socket = SocketMode {
                    app: app.clone(),
                    intake: intake.clone(),
                    ping_every,
                    pong_within,
                };
                socket.run(again.clone())
            };
            let key = format!("poll:{ROUTE}");
            crate::hold::serve_while_held(
                &store,
                &key,
                &status,
                "slack: the app's socket",
                serve,
                stop,
            )
            .await;
        }));
    }
    let webhook = start.events.clone().map(|e| {
        let receiver = crate::slack::events::Receiver {
            intake: intake.clone(),
            secret: e.secret.into(),
        };
        let router = crate::slack::events::router(&e.path, receiver);
        (e.path, router)
    });
    tasks.push(tokio::spawn(crate::start::sweep_files(
        host.runtime().home.root().to_owned(),
        stopped.clone(),
    )));
    let governor = status.governor.clone();
    let serving_status = status.clone();
    let backfilling = intake.clone();
    tasks.push(tokio::spawn(async move {
        let api = WebApi::new(
            start.client.clone(),
            &start.base_url,
            &start.bot_token,
            timeout,
        );
        let Some(bot_user) = introduce(&api, &serving_status, stopped.clone()).await else {
            return;
        };
        let now = herald_store::now_ms() as f64 / 1000.0;
        crate::slack::backfill::backfill(&api, &backfilling, now).await;
        let mut access = start.access;
        access.bot_user = bot_user;
        let pairing = start.pair_strangers.then(|| start.pairing.clone());
        let platform = Arc::new(Slack::new(
            api,
            governor,
            access,
            start.pairing,
            start.behaviour.clone(),
            host.clone(),
        ));
        let door = ChatDoor::new(
            platform,
            store,
            host,
            tools,
            start.behaviour.rules,
            pairing,
            start.display,
        );
        crate::dispatch::dispatch(door, wake, lease, stopped).await;
    }));
    Ok(ChatBot::new(status, webhook, stop, tasks))
}

/// How the app receives, in words.
fn receiving(start: &SlackStart) -> String {
    match (&start.app_token, &start.events) {
        (Some(_), Some(e)) => format!(
            "Socket Mode, and the Events API at {} on the webhook listener",
            e.path
        ),
        (Some(_), None) => "Socket Mode".to_owned(),
        (None, Some(e)) => format!("the Events API at {} on the webhook listener", e.path),
        (None, None) => "nothing".to_owned(),
    }
}

/// `auth.test`, tried until it answers (or the app stops): the bot's user id.
async fn introduce(
    api: &WebApi,
    status: &BotStatus,
    stop: watch::Receiver<bool>,
) -> Option<String> {
    let me = crate::start::until_answered("slack: auth.test", Some(status), stop, || async {
        api.form("auth.test", &[]).await.map_err(|e| e.to_string())
    })
    .await?;
    let user = me["user_id"].as_str().unwrap_or_default().to_owned();
    let team = me["team"].as_str().unwrap_or_default();
    tracing::info!(bot_user = %user, team = %team, "slack: connected");
    if me["bot_id"].is_null() {
        tracing::warn!(
            "slack: SLACK_BOT_TOKEN is not a bot token (auth.test names no bot_id): use the xoxb- token from OAuth & Permissions"
        );
    }
    Some(user)
}
