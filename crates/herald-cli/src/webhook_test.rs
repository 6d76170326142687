//! The request `herald webhook test` sends, and what it says about the answer: why an
//! `ignored` answer was ignored, and why a 502 failed (from herald's delivery record).

use crate::stores::{self, Access};
use herald_config::{Home, Route};
use herald_store::DeliveryQuery;
use herald_webhook::sender::sample::{self, Sample};
use herald_webhook::sender::{Sender, SenderPreset, sign as sender_sign};
use herald_webhook::verify::sign;
use serde_json::Value;
use std::process::ExitCode;

/// One test request, as asked.
pub struct TestRequest<'a> {
    pub url: &'a str,
    /// `--event`.
    pub event: Option<&'a str>,
    /// `--payload`'s text.
    pub payload: Option<String>,
}

/// A request ready to send: where, its headers and its body.
struct Built {
    url: String,
    headers: Vec<(String, String)>,
    body: String,
}

/// The default body of a route without `source:`.
const PLAIN_TEST_BODY: &str =
    r#"{"test": true, "event_type": "test", "message": "Hello from herald webhook test"}"#;

/// Builds the request, signed as the route's sender signs (GitHub's scheme without
/// `source:`), with `delivery_id` where the sender puts its id.
fn build(route: &Route, request: &TestRequest<'_>, delivery_id: &str) -> Result<Built, String> {
    let Some(preset) = &route.sender else {
        let body = request
            .payload
            .clone()
            .unwrap_or_else(|| PLAIN_TEST_BODY.to_owned());
        json_payload(&body)?;
        let event = request
            .event
            .map(str::to_owned)
            .or_else(|| route.events.first().cloned())
            .unwrap_or_else(|| "test".to_owned());
        let headers = vec![
            ("Content-Type".to_owned(), "application/json".to_owned()),
            ("X-GitHub-Event".to_owned(), event),
            ("X-GitHub-Delivery".to_owned(), delivery_id.to_owned()),
            (
                "X-Hub-Signature-256".to_owned(),
                sign::github(&route.secret, body.as_bytes()),
            ),
        ];
        return Ok(Built {
            url: request.url.to_owned(),
            headers,
            body,
        });
    };
    let sample = preset_sample(preset, route, request, delivery_id)?;
    let body = sample.body_text();
    let now = jiff::Timestamp::now().as_second();
    let signed = sender_sign::request(
        preset,
        &route.secret,
        body.as_bytes(),
        now,
        Some(delivery_id),
    )
    .map_err(|e| e.to_string())?;
    let url = match &signed.query {
        Some(q) => format!("{}?{q}", request.url),
        None => request.url.to_owned(),
    };
    let mut headers = sample.headers;
    headers.extend(signed.headers);
    Ok(Built { url, headers, body })
}

/// The preset's bundled sample (or `--payload`), with the event and delivery id set.
fn preset_sample(
    preset: &SenderPreset,
    route: &Route,
    request: &TestRequest<'_>,
    delivery_id: &str,
) -> Result<Sample, String> {
    let sender = preset.sender;
    let mut sample = sample::bundled(sender);
    if let Some(text) = &request.payload {
        sample.body = match sender {
            // Twilio posts form fields.
            Sender::Twilio if json_payload(text).is_err() => Value::String(text.clone()),
            _ => json_payload(text)?,
        };
    }
    // The sample takes the route's first event; your own payload keeps its own unless
    // `--event` names one.
    let route_event = route.events.first().map(String::as_str);
    let default_event = route_event.filter(|_| request.payload.is_none());
    if let Some(event) = request.event.or(default_event) {
        sample.set_event_type(sender, event);
    }
    sample.set_delivery_id(sender, delivery_id);
    if sender == Sender::Linear
        && let Some(payload) = sample.payload_mut()
    {
        sender_sign::stamp_linear(payload, jiff::Timestamp::now().as_millisecond());
    }
    Ok(sample)
}

fn json_payload(text: &str) -> Result<Value, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err("--payload must be a JSON object".to_owned()),
        Err(e) => Err(format!("--payload is not valid JSON: {e}")),
    }
}

/// Sends the request and prints the answer with its explanation. Exit 0 on a 2xx.
pub fn send(home: &Home, route: &Route, request: &TestRequest<'_>) -> anyhow::Result<ExitCode> {
    let runtime = herald_app::command_runtime()?;
    // A fresh delivery id: repeated tests are not duplicates, and the delivery record of
    // this very request can be found.
    let delivery_id = format!("herald-test-{}", uuid::Uuid::new_v4());
    let built = match build(route, request, &delivery_id) {
        Ok(b) => b,
        Err(e) => {
            outln!("Error: {e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let answer = runtime.block_on(post(&built));
    let (status, text) = match answer {
        Ok(answer) => answer,
        Err(e) => {
            outln!("Error: {e}");
            outln!("  Is the gateway running? Start it with: herald gateway run");
            return Ok(ExitCode::FAILURE);
        }
    };
    outln!("Response ({status}): {text}");
    let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    if answer["status"] == "ignored" {
        outln!("  Why: {}", why_ignored(route, &answer));
    }
    if status == 502 {
        match delivery_error(home, &route.name, &delivery_id) {
            Some(reason) => outln!("  Delivery failed: {reason}"),
            None => outln!(
                "  Delivery failed; see `herald deliveries list --route {}`",
                route.name
            ),
        }
    }
    Ok(if (200..300).contains(&status) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

async fn post(built: &Built) -> Result<(u16, String), reqwest::Error> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(10))
        .build()?;
    let mut req = client.post(&built.url).body(built.body.clone());
    for (name, value) in &built.headers {
        req = req.header(name, value);
    }
    let resp = req.send().await?;
    let status = resp.status().as_u16();
    Ok((status, resp.text().await.unwrap_or_default()))
}

/// Why the route ignored the request, from the answer's `reason` (or its `event`).
fn why_ignored(route: &Route, answer: &Value) -> String {
    match answer["reason"].as_str() {
        Some("filter") => "the route's `filters` did not match this payload; send one that \
                           matches with --payload"
            .to_owned(),
        Some("script") => format!(
            "the route's script {} ignored the event, or could not run (the gateway log says which)",
            route.script.as_deref().unwrap_or("(none)")
        ),
        _ => format!(
            "the event `{}` is not in the route's events ({}); pick one with --event",
            answer["event"].as_str().unwrap_or("?"),
            route.events.join(", ")
        ),
    }
}

/// The error herald recorded for this request's delivery.
fn delivery_error(home: &Home, route: &str, delivery_id: &str) -> Option<String> {
    let rt = stores::runtime().ok()?;
    let store = stores::open(home, Access::Read, &rt).ok()??;
    let query = DeliveryQuery {
        route: Some(route.to_owned()),
        delivery_id: Some(delivery_id.to_owned()),
        limit: Some(1),
        ..DeliveryQuery::default()
    };
    let found = rt.block_on(store.deliveries(query)).ok()?;
    found.into_iter().next().and_then(|d| d.error)
}
