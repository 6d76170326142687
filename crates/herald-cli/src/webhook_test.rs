//! The request `herald webhook test` sends, and what it says about the answer: why an
//! `ignored` answer was ignored, and why a 502 failed (from herald's delivery record).

use crate::stores::{self, Access};
use herald_config::{Home, Route};
use herald_store::DeliveryQuery;
use herald_webhook::verify::sign;
use serde_json::Value;
use std::process::ExitCode;

/// One signed test request.
pub struct TestRequest<'a> {
    pub url: &'a str,
    pub event: &'a str,
    pub body: String,
}

/// Sends the request and prints the answer with its explanation. Exit 0 on a 2xx.
pub fn send(home: &Home, route: &Route, request: &TestRequest<'_>) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // A fresh delivery id: repeated tests are not duplicates, and the delivery record of
    // this very request can be found.
    let delivery_id = format!("herald-test-{}", uuid::Uuid::new_v4());
    let answer = runtime.block_on(post(route, request, &delivery_id));
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

async fn post(
    route: &Route,
    request: &TestRequest<'_>,
    delivery_id: &str,
) -> Result<(u16, String), reqwest::Error> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(10))
        .build()?;
    let resp = client
        .post(request.url)
        .header("Content-Type", "application/json")
        .header("X-GitHub-Event", request.event)
        .header("X-GitHub-Delivery", delivery_id)
        .header(
            "X-Hub-Signature-256",
            sign::github(&route.secret, request.body.as_bytes()),
        )
        .body(request.body.clone())
        .send()
        .await?;
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
