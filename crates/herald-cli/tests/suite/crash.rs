//! Crash safety: thousands of concurrent accepted events, `kill -9` in the middle, a
//! restart on the same home: every 202 is in the inbox exactly once, and redelivering
//! every event answers duplicate.

use super::support::*;
use reqwest::StatusCode;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const EVENTS: usize = 3000;
const CONCURRENCY: usize = 32;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_loses_no_accepted_event() {
    let h = Herald::start(&config_with_routes("        r: {prompt: 'n={n}'}\n"));
    let base = h.url("/webhooks/r");
    let client = http_client(Duration::from_secs(5));
    let next = Arc::new(AtomicUsize::new(0));
    let sent = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..CONCURRENCY {
        let (client, base, next, sent) = (client.clone(), base.clone(), next.clone(), sent.clone());
        workers.push(tokio::spawn(async move {
            let mut accepted = Vec::new();
            loop {
                let n = next.fetch_add(1, Ordering::SeqCst);
                if n >= EVENTS {
                    break;
                }
                let body = format!("{{\"n\": {n}}}");
                let result = client
                    .post(&base)
                    .header("x-github-event", "push")
                    .header("x-github-delivery", format!("crash-{n}"))
                    .header(
                        "x-hub-signature-256",
                        herald_webhook::verify::sign::github(SECRET, body.as_bytes()),
                    )
                    .body(body)
                    .send()
                    .await;
                sent.fetch_add(1, Ordering::SeqCst);
                match result {
                    Ok(resp) if resp.status() == StatusCode::ACCEPTED => accepted.push(n),
                    Ok(resp) => assert_eq!(
                        resp.status(),
                        StatusCode::ACCEPTED,
                        "before the kill every answer is 202"
                    ),
                    Err(_) => break, // the server died mid-request
                }
            }
            accepted
        }));
    }
    // Kill in the middle of the stream.
    while sent.load(Ordering::SeqCst) < EVENTS / 2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let home = h.into_home();
    let mut accepted: Vec<usize> = Vec::new();
    for w in workers {
        accepted.extend(w.await.unwrap());
    }
    assert!(
        accepted.len() >= EVENTS / 4,
        "only {} accepted before the kill",
        accepted.len()
    );

    let h = Herald::start_in(home, &[]);
    let inbox = h.inbox();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for item in &inbox {
        *seen
            .entry(item["delivery_id"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    assert!(seen.values().all(|c| *c == 1), "an event is stored twice");
    for n in &accepted {
        assert_eq!(
            seen.get(&format!("crash-{n}")),
            Some(&1),
            "accepted event {n} was lost"
        );
    }
    // Redelivering everything that was stored answers duplicate.
    for item in &inbox {
        let id = item["delivery_id"].as_str().unwrap();
        let n: usize = id.trim_start_matches("crash-").parse().unwrap();
        let (s, b) = h
            .github("r", "push", &format!("{{\"n\": {n}}}"), Some(id))
            .await;
        assert_eq!(
            (s, b["status"].as_str()),
            (StatusCode::OK, Some("duplicate"))
        );
    }
    println!(
        "accepted before kill: {}, stored: {}",
        accepted.len(),
        inbox.len()
    );
}
