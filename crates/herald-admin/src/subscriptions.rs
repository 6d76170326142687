//! Making and removing webhook subscriptions (`herald webhook subscribe|remove`, the
//! dashboard's routes page): the name's rules, the home's file, and with a shared store
//! the change pushed to every instance.

use herald_config::default_config::generate_secret;
use herald_config::{DeliverChat, NewSubscription, SenderFields, SubscriptionsFile};
use herald_store::Store;
use std::path::Path;

/// A subscription to make (or replace).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubscribeRequest {
    pub name: String,
    pub description: Option<String>,
    /// Accepted event types (none: all).
    pub events: Vec<String>,
    pub prompt: String,
    pub skills: Vec<String>,
    pub deliver: String,
    pub deliver_chat_id: Option<String>,
    /// None: a generated one.
    pub secret: Option<String>,
    pub deliver_only: bool,
    pub script: Option<String>,
    /// The sender's preset (`--source`) and its settings.
    pub sender: SenderFields,
}

/// What was made.
#[derive(Debug, Clone, PartialEq)]
pub struct Subscribed {
    /// The name as stored (lower case, spaces as `-`).
    pub name: String,
    pub secret: String,
    /// It replaced a subscription of the same name.
    pub replaced: bool,
    pub entry: NewSubscription,
}

/// Why a subscription was not made or removed.
#[derive(Debug, thiserror::Error)]
pub enum SubscriptionError {
    #[error(
        "Invalid name '{0}'. Use lower case letters, digits, '-' and '_', starting with a letter or digit."
    )]
    InvalidName(String),
    #[error(
        "--deliver-only requires --deliver to be a real target (telegram, discord, slack, github_comment, ...), not 'log'."
    )]
    DeliverOnlyToLog,
    #[error(
        "'{0}' is already a route in config.yaml; config.yaml wins on a name clash, so this subscription would never be used. Choose another name."
    )]
    ConfigRoute(String),
    #[error("{0}")]
    Source(String),
    #[error("No subscription named '{0}'.")]
    NotFound(String),
    #[error("{0}")]
    File(#[from] herald_config::SubscriptionsFileError),
    #[error("the shared subscriptions: {0}")]
    Shared(String),
    #[error(
        "another instance changed the subscriptions at the same moment; nothing was shared: try again"
    )]
    Race,
}

static NAME_RE: std::sync::LazyLock<Option<regex::Regex>> =
    std::sync::LazyLock::new(|| regex::Regex::new("^[a-z0-9][a-z0-9_-]*$").ok());

/// A name as subscriptions store it.
pub fn normalize(name: &str) -> String {
    name.trim().to_lowercase().replace(' ', "-")
}

/// Makes (or replaces) a subscription in the home's file at `path`; `config_routes` are
/// the names config.yaml takes; `store`, when shared, gets the change too.
pub async fn subscribe(
    path: &Path,
    config_routes: &[String],
    store: Option<&Store>,
    req: SubscribeRequest,
) -> Result<Subscribed, SubscriptionError> {
    let name = normalize(&req.name);
    if !NAME_RE.as_ref().is_some_and(|re| re.is_match(&name)) {
        return Err(SubscriptionError::InvalidName(name));
    }
    let sender =
        herald_config::check_sender_fields(&req.sender).map_err(SubscriptionError::Source)?;
    let deliver = match req.deliver.trim() {
        "" => herald_config::route::default_deliver(sender).to_owned(),
        given => given.to_owned(),
    };
    if req.deliver_only && (deliver.is_empty() || deliver.eq_ignore_ascii_case("log")) {
        return Err(SubscriptionError::DeliverOnlyToLog);
    }
    if config_routes.contains(&name) {
        return Err(SubscriptionError::ConfigRoute(name));
    }
    let given = req.secret.filter(|s| !s.trim().is_empty());
    if let Some(sender) = sender.filter(|s| s.makes_secret())
        && given.is_none()
    {
        return Err(SubscriptionError::Source(format!(
            "{sender} makes the signing secret itself: copy it from {sender}'s webhook settings (docs/senders.md says where) and give it with --secret"
        )));
    }
    let secret = given.unwrap_or_else(generate_secret);
    let entry = NewSubscription {
        description: req
            .description
            .filter(|d| !d.trim().is_empty())
            .unwrap_or_else(|| format!("Agent-created subscription: {name}")),
        events: req.events,
        secret: secret.clone(),
        prompt: req.prompt,
        skills: req.skills,
        deliver,
        created_at: jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string(),
        deliver_only: req.deliver_only,
        script: req.script,
        deliver_extra: req.deliver_chat_id.map(|chat_id| DeliverChat { chat_id }),
        sender: req.sender,
    };
    let replaced = change(path, store, |subs| {
        let existed = subs.contains(&name);
        subs.put(&name, &entry);
        Ok(existed)
    })
    .await?;
    Ok(Subscribed {
        name,
        secret,
        replaced,
        entry,
    })
}

/// Removes the subscription `name`.
pub async fn remove(
    path: &Path,
    store: Option<&Store>,
    name: &str,
) -> Result<(), SubscriptionError> {
    let name = name.trim().to_lowercase();
    change(path, store, |subs| match subs.remove(&name) {
        true => Ok(()),
        false => Err(SubscriptionError::NotFound(name.clone())),
    })
    .await
}

/// Brings the home's file in step with a shared store's subscriptions.
pub async fn refresh(path: &Path, store: Option<&Store>) -> Result<(), SubscriptionError> {
    if let Some(s) = store.filter(|s| s.shared()) {
        crate::shared_subscriptions::pull(s, path)
            .await
            .map_err(SubscriptionError::Shared)?;
    }
    Ok(())
}

/// Applies `edit` to the file: brought in step with the shared store before, the
/// change pushed to it after.
async fn change<T>(
    path: &Path,
    store: Option<&Store>,
    edit: impl FnOnce(&mut SubscriptionsFile) -> Result<T, SubscriptionError>,
) -> Result<T, SubscriptionError> {
    let shared = store.filter(|s| s.shared());
    let version = match shared {
        Some(s) => crate::shared_subscriptions::pull(s, path)
            .await
            .map_err(SubscriptionError::Shared)?,
        None => None,
    };
    let mut subs = SubscriptionsFile::open(path)?;
    let out = edit(&mut subs)?;
    subs.save()?;
    if let Some(s) = shared {
        let pushed = crate::shared_subscriptions::push(s, path, version)
            .await
            .map_err(SubscriptionError::Shared)?;
        if !pushed {
            let _ = crate::shared_subscriptions::pull(s, path).await;
            return Err(SubscriptionError::Race);
        }
    }
    Ok(out)
}
