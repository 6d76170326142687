//! The request pipeline (spec §4), in its order: route, size, signature, rate limit,
//! parse, event type, filters, script, templates, dedup + durable enqueue, answer.

use crate::answer::Answer;
use crate::direct::{self, DirectSend, InFlight};
use crate::heavy_work::HeavyWork;
use crate::live_targets::LiveTargets;
use crate::rate_limit::RateLimiter;
use crate::reject_log::{Reason, RejectLog};
use crate::routes::RouteRegistry;
use crate::script::{self, ScriptOutcome};
use axum::body::Body;
use herald_config::{Config, ExtraValue, Route};
use herald_deliver::discord_interaction::{APPLICATION_ID, INTERACTION_TOKEN};
use herald_deliver::{OutgoingMessage, TargetSet};
use herald_http::body::BodyError;
use herald_http::body_budget::{self, BodyBudget};
use herald_protocol::json_literal as literal;
use herald_store::{EnqueueOutcome, NewInboxItem, Store};
use herald_webhook::event::BodyKind;
use herald_webhook::filter::{FileListCache, FilterInput};
use herald_webhook::quoted::{cut, quoted};
use herald_webhook::raw_render;
use herald_webhook::sender::{self, Sender, SignedRequest};
use herald_webhook::template::{RAW_MAX_CHARS, RenderContext, default_prompt};
use herald_webhook::verify::{Clock, INSECURE_NO_AUTH, SignatureScheme};
use herald_webhook::{event, json_text, pyjson};
use http::{HeaderMap, header};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing::Instrument;

/// Everything a request needs, shared by all requests.
pub struct Gateway {
    pub registry: RouteRegistry,
    pub targets: Arc<LiveTargets>,
    in_flight: InFlight,
    pub store: Store,
    pub clock: Arc<dyn Clock>,
    pub max_body_bytes: u64,
    /// A request's whole body must arrive within this.
    pub body_timeout: Duration,
    budget: BodyBudget,
    pub rate_limit: u32,
    pub script_timeout: Duration,
    pub multiplex_profiles: bool,
    home: std::path::PathBuf,
    profiles_dir: std::path::PathBuf,
    limiter: RateLimiter,
    rejects: RejectLog,
    lists: FileListCache,
    v1_warned: Mutex<HashSet<String>>,
    /// Wakes the inbox workers when an event is queued.
    pub work_notify: Arc<tokio::sync::Notify>,
    /// Big bodies' verifying and parsing, off the async workers.
    heavy: HeavyWork,
}

impl Gateway {
    pub fn new(config: &Config, store: Store, targets: TargetSet, clock: Arc<dyn Clock>) -> Self {
        // Work queued by other instances sharing the store wakes this one's workers too.
        let work_notify = Arc::new(tokio::sync::Notify::new());
        store.wake_on_remote_work(work_notify.clone());
        Gateway {
            targets: Arc::new(LiveTargets::new(targets, config.home.env_file())),
            in_flight: InFlight::default(),
            registry: RouteRegistry::new(config),
            store,
            clock,
            max_body_bytes: config.webhook.max_body_bytes,
            body_timeout: Duration::from_secs(config.webhook.connections.body_timeout_secs),
            budget: BodyBudget::new(config.webhook.connections.max_body_bytes_in_flight),
            rate_limit: config.webhook.rate_limit,
            script_timeout: Duration::from_secs(config.webhook.script_timeout_secs),
            multiplex_profiles: config.multiplex_profiles,
            home: config.home.root().to_path_buf(),
            profiles_dir: config.home.profiles_dir(),
            limiter: RateLimiter::default(),
            rejects: RejectLog::default(),
            lists: FileListCache::default(),
            v1_warned: Mutex::new(HashSet::new()),
            work_notify,
            heavy: HeavyWork::default(),
        }
    }

    /// Whether a `/p/<profile>/` prefix names a served profile (its folder is looked
    /// up off the async workers).
    async fn profile_served(&self, profile: &str) -> bool {
        if profile == "default" {
            return true;
        }
        let valid = profile.len() <= 64
            && profile
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            && profile
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        valid
            && tokio::fs::metadata(self.profiles_dir.join(profile))
                .await
                .is_ok_and(|m| m.is_dir())
    }

    /// The inbox's entries per state, every state present (0 when empty).
    pub async fn inbox_counts(&self) -> Result<Vec<(String, i64)>, herald_store::StoreError> {
        herald_admin::inbox_view::state_counts(&self.store).await
    }

    /// This gateway's inbox as the dashboard reads and steers it.
    pub fn inbox_view(self: &Arc<Self>) -> herald_admin::InboxView {
        herald_admin::InboxView {
            store: self.store.clone(),
            work_notify: self.work_notify.clone(),
            routes: self.clone(),
        }
    }

    /// The inbox's figures for the metrics.
    pub async fn inbox_figures(
        &self,
    ) -> Result<herald_metrics::InboxFigures, herald_store::StoreError> {
        let counts = self.inbox_counts().await?;
        let now_ms = self.clock.now_ms();
        let gauges = self.store.gauges(now_ms).await?;
        let age_ms = gauges
            .oldest_queued_at_ms
            .map_or(0, |at| (now_ms - at).max(0));
        Ok(herald_metrics::InboxFigures {
            counts,
            oldest_queued_age_secs: age_ms as f64 / 1000.0,
            leases_held: gauges.leases_held,
            shared: self.store.shared(),
        })
    }

    /// Has every metrics scrape read the inbox's figures first.
    pub fn measure_inbox(self: &Arc<Self>) {
        let gw = Arc::downgrade(self);
        herald_metrics::get().refresh_with(Arc::new(move || {
            let gw = gw.clone();
            Box::pin(async move {
                let Some(gw) = gw.upgrade() else {
                    return;
                };
                match gw.inbox_figures().await {
                    Ok(f) => herald_metrics::get().inbox.set(&f),
                    Err(e) => tracing::warn!(error = %e, "metrics: cannot read the inbox"),
                }
            })
        }));
    }

    /// Runs the pipeline for one request, counting its outcome.
    pub async fn handle(
        &self,
        route_name: &str,
        profile: Option<&str>,
        headers: &HeaderMap,
        query: Option<&str>,
        body: Body,
    ) -> Answer {
        let span = herald_trace::span!(
            "webhook.request",
            route = %route_name,
            outcome = tracing::field::Empty
        );
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        herald_trace::continue_from(&span, header("traceparent"), header("tracestate"));
        let mut route_sender = None;
        let answer = self
            .answer(route_name, profile, headers, query, body, &mut route_sender)
            .instrument(span.clone())
            .await;
        let answer = fit_to_sender(answer, route_sender);
        span.record("outcome", answer.outcome);
        // A name from the request is a label only when it names a route herald knows.
        let known = !matches!(answer.outcome, "unknown_route" | "unknown_profile");
        herald_metrics::get()
            .webhook
            .request(known.then_some(route_name), answer.outcome);
        answer
    }

    async fn answer(
        &self,
        route_name: &str,
        profile: Option<&str>,
        headers: &HeaderMap,
        query: Option<&str>,
        body: Body,
        route_sender: &mut Option<Sender>,
    ) -> Answer {
        // 1. Reload subscriptions if changed (inside `current`).
        let table = self.registry.current();
        // 2. Profile prefix.
        if self.multiplex_profiles
            && let Some(p) = profile
            && !self.profile_served(p).await
        {
            self.rejects
                .record(Reason::UnknownProfile, route_name, &quoted(p));
            return Answer::unknown_profile();
        }
        // 3. Route lookup (the route is borrowed from the table the request holds).
        let Some(route) = table.get(route_name) else {
            self.rejects.record(Reason::UnknownRoute, route_name, &"");
            return Answer::unknown_route(route_name);
        };
        // 3b. Profile binding (only a default-profile route is reachable without prefix).
        let requested = profile.unwrap_or("default");
        let bound = route.profile.as_deref().unwrap_or("default");
        if requested != bound {
            let detail = format!(
                "profile {} asked, the route is bound to {bound}",
                quoted(requested)
            );
            self.rejects
                .record(Reason::UnknownRoute, route_name, &detail);
            return Answer::unknown_route(route_name);
        }
        *route_sender = route.sender.as_ref().map(|p| p.sender);
        // 4. Disabled.
        if !route.enabled {
            self.rejects.record(Reason::RouteDisabled, route_name, &"");
            return Answer::route_disabled(route_name);
        }
        // 5. Declared size.
        let declared = content_length(headers);
        if let Some(len) = declared
            && len > self.max_body_bytes
        {
            let detail = format!("Content-Length {len}");
            self.rejects.record(Reason::TooLarge, route_name, &detail);
            return Answer::too_large();
        }
        // 6. Read with the limit, the deadline and room in the body budget.
        let (body, mut reservation) = match self.admit_body(route, declared, body).await {
            Ok(admitted) => admitted,
            Err(answer) => return answer,
        };
        herald_metrics::get()
            .webhook
            .body_read(route_name, body.len());
        // 7–8. Secret and signature.
        let sender = route.sender.as_ref().map(|p| p.sender);
        if route.secret.is_empty() && sender.is_none_or(Sender::needs_secret) {
            return Answer::missing_secret();
        }
        let verified = self.heavy.run(body.len(), || {
            let clock = self.clock.as_ref();
            match &route.sender {
                // Discord's check needs no secret, so INSECURE_NO_AUTH does not turn it off.
                Some(preset)
                    if route.secret != INSECURE_NO_AUTH || !preset.sender.needs_secret() =>
                {
                    let request = SignedRequest {
                        headers,
                        body: &body,
                        query,
                    };
                    sender::verify(preset, &route.secret, &request, clock)
                }
                _ => herald_webhook::verify(&route.secret, headers, &body, clock),
            }
        });
        match verified
            .instrument(herald_trace::span!("webhook.verify"))
            .await
        {
            Ok(SignatureScheme::GenericV1) => self.warn_v1_once(route_name),
            Ok(_) => {}
            Err(e) => {
                herald_metrics::get()
                    .webhook
                    .verification_failed(e.scheme(), e.reason());
                self.rejects
                    .record(Reason::InvalidSignature, route_name, &e);
                return Answer::invalid_signature();
            }
        }
        // Room for handling the body (a forged request never gets this far).
        if let Err(answer) = self.reserve_handling(route, &body, &mut reservation).await {
            return answer;
        }
        // 9. Rate limit.
        if !self
            .limiter
            .check(route_name, self.rate_limit, Instant::now())
        {
            let detail = format!("limit {} a minute", self.rate_limit);
            self.rejects
                .record(Reason::RateLimited, route_name, &detail);
            return Answer::rate_limited();
        }
        // 10–11 fast path: the headers name an event the route does not take, so the
        // payload is only validated, not built (same answers as the full parse). GitLab
        // requests take the full parse: their `object_kind` may admit the event.
        let content_type = headers.get(header::CONTENT_TYPE).map(|v| v.as_bytes());
        if !route.events.is_empty()
            && let Some(header_event) = header_event(sender, headers)
            && !route.events.iter().any(|e| e.as_bytes() == header_event)
        {
            let valid = self
                .heavy
                .run(body.len(), || event::validate_body(&body, content_type));
            if let Err(e) = valid.await {
                self.rejects.record(Reason::CannotParse, route_name, &e);
                return Answer::cannot_parse();
            }
            let event_type = Value::String(String::from_utf8_lossy(header_event).into_owned());
            tracing::info!(
                route = route_name,
                event = &*cut(&String::from_utf8_lossy(header_event)),
                "ignored: event not in the route's events"
            );
            return Answer::ignored_event(&event_type);
        }
        // 10. Parse: only the paths the route reads when that gives the same answers,
        // else the whole payload.
        let Parsed {
            mut payload,
            stored,
            raw,
            exotic,
        } = match self
            .heavy
            .run(body.len(), || parse_payload(route, &body, content_type))
            .await
        {
            Ok(parsed) => parsed,
            Err(e) => {
                self.rejects.record(Reason::CannotParse, route_name, &e);
                return Answer::cannot_parse();
            }
        };
        let mut payload_changed = false;
        // 10b. A sender's verification handshake is answered here, never enqueued.
        if let Some(s) = sender
            && let Some(handshake) = sender::handshake(s, &payload)
        {
            tracing::info!(
                route = route_name,
                kind = handshake.kind,
                "answered a handshake"
            );
            return Answer::handshake(handshake.answer);
        }
        // 10c. A press of the Discord chat door's approval buttons, posted here because
        // the application has an Interactions Endpoint URL: handed to the chat door.
        // Read from the whole body: the route's own paths may leave the data out.
        if sender == Some(Sender::Discord)
            && let Some((press, key)) = sender::discord_chat_press(&body)
        {
            return self.hand_to_chat_door(press, key).await;
        }
        // 11. Event type.
        let event_type = match sender {
            Some(s) => sender::event_type(s, headers, &payload),
            None => event::event_type(headers, &payload),
        };
        let event_text = match &event_type {
            Value::String(s) => s.clone(),
            other => pyjson::text_form(other),
        };
        let admitted = match sender {
            Some(_) => event::event_allowed(&route.events, &event_type),
            None => event::event_admitted(&route.events, &event_type, headers, &payload),
        };
        if !admitted {
            tracing::info!(
                route = route_name,
                event = &*cut(&event_text),
                "ignored: event not in the route's events"
            );
            return Answer::ignored_event(&event_type);
        }
        // 12. Filters.
        let input = FilterInput {
            payload: &payload,
            event_type: &event_type,
            headers,
        };
        let matched = herald_trace::span!("webhook.filter")
            .in_scope(|| route.filter.matches(&input, &self.lists));
        if !matched {
            tracing::info!(
                route = route_name,
                event = &*cut(&event_text),
                "ignored: filters did not match"
            );
            return Answer::ignored("filter", route_name);
        }
        // 13. Script.
        if let Some(script_value) = &route.script {
            let exact = stored.as_deref().filter(|_| exotic);
            match self.run_script(script_value, &payload, exact).await {
                Ok(Some(new_payload)) => {
                    payload = new_payload;
                    payload_changed = true;
                }
                Ok(None) => {}
                Err(reason) => {
                    tracing::info!(route = route_name, event = &*cut(&event_text), %reason, "ignored: script");
                    return Answer::ignored("script", route_name);
                }
            }
        }
        // 14. Templates.
        let ctx = RenderContext {
            payload: &payload,
            event_type: &event_type,
            raw: raw.as_deref(),
            text: stored.as_deref().filter(|_| exotic && !payload_changed),
        };
        let prompt = match &route.prompt {
            Some(t) => t.render(&ctx),
            None => default_prompt(route_name, &ctx),
        };
        let mut deliver_extra = render_extra(route, &ctx);
        // 15–16. Delivery id, dedup, and the hand-over.
        let delivery_id = sender
            .and_then(|s| sender::delivery_id(s, headers, &payload))
            .unwrap_or_else(|| event::delivery_id(headers));
        let interaction = (sender == Some(Sender::Discord))
            .then(|| sender::discord_followup(&payload))
            .flatten();
        if let Some((application, token)) = &interaction {
            deliver_extra.insert(APPLICATION_ID.into(), Value::String(application.clone()));
            deliver_extra.insert(INTERACTION_TOKEN.into(), Value::String(token.clone()));
        }
        // A Discord interaction on a direct route is answered with the message itself.
        if route.deliver_only && interaction.is_some() {
            return Answer::delivered(route_name, "discord_interaction", &delivery_id)
                .replaced_by(sender::discord_message_answer(&prompt));
        }
        if route.deliver_only {
            let send = DirectSend {
                route: route_name,
                deliver: &route.deliver,
                delivery_id: &delivery_id,
                message: OutgoingMessage::new(prompt, deliver_extra),
                now_ms: self.clock.now_ms(),
            };
            return direct::deliver(&self.store, &self.targets, &self.in_flight, send).await;
        }
        let item = NewInboxItem {
            route: route_name.to_owned(),
            event_type: event_text.clone(),
            delivery_id: delivery_id.clone(),
            received_at_ms: self.clock.now_ms(),
            profile: route.profile.clone(),
            headers: kept_headers(headers, herald_trace::current_traceparent(), sender),
            // An unchanged JSON body is stored as received (it is valid UTF-8 JSON).
            payload: match stored.as_deref().map(std::str::from_utf8) {
                Some(Ok(text)) if !payload_changed => text.to_owned(),
                _ => Value::Object(payload).to_string(),
            },
            prompt,
            deliver: route.deliver.clone(),
            deliver_extra: Value::Object(deliver_extra).to_string(),
            skills: serde_json::to_string(&route.skills).unwrap_or_default(),
            toolsets: route
                .toolsets
                .as_ref()
                .and_then(|t| serde_json::to_string(t).ok()),
        };
        self.enqueue(item).await
    }

    /// Commits a Discord button press for the chat door (its route, its dedup key) and
    /// answers with a deferred update once it is kept.
    async fn hand_to_chat_door(&self, press: Value, key: String) -> Answer {
        let item = NewInboxItem {
            route: sender::DISCORD_CHAT_ROUTE.to_owned(),
            event_type: "interaction".to_owned(),
            delivery_id: key,
            received_at_ms: self.clock.now_ms(),
            profile: None,
            headers: "{}".to_owned(),
            payload: press.to_string(),
            prompt: String::new(),
            deliver: "discord".to_owned(),
            deliver_extra: "{}".to_owned(),
            skills: "[]".to_owned(),
            toolsets: None,
        };
        let answer = self.enqueue(item).await;
        match answer.outcome {
            "accepted" | "duplicate" => answer.replaced_by(sender::discord_deferred_update()),
            _ => answer,
        }
    }

    /// Commits an event to the inbox: the answer says whether it was new.
    async fn enqueue(&self, item: NewInboxItem) -> Answer {
        let route_name = item.route.clone();
        let route_name = route_name.as_str();
        let event_text = item.event_type.clone();
        let delivery_id = item.delivery_id.clone();
        let event_type = Value::String(event_text.clone());
        let enqueued = self
            .store
            .enqueue(item)
            .instrument(herald_trace::span!("inbox.enqueue"));
        match enqueued.await {
            Ok(EnqueueOutcome::Accepted { id }) => {
                self.work_notify.notify_one();
                tracing::info!(
                    route = route_name,
                    event = &*cut(&event_text),
                    delivery_id = &*cut(&delivery_id),
                    inbox_id = id,
                    "accepted"
                );
                Answer::accepted(route_name, &event_type, &delivery_id)
            }
            Ok(EnqueueOutcome::Duplicate) => {
                tracing::info!(
                    route = route_name,
                    event = &*cut(&event_text),
                    delivery_id = &*cut(&delivery_id),
                    "duplicate"
                );
                Answer::duplicate(&delivery_id)
            }
            Err(e) => {
                tracing::error!(route = route_name, delivery_id = &*cut(&delivery_id), error = %e, "not accepted: store unavailable");
                Answer::unavailable()
            }
        }
    }

    /// Reads the body holding room for it in the body budget (its declared length, the
    /// limit when it has none). The reservation is held until the request is answered.
    async fn admit_body(
        &self,
        route: &Route,
        declared: Option<u64>,
        body: Body,
    ) -> Result<(bytes::Bytes, body_budget::Reservation<'_>), Answer> {
        let reservation = self
            .budget
            .reserve(declared.unwrap_or(self.max_body_bytes))
            .await
            .ok_or_else(|| self.busy(route))?;
        let body = self.read_body(&route.name, body).await?;
        Ok((body, reservation))
    }

    /// Adds to a request's reservation what handling its authenticated body will cost.
    async fn reserve_handling(
        &self,
        route: &Route,
        body: &[u8],
        reservation: &mut body_budget::Reservation<'_>,
    ) -> Result<(), Answer> {
        // A route with a script builds the whole payload; the others only the paths they
        // read, plus the copies that are stored.
        let cost = if route.payload_paths.needs_everything() {
            body_budget::parse_cost(body)
        } else {
            body.len() as u64
        };
        if self.budget.grow(reservation, cost).await {
            Ok(())
        } else {
            Err(self.busy(route))
        }
    }

    fn busy(&self, route: &Route) -> Answer {
        self.rejects.record(Reason::Busy, &route.name, &"");
        Answer::busy(1)
    }

    /// Reads the body within `max_body_bytes` and `body_timeout`.
    async fn read_body(&self, route_name: &str, body: Body) -> Result<bytes::Bytes, Answer> {
        let limit = usize::try_from(self.max_body_bytes).unwrap_or(usize::MAX);
        match herald_http::body::read(body, limit, self.body_timeout).await {
            Ok(bytes) => Ok(bytes),
            Err(BodyError::TooLarge(_)) => {
                self.rejects
                    .record(Reason::TooLarge, route_name, &"while reading");
                Err(Answer::too_large())
            }
            Err(e) => {
                self.rejects.record(Reason::BadBody, route_name, &e);
                Err(Answer::bad_request())
            }
        }
    }

    fn warn_v1_once(&self, route: &str) {
        let mut warned = match self.v1_warned.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if warned.insert(route.to_owned()) {
            tracing::warn!(
                route,
                "route is called with the deprecated X-Webhook-Signature (V1) scheme, which has no replay \
                 protection; switch the sender to X-Webhook-Signature-V2 with X-Webhook-Timestamp"
            );
        }
    }

    /// `Ok(Some)` replaces the payload, `Ok(None)` keeps it, `Err` ignores the event.
    async fn run_script(
        &self,
        value: &str,
        payload: &Map<String, Value>,
        text: Option<&[u8]>,
    ) -> Result<Option<Map<String, Value>>, String> {
        let path = script::resolve(value, &self.home)?;
        match script::run(&path, payload, text, self.script_timeout).await {
            ScriptOutcome::Ignore(reason) => Err(reason),
            ScriptOutcome::Unchanged => Ok(None),
            ScriptOutcome::Replace(map) => Ok(Some(map)),
            ScriptOutcome::Output(text) => {
                let mut map = payload.clone();
                map.insert("script_output".to_owned(), Value::String(text));
                Ok(Some(map))
            }
        }
    }
}

/// The event type a header names, for the fast path: the preset's header, else the
/// detected one (none for GitLab, whose `object_kind` may admit the event).
fn header_event(sender: Option<Sender>, headers: &HeaderMap) -> Option<&[u8]> {
    match sender {
        Some(s) => sender::header_event_type(s, headers),
        None if event::is_gitlab(headers) => None,
        None => event::header_event_type(headers),
    }
}

/// The answer in the form the route's sender needs once it is verified:
/// - Discord takes only interaction responses, within 3 s: a committed interaction is
///   deferred (the agent's answer edits it later), one the route does not take is told
///   so, to its user alone;
/// - Twilio reads TwiML from an incoming message's answer (an empty `<Response/>` sends
///   no reply);
/// - Linear and Paddle document 200 as the only success.
fn fit_to_sender(answer: Answer, sender: Option<Sender>) -> Answer {
    match (sender, answer.outcome) {
        // A button press handed to the chat door keeps its deferred update.
        (Some(Sender::Discord), "accepted" | "duplicate")
            if answer.body
                != crate::answer::AnswerBody::Json(sender::discord_deferred_update()) =>
        {
            answer.replaced_by(sender::discord_deferred_answer())
        }
        (Some(Sender::Discord), "ignored" | "filtered" | "script_dropped") => {
            answer.replaced_by(sender::discord_not_handled_answer())
        }
        (Some(Sender::Twilio), _) if answer.status.is_success() => answer.as_empty_twiml(),
        (Some(s), _) if sender::wants_200(s) => answer.with_status_ok(),
        _ => answer,
    }
}

/// A body made a payload.
struct Parsed<'a> {
    /// The payload, or only the paths the route reads of it.
    payload: Map<String, Value>,
    /// The JSON text to store while the payload is unchanged (`None`: serialise it).
    stored: Option<Cow<'a, [u8]>>,
    /// `{__raw__}` and the default prompt, when rendered from the text.
    raw: Option<String>,
    /// `stored` holds numbers the payload holds only through stand-ins: templates read
    /// them from it (see herald-protocol's `json_literal`).
    exotic: bool,
}

/// Only the paths the route reads when that gives the same answers (the payload shown
/// whole is then written from the body's text), else the whole payload.
fn parse_payload<'a>(
    route: &Route,
    body: &'a [u8],
    content_type: Option<&[u8]>,
) -> Result<Parsed<'a>, event::ParseError> {
    if let Some(picked) = route.payload_paths.pick(body) {
        let needs_raw = route.payload_paths.needs_raw();
        let raw = needs_raw
            .then(|| raw_render::indented_cut(&picked.text, RAW_MAX_CHARS))
            .flatten();
        // A payload shown whole that could not be written from the text (a repeated key
        // changes what is shown) takes the whole payload.
        if raw.is_some() || !needs_raw {
            return Ok(Parsed {
                payload: picked.payload,
                stored: Some(picked.text),
                raw,
                exotic: picked.exotic,
            });
        }
    }
    let (payload, kind) = event::parse_body_kind(body, content_type)?;
    // A JSON body is stored as its text: as received, or as it was read (without a
    // byte-order mark, lone surrogates replaced), which keeps every number as written.
    let (stored, exotic) = match kind {
        BodyKind::Json => (Some(Cow::Borrowed(body)), literal::has_exotic(body)),
        BodyKind::RewrittenJson => match json_text::readable(body) {
            Some(text) => (Some(text.bytes), text.exotic),
            None => (None, false),
        },
        BodyKind::Form => (None, false),
    };
    Ok(Parsed {
        payload,
        stored,
        raw: None,
        exotic,
    })
}

fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn render_extra(route: &Route, ctx: &RenderContext<'_>) -> Map<String, Value> {
    route
        .deliver_extra
        .iter()
        .map(|(k, v)| {
            let value = match v {
                ExtraValue::Template(t) => Value::String(t.render(ctx)),
                ExtraValue::Json(j) => j.clone(),
            };
            (k.clone(), value)
        })
        .collect()
}

/// The headers kept with an accepted event (the common ones, and a preset's event and
/// delivery headers), as a JSON object. `traceparent` is the ingress span's when traces
/// are exported (the worker continues it), else the sender's as it came.
fn kept_headers(
    headers: &HeaderMap,
    traceparent: Option<String>,
    sender: Option<Sender>,
) -> String {
    let mut map = Map::new();
    let preset = sender.into_iter().flat_map(sender::kept_headers);
    let kept = event::KEPT_HEADERS.iter().copied().chain(preset);
    for name in kept {
        if let Some(v) = headers.get(name) {
            map.insert(
                name.to_owned(),
                Value::String(String::from_utf8_lossy(v.as_bytes()).into_owned()),
            );
        }
    }
    if let Some(ours) = traceparent {
        map.insert("traceparent".into(), Value::String(ours));
    }
    Value::Object(map).to_string()
}

impl herald_admin::LiveRoutes for Gateway {
    fn routes(&self) -> Vec<Arc<herald_config::Route>> {
        let table = self.registry.current();
        table
            .names()
            .into_iter()
            .filter_map(|name| table.get(name).cloned())
            .collect()
    }
}
