//! The HTTP surface: health, paths, methods, size limits, parsing, rate limit, profiles,
//! subscriptions, direct delivery, and hostile input that must never break herald.

use super::support::*;
use herald_webhook::verify::sign;
use reqwest::StatusCode;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn health_paths_and_methods() {
    let h = InProcess::start(&config_with_routes("        r: {}\n"));
    let (s, body) = h.get("/health").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap(),
        json!({"status": "ok", "platform": "webhook"})
    );
    let head = raw_request(
        &h.addr(),
        b"HEAD /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (s, body) = h.get("/nope").await;
    assert_eq!(
        (s, body.as_str()),
        (StatusCode::NOT_FOUND, r#"{"error":"Not found"}"#)
    );
    let (s, _) = h.get("/webhooks/r").await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
    let (s, b) = h.post("/health", "", &[]).await;
    assert_eq!(
        (s, b),
        (
            StatusCode::METHOD_NOT_ALLOWED,
            json!({"error": "Method not allowed"})
        )
    );
    let (s, _) = h.post("/webhooks/r/", "", &[]).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, b) = h.post("/webhooks/%C3%A9t%C3%A9", "", &[]).await;
    assert_eq!(
        (s, b),
        (
            StatusCode::NOT_FOUND,
            json!({"error": "Unknown route: été"})
        )
    );
    let (s, b) = h.post("/webhooks/..%2Fx", "", &[]).await;
    assert_eq!(
        (s, b),
        (
            StatusCode::NOT_FOUND,
            json!({"error": "Unknown route: ../x"})
        )
    );
    let (s, _) = h.post("/webhooks/%FF", "", &[]).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn body_size_limits() {
    let config = config_with_routes("        r: {}\n").replace(
        "rate_limit: 100000",
        "rate_limit: 100000\n      max_body_bytes: 100",
    );
    let h = InProcess::start(&config);
    // Exactly the limit is accepted.
    let body = format!("{{\"k\":\"{}\"}}", "a".repeat(92));
    assert_eq!(body.len(), 100);
    let (s, _) = h.github("r", "push", &body, None).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    // One byte over.
    let body = format!("{{\"k\":\"{}\"}}", "a".repeat(93));
    let (s, b) = h.github("r", "push", &body, None).await;
    assert_eq!(
        (s, b),
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            json!({"error": "Payload too large"})
        )
    );
    // A declared Content-Length over the limit is refused before any body byte is sent.
    let head = raw_request(
        &h.addr(),
        b"POST /webhooks/r HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n",
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
    // Chunked, growing past the limit.
    let mut req = b"POST /webhooks/r HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n".to_vec();
    for _ in 0..5 {
        req.extend_from_slice(b"32\r\n");
        req.extend_from_slice(&[b'a'; 50]);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    let resp = raw_request(&h.addr(), &req).await;
    assert!(resp.starts_with("HTTP/1.1 413"), "{resp}");
    // An unknown route is 404 even when oversized.
    let resp = raw_request(
        &h.addr(),
        b"POST /webhooks/zz HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n",
    )
    .await;
    assert!(resp.starts_with("HTTP/1.1 404"), "{resp}");
    // A body shorter than declared, then the connection closes: 400, herald keeps serving.
    let resp = raw_request(
        &h.addr(),
        b"POST /webhooks/r HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{\"a\":",
    )
    .await;
    assert!(
        resp.is_empty() || resp.starts_with("HTTP/1.1 400"),
        "{resp}"
    );
    let (s, _) = h.get("/health").await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test]
async fn body_parsing() {
    let h = InProcess::start(&config_with_routes(
        "        r:\n          prompt: 'a={a} b={b}'\n",
    ));
    let post = |body: &'static [u8], ct: Option<&'static str>| {
        let mut headers = vec![("x-hub-signature-256", sign::github(SECRET, body))];
        if let Some(ct) = ct {
            headers.push(("content-type", ct.to_owned()));
        }
        let h = &h;
        async move { h.post("/webhooks/r", body.to_vec(), &headers).await }
    };
    let bad = json!({"error": "Cannot parse body"});
    assert_eq!(
        post(b"{bad json", Some("application/json")).await,
        (StatusCode::BAD_REQUEST, bad.clone())
    );
    assert_eq!(
        post(
            b"{bad json",
            Some("application/cloudevents+json; charset=utf-8")
        )
        .await,
        (StatusCode::BAD_REQUEST, bad.clone())
    );
    assert_eq!(
        post(b"[1,2]", None).await,
        (StatusCode::BAD_REQUEST, bad.clone())
    );
    assert_eq!(
        post(b"\"str\"", Some("application/json")).await,
        (StatusCode::BAD_REQUEST, bad.clone())
    );
    assert_eq!(
        post(b"\xff\xfe\x00", Some("text/plain")).await,
        (StatusCode::BAD_REQUEST, bad)
    );
    // JSON sent as text/plain or without a type is JSON.
    assert_eq!(
        post(br#"{"a":"j"}"#, Some("text/plain")).await.0,
        StatusCode::ACCEPTED
    );
    assert_eq!(post(br#"{"a":"k"}"#, None).await.0, StatusCode::ACCEPTED);
    // Form fallback, and plain words become {}.
    assert_eq!(
        post(b"a=1&b=x+y&c=", Some("application/x-www-form-urlencoded"))
            .await
            .0,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        post(b"just words", Some("text/plain")).await.0,
        StatusCode::ACCEPTED
    );
    let prompts: Vec<String> = h
        .inbox()
        .iter()
        .map(|i| i["prompt"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        prompts,
        vec!["a={a} b={b}", "a=1 b=x y", "a=k b={b}", "a=j b={b}"]
    );
}

#[tokio::test]
async fn valid_json_as_python_reads_it_is_never_an_empty_payload() {
    let h = InProcess::start(&config_with_routes(
        "        r:\n          prompt: 'a={a} action={action}'\n",
    ));
    let post = |body: Vec<u8>, ct: Option<&'static str>| {
        let mut headers = vec![("x-hub-signature-256", sign::github(SECRET, &body))];
        if let Some(ct) = ct {
            headers.push(("content-type", ct.to_owned()));
        }
        let h = &h;
        async move { h.post("/webhooks/r", body, &headers).await }
    };
    let deep = format!(
        "{{\"a\": \"deep\", \"n\": {}1{}}}",
        "[".repeat(500),
        "]".repeat(500)
    );
    let cases: Vec<(Vec<u8>, Option<&str>)> = vec![
        (
            b"\xEF\xBB\xBF{\"a\": \"bom\"}".to_vec(),
            Some("application/json"),
        ),
        (b"\xEF\xBB\xBF{\"a\": \"bom2\"}".to_vec(), None),
        (br#"{"a": "lone\ud800"}"#.to_vec(), Some("text/plain")),
        (deep.into_bytes(), None),
        // GitHub's default content type: payload=<json>.
        (
            b"payload=%7B%22action%22%3A%22opened%22%2C%22a%22%3A%22form%22%7D".to_vec(),
            Some("application/x-www-form-urlencoded"),
        ),
    ];
    for (body, ct) in cases {
        let (s, b) = post(body, ct).await;
        assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    }
    // Deeper than herald's limit: refused, never form-decoded to {}.
    let too_deep = format!("{{\"a\": {}1{}}}", "[".repeat(1500), "]".repeat(1500));
    assert_eq!(
        post(too_deep.into_bytes(), None).await,
        (
            StatusCode::BAD_REQUEST,
            json!({"error": "Cannot parse body"})
        )
    );
    let mut prompts: Vec<String> = h
        .inbox()
        .iter()
        .map(|i| i["prompt"].as_str().unwrap().to_owned())
        .collect();
    prompts.reverse();
    assert_eq!(
        prompts,
        vec![
            "a=bom action={action}",
            "a=bom2 action={action}",
            "a=lone\u{FFFD} action={action}",
            "a=deep action={action}",
            "a=form action=opened",
        ]
    );
}

/// Python reads `123456789012345678901234567890` as an int, `-0` as 0 and `1e400` as
/// inf; herald's trees hold 64-bit ints and finite floats, so prompts and the stored
/// payload are written from the body's text (the expected texts are Python's).
#[tokio::test]
async fn numbers_beyond_a_tree_render_and_are_stored_as_python_reads_them() {
    let h = InProcess::start(&config_with_routes(
        "        t:\n          prompt: '{big} {o} {o.z} {s}'\n        d: {}\n",
    ));
    let body =
        r#"{"big": 123456789012345678901234567890, "o": {"z": -0, "inf": 1e400}, "s": "1e400"}"#;
    for (route, body) in [
        ("t", body.as_bytes().to_vec()),
        ("d", body.as_bytes().to_vec()),
        ("t", [b"\xEF\xBB\xBF".as_slice(), body.as_bytes()].concat()),
    ] {
        let headers = [("x-hub-signature-256", sign::github(SECRET, &body))];
        let (s, b) = h.post(&format!("/webhooks/{route}"), body, &headers).await;
        assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    }
    let mut items = h.inbox();
    items.reverse();
    let shown = "123456789012345678901234567890 {\n  \"z\": 0,\n  \"inf\": Infinity\n} 0 1e400";
    assert_eq!(items[0]["prompt"], shown);
    assert!(
        items[1]["prompt"].as_str().unwrap().contains(
            "{\n  \"big\": 123456789012345678901234567890,\n  \"o\": {\n    \"z\": 0,\n    \"inf\": Infinity\n  },\n  \"s\": \"1e400\"\n}"
        ),
        "{}",
        items[1]["prompt"]
    );
    // A body read without its byte-order mark is stored as read, its numbers as written.
    assert_eq!(items[2]["prompt"], shown);
    let (code, listed, err) = h.cli(&["inbox", "list", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        listed
            .matches(r#""big": 123456789012345678901234567890,"#)
            .count(),
        3,
        "{listed}"
    );
    assert_eq!(listed.matches(r#""inf": 1e400}"#).count(), 3, "{listed}");
}

#[tokio::test]
async fn rate_limit_counts_only_authenticated_requests() {
    let config = config_with_routes("        r: {}\n        other: {}\n")
        .replace("rate_limit: 100000", "rate_limit: 3");
    let h = InProcess::start(&config);
    for _ in 0..5 {
        let (s, _) = h
            .post(
                "/webhooks/r",
                "{}",
                &[("x-hub-signature-256", "sha256=00".into())],
            )
            .await;
        assert_eq!(s, StatusCode::UNAUTHORIZED);
    }
    for i in 0..3 {
        let (s, _) = h.github("r", "push", "{}", Some(&format!("d{i}"))).await;
        assert_eq!(s, StatusCode::ACCEPTED);
    }
    let (s, b) = h.github("r", "push", "{}", Some("d9")).await;
    assert_eq!(
        (s, b),
        (
            StatusCode::TOO_MANY_REQUESTS,
            json!({"error": "Rate limit exceeded"})
        )
    );
    let (s, _) = h.github("other", "push", "{}", Some("d9")).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    // The rejected request left no dedup key.
    assert_eq!(
        h.inbox()
            .iter()
            .filter(|i| i["delivery_id"] == "d9")
            .count(),
        1
    );
}

#[tokio::test]
async fn zero_rate_limit_rejects_everything() {
    let h = InProcess::start(
        &config_with_routes("        r: {}\n").replace("rate_limit: 100000", "rate_limit: 0"),
    );
    let (s, _) = h.github("r", "push", "{}", None).await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn disabled_routes_and_profiles() {
    let routes =
        "        disabled: {enabled: false}\n        bound: {profile: team}\n        plain: {}\n";
    let config = format!("multiplex_profiles: true\n{}", config_with_routes(routes));
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.yaml"), &config).unwrap();
    std::fs::create_dir_all(home.path().join("profiles/team")).unwrap();
    let h = Herald::start_in(home, &[]);
    let (s, b) = h.github("disabled", "push", "{}", None).await;
    assert_eq!(
        (s, b),
        (
            StatusCode::FORBIDDEN,
            json!({"error": "Route disabled: disabled"})
        )
    );
    let sig = vec![("x-hub-signature-256", sign::github(SECRET, b"{}"))];
    let (s, b) = h.post("/p/ghost/webhooks/plain", "{}", &sig).await;
    assert_eq!(
        (s, b),
        (
            StatusCode::NOT_FOUND,
            json!({"error": "Unknown or unconfigured profile"})
        )
    );
    let (s, _) = h.post("/p/default/webhooks/plain", "{}", &sig).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    let (s, b) = h.post("/p/team/webhooks/plain", "{}", &sig).await;
    assert_eq!(
        (s, b),
        (
            StatusCode::NOT_FOUND,
            json!({"error": "Unknown route: plain"})
        )
    );
    let (s, _) = h.post("/p/team/webhooks/bound", "{}", &sig).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    let (s, _) = h.post("/webhooks/bound", "{}", &sig).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let inbox = h.inbox();
    assert_eq!(inbox[0]["profile"], "team");
}

#[tokio::test]
async fn profile_prefix_is_ignored_without_multiplexing() {
    let h = InProcess::start(&config_with_routes("        plain: {}\n"));
    let sig = vec![("x-hub-signature-256", sign::github(SECRET, b"{}"))];
    let (s, _) = h.post("/p/anything/webhooks/plain", "{}", &sig).await;
    assert_eq!(s, StatusCode::ACCEPTED);
}

#[tokio::test]
async fn subscriptions_are_reloaded_and_config_wins() {
    let h = InProcess::start(&config_with_routes(
        "        clash:\n          prompt: from-config\n",
    ));
    let (s, _) = h.github("dyn", "push", "{}", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let subs = json!({
        "dyn": {"secret": "dyn-secret", "prompt": "dynamic {n}", "events": ["push"]},
        "clash": {"prompt": "from-subscription"},
        "broken": {"secret": "INSECURE_NO_AUTH", "deliver_only": true}
    });
    let path = h.home().join("webhook_subscriptions.json");
    std::fs::write(&path, subs.to_string()).unwrap();
    let body = r#"{"n":7}"#;
    let sig = vec![
        (
            "x-hub-signature-256",
            sign::github("dyn-secret", body.as_bytes()),
        ),
        ("x-github-event", "push".into()),
    ];
    let (s, b) = h.post("/webhooks/dyn", body, &sig).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    let (s, _) = h.github("clash", "push", "{}", None).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    let (s, _) = h.post("/webhooks/broken", "{}", &[]).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let prompts: Vec<String> = h
        .inbox()
        .iter()
        .map(|i| i["prompt"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(prompts, vec!["from-config", "dynamic 7"]);
    // Invalid JSON keeps the previous routes.
    std::fs::write(&path, "{not json").unwrap();
    let (s, _) = h.post("/webhooks/dyn", body, &sig).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    // Removing the file drops the dynamic routes.
    std::fs::remove_file(&path).unwrap();
    let (s, _) = h.post("/webhooks/dyn", body, &sig).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

/// A change the home folder's watch cannot see (here: written through a hard link in
/// another folder, as a file system written from another host would be) is still picked
/// up: the file is `stat`ed at least once a second.
#[tokio::test]
async fn a_subscriptions_change_the_watch_cannot_see_is_found_within_a_second() {
    let h = InProcess::start(&config_with_routes("        r:\n          prompt: x\n"));
    let elsewhere = h.home().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let other_name = elsewhere.join("subs.json");
    std::fs::write(&other_name, "{}").unwrap();
    std::fs::hard_link(&other_name, h.home().join("webhook_subscriptions.json")).unwrap();
    let (s, _) = h.github("late", "push", "{}", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    // Rewritten in place through the other name: no event in the home folder.
    std::fs::write(&other_name, json!({"late": {"prompt": "late"}}).to_string()).unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (s, b) = h.github("late", "push", "{}", None).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
}

#[tokio::test]
async fn direct_delivery_without_a_connected_target_is_502_and_not_recorded() {
    let h = InProcess::start(&config_with_routes(
        "        push:\n          deliver_only: true\n          deliver: telegram\n          prompt: hi\n",
    ));
    for _ in 0..2 {
        let (s, b) = h.github("push", "x", "{}", Some("same")).await;
        assert_eq!(
            (s, b),
            (
                StatusCode::BAD_GATEWAY,
                json!({"status": "error", "error": "Delivery failed", "delivery_id": "same"})
            )
        );
    }
    assert!(h.inbox().is_empty());
}

#[tokio::test]
async fn hostile_requests_never_break_herald() {
    let h = InProcess::start(&config_with_routes(
        "        r:\n          secret: INSECURE_NO_AUTH\n          prompt: '{a.b} {__raw__}'\n",
    ));
    let cases: Vec<Vec<u8>> = vec![
        b"{\"a\": {\"b\": \"\\ud800\"}}".to_vec(),
        b"{\"a\": 1e999999}".to_vec(),
        format!("{{\"a\": {}}}", "[".repeat(10_000)).into_bytes(),
        format!("{}{}", "{\"a\":".repeat(200), "}".repeat(200)).into_bytes(),
        b"%%%%&&&===".to_vec(),
        vec![0u8; 1000],
        "{\"a\":{\"b\":\"日本語 ✓ 😀\"}}".as_bytes().to_vec(),
    ];
    for body in cases {
        let (s, _) = h
            .post(
                "/webhooks/r",
                body,
                &[("content-type", "application/octet-stream".into())],
            )
            .await;
        assert!(
            s == StatusCode::ACCEPTED || s == StatusCode::BAD_REQUEST,
            "{s}"
        );
    }
    // Header garbage.
    let resp = raw_request(&h.addr(), b"POST /webhooks/r HTTP/1.1\r\nHost: x\r\nX-Hub-Signature-256: \xff\xfe\r\nX-GitHub-Event: \xc3\x28\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}").await;
    assert!(resp.starts_with("HTTP/1.1 202"), "{resp}");
    let resp = raw_request(&h.addr(), b"GARBAGE\r\n\r\n").await;
    assert!(!resp.contains(" 500 "), "{resp}");
    let (s, _) = h.get("/health").await;
    assert_eq!(s, StatusCode::OK);
    let unicode = h
        .inbox()
        .into_iter()
        .find(|i| i["prompt"].as_str().unwrap().starts_with("日本語"))
        .unwrap();
    assert!(
        unicode["prompt"]
            .as_str()
            .unwrap()
            .contains("\\u65e5\\u672c\\u8a9e \\u2713 \\ud83d\\ude00")
    );
}
