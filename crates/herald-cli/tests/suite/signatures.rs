//! Every signature scheme over a real socket, with the bad cases.

use super::support::*;
use herald_webhook::verify::sign;
use reqwest::StatusCode;
use serde_json::json;

const ROUTES: &str = "        gh:\n          prompt: 'x'\n        std:\n          secret: whsec_MDEyMzQ1Njc4OQ\n          prompt: '{data.id}'\n        gl:\n          secret: gitlab-token\n";

#[tokio::test]
async fn github_scheme() {
    let h = Herald::start(&config_with_routes(ROUTES));
    let body = r#"{"action":"opened"}"#;
    let (s, b) = h.github("gh", "pull_request", body, Some("g-1")).await;
    assert_eq!(
        (s, b),
        (
            StatusCode::ACCEPTED,
            json!({"status":"accepted","route":"gh","event":"pull_request","delivery_id":"g-1"})
        )
    );
    // Replayed delivery id.
    let (s, b) = h.github("gh", "pull_request", body, Some("g-1")).await;
    assert_eq!(
        (s, b),
        (
            StatusCode::OK,
            json!({"status":"duplicate","delivery_id":"g-1"})
        )
    );
    // Wrong signature, uppercase hex, sha1, missing header, bearer only.
    let good = sign::github(SECRET, body.as_bytes());
    for sig in [
        sign::github("wrong", body.as_bytes()),
        good.to_uppercase(),
        good.replace("sha256=", "sha1="),
    ] {
        let (s, b) = h
            .post("/webhooks/gh", body, &[("x-hub-signature-256", sig)])
            .await;
        assert_eq!(
            (s, b),
            (
                StatusCode::UNAUTHORIZED,
                json!({"error": "Invalid signature"})
            )
        );
    }
    let (s, _) = h.post("/webhooks/gh", body, &[]).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (s, _) = h
        .post(
            "/webhooks/gh",
            body,
            &[("authorization", format!("Bearer {SECRET}"))],
        )
        .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    // A changed body under the old signature.
    let (s, _) = h
        .post(
            "/webhooks/gh",
            r#"{"action":"closed"}"#,
            &[("x-hub-signature-256", good)],
        )
        .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    // Garbage with a bad signature is 401, not 400.
    let (s, _) = h
        .post(
            "/webhooks/gh",
            "\u{0}\u{1}garbage",
            &[("x-hub-signature-256", "sha256=00".into())],
        )
        .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let log = h.log();
    assert!(log.contains("rejected: invalid signature"), "{log}");
    assert!(!log.contains(SECRET), "the secret must never be logged");
}

#[tokio::test]
async fn gitlab_scheme() {
    let h = InProcess::start(&config_with_routes(ROUTES));
    let (s, b) = h
        .post(
            "/webhooks/gl",
            r#"{"object_kind":"push"}"#,
            &[
                ("x-gitlab-token", "gitlab-token".into()),
                ("x-gitlab-event", "Push Hook".into()),
            ],
        )
        .await;
    assert_eq!(s, StatusCode::ACCEPTED);
    assert_eq!(b["event"], "Push Hook");
    let (s, _) = h
        .post(
            "/webhooks/gl",
            "{}",
            &[("x-gitlab-token", "GITLAB-TOKEN".into())],
        )
        .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    // webhook-id/timestamp metadata next to the GitLab token still uses GitLab.
    let (s, _) = h
        .post(
            "/webhooks/gl",
            "{}",
            &[
                ("x-gitlab-token", "gitlab-token".into()),
                ("webhook-id", "x".into()),
                ("webhook-timestamp", "1".into()),
            ],
        )
        .await;
    assert_eq!(s, StatusCode::ACCEPTED);
}

#[tokio::test]
async fn generic_v2_and_v1() {
    let h = Herald::start(&config_with_routes(ROUTES));
    let body = r#"{"a":1}"#;
    let ts = now().to_string();
    let v2 = sign::generic_v2(SECRET, &ts, body.as_bytes());
    let (s, _) = h
        .post(
            "/webhooks/gh",
            body,
            &[
                ("x-webhook-signature-v2", v2.clone()),
                ("x-webhook-timestamp", ts.clone()),
            ],
        )
        .await;
    assert_eq!(s, StatusCode::ACCEPTED);
    // Stale (301 s) and future timestamps.
    for skew in [-301i64, 301] {
        let old = (now() + skew).to_string();
        let sig = sign::generic_v2(SECRET, &old, body.as_bytes());
        let (s, _) = h
            .post(
                "/webhooks/gh",
                body,
                &[
                    ("x-webhook-signature-v2", sig),
                    ("x-webhook-timestamp", old),
                ],
            )
            .await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "skew {skew}");
    }
    // Timestamp stripped, valid V1 alongside: no downgrade.
    let v1 = sign::generic_v1(SECRET, body.as_bytes());
    let (s, _) = h
        .post(
            "/webhooks/gh",
            body,
            &[
                ("x-webhook-signature-v2", v2),
                ("x-webhook-signature", v1.clone()),
            ],
        )
        .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    // V1 alone is accepted, with a deprecation warning logged once per route.
    for _ in 0..3 {
        let (s, _) = h
            .post("/webhooks/gh", body, &[("x-webhook-signature", v1.clone())])
            .await;
        assert_eq!(s, StatusCode::ACCEPTED);
    }
    let log = h.log();
    assert_eq!(
        log.matches("deprecated X-Webhook-Signature (V1)").count(),
        1,
        "{log}"
    );
}

#[tokio::test]
async fn standard_webhooks_both_spellings() {
    let h = InProcess::start(&config_with_routes(ROUTES));
    let body = r#"{"type":"event","data":{"id":"srun_1","type":"forward.schedule_run.succeeded"}}"#;
    let secret = "whsec_MDEyMzQ1Njc4OQ";
    for (prefix, id) in [("webhook", "whe_1"), ("svix", "msg_1")] {
        let ts = now().to_string();
        let sig = sign::standard(secret, id, &ts, body.as_bytes()).unwrap();
        let headers = vec![
            (
                if prefix == "svix" {
                    "svix-id"
                } else {
                    "webhook-id"
                },
                id.to_owned(),
            ),
            (
                if prefix == "svix" {
                    "svix-timestamp"
                } else {
                    "webhook-timestamp"
                },
                ts.clone(),
            ),
            (
                if prefix == "svix" {
                    "svix-signature"
                } else {
                    "webhook-signature"
                },
                format!("v1,AAAA {sig}"),
            ),
            (
                "webhook-event-type",
                "forward.schedule_run.succeeded".to_owned(),
            ),
        ];
        let (s, b) = h.post("/webhooks/std", body, &headers).await;
        assert_eq!(s, StatusCode::ACCEPTED, "{prefix}: {b}");
        assert_eq!(b["delivery_id"], id);
        assert_eq!(b["event"], "forward.schedule_run.succeeded");
        // The sender's retry: same id, new timestamp and signature.
        let ts2 = (now() + 1).to_string();
        let mut retry = headers.clone();
        retry[1].1 = ts2.clone();
        retry[2].1 = sign::standard(secret, id, &ts2, body.as_bytes()).unwrap();
        let (s, b) = h.post("/webhooks/std", body, &retry).await;
        assert_eq!(
            (s, b),
            (
                StatusCode::OK,
                json!({"status": "duplicate", "delivery_id": id})
            )
        );
    }
    // Stale, v2-only, missing id.
    let ts = (now() - 301).to_string();
    let sig = sign::standard(secret, "x", &ts, body.as_bytes()).unwrap();
    let (s, _) = h
        .post(
            "/webhooks/std",
            body,
            &[
                ("webhook-id", "x".into()),
                ("webhook-timestamp", ts),
                ("webhook-signature", sig),
            ],
        )
        .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let ts = now().to_string();
    let sig = sign::standard(secret, "y", &ts, body.as_bytes())
        .unwrap()
        .replace("v1,", "v2,");
    let (s, _) = h
        .post(
            "/webhooks/std",
            body,
            &[
                ("webhook-id", "y".into()),
                ("webhook-timestamp", ts.clone()),
                ("webhook-signature", sig),
            ],
        )
        .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let sig = sign::standard(secret, "z", &ts, body.as_bytes()).unwrap();
    let (s, _) = h
        .post(
            "/webhooks/std",
            body,
            &[("webhook-timestamp", ts), ("webhook-signature", sig)],
        )
        .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    // The stored prompt rendered the payload field.
    let inbox = h.inbox();
    assert!(inbox.iter().all(|i| i["prompt"] == "srun_1"), "{inbox:?}");
}

#[tokio::test]
async fn gitlab_event_names_and_retries_as_gitlab_sends_them() {
    let routes = "        mrs:\n          secret: gitlab-token\n          events: [\"merge_request\"]\n          prompt: '{object_attributes.title}'\n        gh:\n          events: [merge_request]\n";
    let h = InProcess::start(&config_with_routes(routes));
    let body = r#"{"object_kind":"merge_request","object_attributes":{"title":"Fix"}}"#;
    let send = |event: &'static str, uuid: &'static str| {
        let h = &h;
        async move {
            h.post(
                "/webhooks/mrs",
                body,
                &[
                    ("x-gitlab-token", "gitlab-token".into()),
                    ("x-gitlab-event", event.into()),
                    ("x-gitlab-event-uuid", uuid.into()),
                ],
            )
            .await
        }
    };
    let (s, b) = send("Merge Request Hook", "uuid-1").await;
    assert_eq!(
        (s, b),
        (
            StatusCode::ACCEPTED,
            json!({"status":"accepted","route":"mrs","event":"Merge Request Hook","delivery_id":"uuid-1"})
        )
    );
    // GitLab's re-send keeps its X-Gitlab-Event-UUID: a duplicate.
    let (s, b) = send("Merge Request Hook", "uuid-1").await;
    assert_eq!(
        (s, b),
        (
            StatusCode::OK,
            json!({"status":"duplicate","delivery_id":"uuid-1"})
        )
    );
    let (s, b) = send("Push Hook", "uuid-2").await;
    assert_eq!(s, StatusCode::ACCEPTED, "object_kind admits it: {b}");
    let push = r#"{"object_kind":"push"}"#;
    let (s, b) = h
        .post(
            "/webhooks/mrs",
            push,
            &[
                ("x-gitlab-token", "gitlab-token".into()),
                ("x-gitlab-event", "Push Hook".into()),
            ],
        )
        .await;
    assert_eq!(
        (s, b),
        (
            StatusCode::OK,
            json!({"status":"ignored","event":"Push Hook"})
        )
    );
    // Without the GitLab header, matching stays exact (GitHub included).
    let (s, b) = h.github("gh", "pull_request", body, None).await;
    assert_eq!(
        (s, b),
        (
            StatusCode::OK,
            json!({"status":"ignored","event":"pull_request"})
        )
    );
    // Idempotency-Key is a delivery id too.
    for expected in ["accepted", "duplicate"] {
        let (_, b) = h
            .post(
                "/webhooks/gh",
                r#"{"type":"merge_request"}"#,
                &[
                    (
                        "x-hub-signature-256",
                        sign::github(SECRET, br#"{"type":"merge_request"}"#),
                    ),
                    ("idempotency-key", "idem-1".into()),
                ],
            )
            .await;
        assert_eq!(b["status"], expected, "{b}");
    }
}
