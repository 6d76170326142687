//! Starting a Discord bot inside `herald gateway run`: its gateway connection (held by
//! one instance at a time), the backfill of what was missed, its door and dispatcher;
//! all stopped together.

use crate::BotStatus;
use crate::ChatBot;
use crate::discord::api::{Body, RestApi};
use crate::discord::backfill::Backfill;
use crate::discord::gateway::{Gateway, SessionFile};
use crate::discord::{Behaviour, Discord};
use crate::door::ChatDoor;
use crate::intake::Intake;
use crate::pairing::PairingStore;
use crate::start::StartError;
use herald_session::Host;
use herald_store::Store;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};

/// The inbox route of the bot's events.
pub const ROUTE: &str = herald_webhook::sender::DISCORD_CHAT_ROUTE;

/// What a Discord bot is started with.
pub struct DiscordStart {
    /// `DISCORD_BOT_TOKEN`.
    pub token: String,
    /// The REST API's address (`https://discord.com/api/v10`).
    pub base_url: String,
    pub access: crate::discord::access::Access,
    pub behaviour: Behaviour,
    /// Ask the members intent (usernames or roles in the allow-list).
    pub members_intent: bool,
    pub backfill: Backfill,
    pub pairing: PairingStore,
    pub pair_strangers: bool,
    pub display: herald_config::chat_display::ChatDisplay,
    pub client: reqwest::Client,
    /// The webhook routes with `source: discord` (an Interactions Endpoint URL at one of
    /// them hands button presses to this door).
    pub discord_routes: Vec<String>,
}

/// Starts a Discord bot on `host` (its conversations) and `store` (its inbox).
pub fn start_discord(
    start: DiscordStart,
    host: Arc<Host>,
    tools: Vec<String>,
    store: Store,
    lease: Duration,
) -> Result<ChatBot, StartError> {
    if start.token.trim().is_empty() {
        return Err(StartError::Discord("DISCORD_BOT_TOKEN is empty".into()));
    }
    let status = Arc::new(BotStatus::with_limits(
        "discord",
        "the gateway".to_owned(),
        crate::discord::LIMITS,
    ));
    let (stop, stopped) = watch::channel(false);
    let wake = Arc::new(Notify::new());
    let intake = Intake {
        store: store.clone(),
        route: ROUTE.to_owned(),
        platform: "discord",
        wake: wake.clone(),
        status: status.clone(),
        identify: crate::discord::gateway::identify,
    };
    let api = Arc::new(RestApi::new(
        start.client.clone(),
        &start.base_url,
        &start.token,
        Duration::from_secs(20),
    ));
    let session = SessionFile(
        host.runtime()
            .home
            .root()
            .join("chat-state")
            .join("discord-session.json"),
    );
    let intents = crate::discord::gateway::INTENTS
        | match start.members_intent {
            true => crate::discord::gateway::MEMBERS_INTENT,
            false => 0,
        };
    let mut tasks = Vec::new();
    {
        let (api, intake, token, stop) = (
            api.clone(),
            intake.clone(),
            start.token.clone(),
            stopped.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let again = stop.clone();
            let (store, status) = (intake.store.clone(), intake.status.clone());
            let serve = move || {
                let gateway = Gateway {
                    api: api.clone(),
                    token: token.clone(),
                    intents,
                    intake: intake.clone(),
                    session: session.clone(),
                };
                gateway.run(again.clone())
            };
            let key = format!("poll:{ROUTE}");
            crate::hold::serve_while_held(
                &store,
                &key,
                &status,
                "discord: the bot's gateway",
                serve,
                stop,
            )
            .await;
        }));
    }
    tasks.push(tokio::spawn(crate::start::sweep_files(
        host.runtime().home.root().to_owned(),
        stopped.clone(),
    )));
    let governor = status.governor.clone();
    let serving_status = status.clone();
    tasks.push(tokio::spawn(async move {
        let Some(bot_id) = introduce(&api, &serving_status, stopped.clone()).await else {
            return;
        };
        if let Some(app) = crate::discord::application(&api, &start.discord_routes).await {
            tokio::spawn(sync_commands(api.clone(), app, host.clone()));
        }
        let mut access = start.access;
        access.bot_id = bot_id;
        crate::discord::backfill::backfill(&api, &intake, &start.backfill, herald_store::now_ms())
            .await;
        let pairing = start.pair_strangers.then(|| start.pairing.clone());
        let rules = start.behaviour.rules;
        let platform = Arc::new(Discord::new(
            api,
            governor,
            access,
            start.pairing,
            start.behaviour,
            host.clone(),
        ));
        let door = ChatDoor::new(platform, store, host, tools, rules, pairing, start.display);
        crate::dispatch::dispatch(door, wake, lease, stopped).await;
    }));
    Ok(ChatBot::new(status, None, stop, tasks))
}

/// Syncs the application commands (the door's and the skills') when they changed.
async fn sync_commands(api: Arc<RestApi>, app: String, host: Arc<Host>) {
    let library = host.runtime().skills.clone();
    let skills = tokio::task::spawn_blocking(move || library.discover())
        .await
        .unwrap_or_default();
    let named: Vec<(String, String)> = skills
        .into_iter()
        .map(|s| (s.name, s.description))
        .collect();
    let state = host
        .runtime()
        .home
        .root()
        .join("chat-state")
        .join("discord-commands.json");
    let commands = crate::discord::commands::commands(&named);
    crate::discord::commands::sync(&api, &app, commands, state, herald_store::now_ms()).await;
}

/// `GET /users/@me`, tried until it answers (or the bot stops): the bot's user id.
async fn introduce(
    api: &RestApi,
    status: &BotStatus,
    stop: watch::Receiver<bool>,
) -> Option<String> {
    let me =
        crate::start::until_answered("discord: GET /users/@me", Some(status), stop, || async {
            api.call(reqwest::Method::GET, "/users/@me", Body::None)
                .await
                .map_err(|e| e.to_string())
        })
        .await?;
    let id = me["id"].as_str().unwrap_or_default().to_owned();
    let name = me["username"].as_str().unwrap_or_default();
    tracing::info!(bot = %name, id = %id, "discord: the bot is known");
    Some(id)
}
