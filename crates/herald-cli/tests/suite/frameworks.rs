//! The API as an agent framework's backend (issue 48): herald's own tool calls as
//! hosted `mcp_call` items, the client's own tools offered and their runs parked and
//! resumed, progress frames only on request, one run per failed call. Raw HTTP here;
//! the real client libraries in `frameworks_clients`.

use super::api::{KEY, api_config, call, get_json, post_json};
use super::support::*;
use herald_test_support::{FakeProvider, Scripted};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const WEATHER: &str = r#"{"type": "function", "function": {"name": "get_weather", "description": "The weather of a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}"#;

fn weather_tool() -> Value {
    serde_json::from_str(WEATHER).unwrap()
}

/// The same tool in the Responses API's shape.
fn weather_function() -> Value {
    let t = weather_tool();
    let mut f = t["function"].clone();
    f["type"] = json!("function");
    f
}

/// A file in the home the model reads with herald's own `read_file`.
fn note(h: &Herald) -> String {
    let path = h.home().join("note.txt");
    std::fs::write(&path, "hello from the note\n").unwrap();
    path.display().to_string()
}

fn read_call(path: &str) -> String {
    json!({ "path": path }).to_string()
}

/// The `data:` frames of an SSE body (without `[DONE]`) and whether it ended with it.
fn data_frames(text: &str) -> (Vec<Value>, bool) {
    let frames: Vec<&str> = text.split("\n\n").filter(|f| !f.is_empty()).collect();
    let data = frames
        .iter()
        .filter_map(|f| f.lines().find_map(|l| l.strip_prefix("data: ")))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    (data, frames.last() == Some(&"data: [DONE]"))
}

#[tokio::test]
async fn herald_tools_come_back_as_mcp_call_items_that_replay_as_input() {
    let provider = FakeProvider::start(vec![]);
    let h = Herald::start(&api_config(&provider.base_url, ""));
    let path = note(&h);
    provider.push(Scripted::tool_calls(&[(
        "r1",
        "read_file",
        &read_call(&path),
    )]));
    provider.push(Scripted::text("The file says hello."));
    let (s, first) = post_json(
        &h,
        "/v1/responses",
        json!({"input": "read the file", "store": false}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{first}");
    let out = first["output"].as_array().unwrap();
    assert_eq!(out.len(), 2, "{first}");
    let mcp = &out[0];
    assert_eq!(
        (
            mcp["type"].as_str(),
            mcp["id"].as_str(),
            mcp["server_label"].as_str(),
            mcp["name"].as_str(),
            mcp["status"].as_str(),
        ),
        (
            Some("mcp_call"),
            Some(format!("mcp_{}_0", &first["id"].as_str().unwrap()[5..]).as_str()),
            Some("herald"),
            Some("read_file"),
            Some("completed")
        ),
        "{mcp}"
    );
    assert!(
        mcp["output"]
            .as_str()
            .unwrap()
            .contains("hello from the note")
    );
    assert!(mcp["error"].is_null());
    assert_eq!(
        serde_json::from_str::<Value>(mcp["arguments"].as_str().unwrap()).unwrap()["path"],
        path.as_str()
    );
    assert_eq!(out[1]["type"], "message");
    assert_eq!(out[1]["content"][0]["text"], "The file says hello.");

    // A framework replays the output items as the next input (store: false): every
    // item herald emits is taken, and the model sees the tool call and its result.
    provider.push(Scripted::text("You're welcome."));
    let mut input = vec![json!({"role": "user", "content": "read the file"})];
    input.extend(out.iter().cloned());
    input.push(
        json!({"type": "mcp_list_tools", "id": "mcpl_1", "server_label": "herald", "tools": []}),
    );
    input.push(json!({"role": "user", "content": "thanks"}));
    let (s, second) = post_json(&h, "/v1/responses", json!({"input": input, "store": false})).await;
    assert_eq!(s, StatusCode::OK, "{second}");
    assert_eq!(second["output"][0]["content"][0]["text"], "You're welcome.");
    let sent_text = provider.requests().last().unwrap().body["messages"].to_string();
    assert!(
        sent_text.contains("hello from the note")
            && sent_text.contains(mcp["id"].as_str().unwrap()),
        "the replayed call and result reach the model: {sent_text}"
    );
    let unknown = json!({"input": [{"type": "web_search_call", "id": "w"}, {"role": "user", "content": "x"}]});
    let (s, b) = post_json(&h, "/v1/responses", unknown).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");

    // Streamed: the mcp_call item's events, in OpenAI's names and order.
    provider.push(Scripted::tool_calls(&[(
        "r2",
        "read_file",
        &read_call(&path),
    )]));
    provider.push(Scripted::text("Read it again."));
    let r = call(
        &h,
        "POST",
        "/v1/responses",
        Some(json!({"input": "again", "stream": true})),
        &[],
    )
    .await;
    let (events, _) = data_frames(&r.text().await.unwrap());
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    let at = |k: &str| kinds.iter().position(|x| *x == k).unwrap_or(usize::MAX);
    for k in [
        "response.mcp_call.in_progress",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.completed",
    ] {
        assert!(at(k) != usize::MAX, "{k} missing: {kinds:?}");
    }
    assert!(at("response.mcp_call.in_progress") < at("response.mcp_call.completed"));
    assert_eq!(kinds.last(), Some(&"response.completed"), "{kinds:?}");
    assert!(
        !kinds.iter().any(|k| k.contains("function_call")),
        "{kinds:?}"
    );
    let done = events.last().unwrap();
    assert_eq!(done["response"]["output"][0]["type"], "mcp_call");
    assert_eq!(
        done["response"]["output"][1]["content"][0]["text"],
        "Read it again."
    );
    let seq: Vec<u64> = events
        .iter()
        .map(|e| e["sequence_number"].as_u64().unwrap())
        .collect();
    assert!(seq.windows(2).all(|w| w[1] == w[0] + 1), "{seq:?}");

    // In chat completions herald's calls never appear as tool_calls.
    provider.push(Scripted::tool_calls(&[(
        "r3",
        "read_file",
        &read_call(&path),
    )]));
    provider.push(Scripted::text("Done."));
    let (s, b) = post_json(
        &h,
        "/v1/chat/completions",
        json!({"messages": [{"role": "user", "content": "read"}]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        b["choices"][0]["message"].get("tool_calls").is_none(),
        "{b}"
    );
    assert_eq!(b["choices"][0]["finish_reason"], "stop");
}

#[tokio::test]
async fn progress_frames_only_on_request() {
    let provider = FakeProvider::start(vec![]);
    let h = Herald::start(&api_config(&provider.base_url, ""));
    let path = note(&h);
    let body = json!({"stream": true, "messages": [{"role": "user", "content": "read"}]});
    for asked in [false, true] {
        provider.push(Scripted::tool_calls(&[(
            "p1",
            "read_file",
            &read_call(&path),
        )]));
        provider.push(Scripted::text("Read."));
        let headers: &[(&str, &str)] = if asked {
            &[("X-Hermes-Tool-Progress", "1")]
        } else {
            &[]
        };
        let text = call(
            &h,
            "POST",
            "/v1/chat/completions",
            Some(body.clone()),
            headers,
        )
        .await
        .text()
        .await
        .unwrap();
        let progress = text.matches("event: hermes.tool.progress").count();
        assert_eq!(progress, if asked { 2 } else { 0 }, "{text}");
        let (data, done) = data_frames(&text);
        assert!(done, "{text}");
        if !asked {
            assert!(
                data.iter().all(|d| d["choices"].is_array()),
                "every frame is a chunk with choices: {text}"
            );
        }
    }
    let (_, caps) = get_json(&h, "/v1/capabilities").await;
    assert_eq!(
        caps["features"]["tool_progress_request_header"],
        "X-Hermes-Tool-Progress: 1"
    );
    assert_eq!(caps["runtime"]["tool_execution"], "mixed", "{caps}");
}

#[tokio::test]
async fn a_client_tool_call_parks_the_run_and_its_result_resumes_it() {
    let provider = FakeProvider::start(vec![]);
    let config = api_config(&provider.base_url, "").replace(
        "agent:\n",
        "gateway:\n  api_server:\n    max_concurrent_runs: 1\nagent:\n",
    );
    let h = Herald::start(&config);
    let path = note(&h);
    // One answer calls herald's tool and the client's: herald runs its own first.
    provider.push(Scripted::tool_calls(&[
        ("s1", "read_file", &read_call(&path)),
        ("c1", "get_weather", r#"{"city": "Paris"}"#),
    ]));
    let mut messages = vec![json!({"role": "user", "content": "weather in Paris?"})];
    let r = call(
        &h,
        "POST",
        "/v1/chat/completions",
        Some(json!({"messages": messages, "tools": [weather_tool()]})),
        &[],
    )
    .await;
    let run_id = r.headers()["x-herald-run-id"].to_str().unwrap().to_owned();
    let b: Value = r.json().await.unwrap();
    let choice = &b["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{b}");
    let calls = choice["message"]["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "only the client's call: {b}");
    let c1 = calls[0]["id"].as_str().unwrap().to_owned();
    assert!(
        c1.starts_with("c1_") && c1.len() > 6,
        "an id of its own: {c1}"
    );
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    assert_eq!(
        serde_json::from_str::<Value>(calls[0]["function"]["arguments"].as_str().unwrap()).unwrap(),
        json!({"city": "Paris"})
    );
    // The client's tool is offered beside herald's.
    let offered = provider.requests()[0].body["tools"].to_string();
    assert!(offered.contains("get_weather") && offered.contains("read_file"));
    // Parked: listed as a live run, holding no permit (the cap is 1).
    let (_, st) = get_json(&h, &format!("/v1/runs/{run_id}")).await;
    assert_eq!(st["status"], "running", "{st}");
    provider.push(Scripted::text("meanwhile"));
    let (s, other) = post_json(
        &h,
        "/v1/chat/completions",
        json!({"messages": [{"role": "user", "content": "something else"}]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "a parked run holds no permit: {other}");

    // Unknown ids and a wrong half answer 400.
    let stale = json!({"messages": [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "nope", "content": "1"}]});
    let (s, b) = post_json(&h, "/v1/chat/completions", stale).await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("unknown_tool_call"))
    );

    // The client runs its tool and sends the whole list back: the run resumes.
    provider.push(Scripted::text("It is sunny in Paris."));
    messages.push(choice["message"].clone());
    messages.push(json!({"role": "tool", "tool_call_id": c1, "content": "sunny in Paris"}));
    let r = call(
        &h,
        "POST",
        "/v1/chat/completions",
        Some(json!({"messages": messages, "tools": [weather_tool()]})),
        &[],
    )
    .await;
    assert_eq!(
        r.headers()["x-herald-run-id"],
        run_id.as_str(),
        "the same run"
    );
    let b: Value = r.json().await.unwrap();
    assert_eq!(
        b["choices"][0]["message"]["content"], "It is sunny in Paris.",
        "{b}"
    );
    assert_eq!(b["choices"][0]["finish_reason"], "stop");
    let requests = provider.requests();
    let last = requests.last().unwrap().body["messages"].to_string();
    assert!(
        last.contains("sunny in Paris") && last.contains("hello from the note"),
        "{last}"
    );
    assert_eq!(
        requests.len(),
        3,
        "the tool step, the other request, the answer: no retries"
    );
    let (_, st) = get_json(&h, &format!("/v1/runs/{run_id}")).await;
    assert_eq!(st["status"], "completed");
    // Answered once: the same ids again are stale.
    let (s, _) = post_json(&h, "/v1/chat/completions", json!({"messages": messages})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);

    // A name of herald's own tools is refused.
    let clash = json!({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "read_file"}}]});
    let (s, b) = post_json(&h, "/v1/chat/completions", clash).await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("tool_name_conflict"))
    );
}

#[tokio::test]
async fn responses_park_for_function_calls_and_resume_by_chain_or_replay() {
    let provider = FakeProvider::start(vec![]);
    let h = Herald::start(&api_config(&provider.base_url, ""));
    for by_chain in [true, false] {
        provider.push(Scripted::tool_calls(&[(
            "w1",
            "get_weather",
            r#"{"city": "Oslo"}"#,
        )]));
        provider.push(Scripted::text("Snow in Oslo."));
        let first_body =
            json!({"input": "weather in Oslo?", "tools": [weather_function()], "store": by_chain});
        let (s, first) = post_json(&h, "/v1/responses", first_body).await;
        assert_eq!(s, StatusCode::OK, "{first}");
        assert_eq!(first["status"], "completed");
        let out = first["output"].as_array().unwrap();
        let fc = out.iter().find(|i| i["type"] == "function_call").unwrap();
        let w1 = fc["call_id"].as_str().unwrap().to_owned();
        assert!(w1.starts_with("w1_"), "{first}");
        assert_eq!(fc["name"], "get_weather");
        let result = json!({"type": "function_call_output", "call_id": w1, "output": "snow"});
        let next = if by_chain {
            json!({"previous_response_id": first["id"], "input": [result], "tools": [weather_function()]})
        } else {
            let mut input = vec![json!({"role": "user", "content": "weather in Oslo?"})];
            input.extend(out.iter().cloned());
            input.push(result);
            json!({"input": input, "store": false, "tools": [weather_function()]})
        };
        let (s, second) = post_json(&h, "/v1/responses", next).await;
        assert_eq!(s, StatusCode::OK, "{second}");
        let text =
            second["output"].as_array().unwrap().last().unwrap()["content"][0]["text"].clone();
        assert_eq!(text, "Snow in Oslo.", "{second}");
        let sent = provider.requests().last().unwrap().body["messages"].to_string();
        assert!(sent.contains("snow"), "{sent}");
        if by_chain {
            // Earlier items by reference, as clients that keep responses send them.
            provider.push(Scripted::text("Yes, snow."));
            let msg = second["output"].as_array().unwrap().last().unwrap()["id"].clone();
            let refs = json!({"input": [{"role": "user", "content": "weather in Oslo?"}, {"type": "item_reference", "id": fc["id"]},
                {"type": "function_call_output", "call_id": w1, "output": "snow"}, {"type": "item_reference", "id": msg},
                {"role": "user", "content": "sure?"}], "store": false});
            let (s, b) = post_json(&h, "/v1/responses", refs).await;
            assert_eq!(s, StatusCode::OK, "{b}");
            let sent = provider.requests().last().unwrap().body["messages"].to_string();
            assert!(
                sent.contains("Snow in Oslo.") && sent.contains("get_weather"),
                "{sent}"
            );
            let bad = json!({"input": [{"type": "item_reference", "id": "msg_nothere_0"}, {"role": "user", "content": "x"}]});
            let (s, b) = post_json(&h, "/v1/responses", bad).await;
            assert_eq!(
                (s, b["error"]["code"].as_str()),
                (StatusCode::BAD_REQUEST, Some("item_not_found"))
            );
            // The finished chain goes on as usual.
            provider.push(Scripted::text("Bring a coat."));
            let (s, third) = post_json(
                &h,
                "/v1/responses",
                json!({"previous_response_id": second["id"], "input": "what to wear?"}),
            )
            .await;
            assert_eq!(s, StatusCode::OK, "{third}");
            let sent = provider.requests().last().unwrap().body["messages"].to_string();
            assert!(
                sent.contains("Snow in Oslo.") && sent.contains("snow"),
                "{sent}"
            );
        }
    }
    let stale =
        json!({"input": [{"type": "function_call_output", "call_id": "w1", "output": "again"}]});
    let (s, b) = post_json(&h, "/v1/responses", stale).await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("unknown_tool_call"))
    );
}

#[tokio::test]
async fn a_parked_run_streams_its_calls_times_out_and_stops_like_any_run() {
    let provider = FakeProvider::start(vec![]);
    let config = api_config(&provider.base_url, "").replace(
        "      key:",
        "      client_tool_timeout_seconds: 1\n      key:",
    );
    let h = Herald::start(&config);
    provider.push(Scripted::tool_calls(&[(
        "t1",
        "get_weather",
        r#"{"city": "Rome"}"#,
    )]));
    let r = call(
        &h,
        "POST",
        "/v1/chat/completions",
        Some(json!({"stream": true, "tools": [weather_tool()], "messages": [{"role": "user", "content": "Rome?"}]})),
        &[],
    )
    .await;
    let run_id = r.headers()["x-herald-run-id"].to_str().unwrap().to_owned();
    let (data, done) = data_frames(&r.text().await.unwrap());
    assert!(done);
    let calls: Vec<&Value> = data
        .iter()
        .filter_map(|d| d["choices"][0]["delta"]["tool_calls"].as_array())
        .flatten()
        .collect();
    assert_eq!(calls.len(), 1, "{data:?}");
    assert_eq!(
        (
            calls[0]["index"].as_u64(),
            calls[0]["function"]["name"].as_str()
        ),
        (Some(0), Some("get_weather"))
    );
    let t1 = calls[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        data.last().unwrap()["choices"][0]["finish_reason"],
        "tool_calls"
    );
    // Nobody answers: after the timeout the run ends cancelled, and the ids are stale.
    let started = Instant::now();
    let status = loop {
        let (_, st) = get_json(&h, &format!("/v1/runs/{run_id}")).await;
        if st["status"] != "running" || started.elapsed() > Duration::from_secs(10) {
            break st["status"].clone();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(status, "cancelled");
    let late = json!({"messages": [{"role": "user", "content": "Rome?"}, {"role": "tool", "tool_call_id": t1, "content": "rain"}]});
    let (s, _) = post_json(&h, "/v1/chat/completions", late).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);

    // A parked run is stopped like any run.
    provider.push(Scripted::tool_calls(&[(
        "t2",
        "get_weather",
        r#"{"city": "Bern"}"#,
    )]));
    let r = call(
        &h,
        "POST",
        "/v1/chat/completions",
        Some(
            json!({"tools": [weather_tool()], "messages": [{"role": "user", "content": "Bern?"}]}),
        ),
        &[],
    )
    .await;
    let run_id = r.headers()["x-herald-run-id"].to_str().unwrap().to_owned();
    let (s, _) = post_json(&h, &format!("/v1/runs/{run_id}/stop"), json!({})).await;
    assert_eq!(s, StatusCode::OK);
    let started = Instant::now();
    loop {
        let (_, st) = get_json(&h, &format!("/v1/runs/{run_id}")).await;
        if st["status"] == "cancelled" {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "{st}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_refused_provider_call_is_one_run_answered_so_that_clients_do_not_retry() {
    let provider = FakeProvider::start(vec![Scripted::Status(
        401,
        r#"{"error": {"message": "bad key", "type": "invalid_request_error"}}"#.into(),
    )]);
    let h = Herald::start(&api_config(&provider.base_url, ""));
    let r = call(
        &h,
        "POST",
        "/v1/chat/completions",
        Some(json!({"messages": [{"role": "user", "content": "hi"}]})),
        &[],
    )
    .await;
    assert_eq!(r.status(), StatusCode::FAILED_DEPENDENCY);
    assert_eq!(r.headers()["x-should-retry"], "false");
    let b: Value = r.json().await.unwrap();
    assert_eq!(b["error"]["code"], "agent_incomplete", "{b}");
    assert_eq!(b["error"]["type"], "server_error");
    assert_eq!(b["error"]["hermes"]["retryable"], false);
    assert_eq!(provider.requests().len(), 1);
    let log = h.log();
    assert!(
        log.contains("the run failed"),
        "the failure is logged with its cause: {log}"
    );
    let _ = KEY;
}

#[tokio::test]
async fn runs_waiting_on_the_same_provider_call_id_get_ids_of_their_own() {
    let provider = FakeProvider::start(vec![]);
    let h = Herald::start(&api_config(&provider.base_url, ""));
    let ask = |city: &str| json!([{"role": "user", "content": format!("weather in {city}?")}]);
    let mut parked = Vec::new();
    for city in ["Lima", "Quito"] {
        let args = json!({ "city": city }).to_string();
        provider.push(Scripted::tool_calls(&[("call_0", "get_weather", &args)]));
        let (s, b) = post_json(
            &h,
            "/v1/chat/completions",
            json!({"messages": ask(city), "tools": [weather_tool()]}),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{b}");
        parked.push((city, b["choices"][0]["message"].clone()));
    }
    for (city, assistant) in parked.into_iter().rev() {
        provider.push(Scripted::text(&format!("Fine in {city}.")));
        let mut messages = ask(city).as_array().unwrap().clone();
        let id = assistant["tool_calls"][0]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(id.starts_with("call_0_"), "{assistant}");
        messages.push(assistant);
        messages.push(
            json!({"role": "tool", "tool_call_id": id, "content": format!("fine in {city}")}),
        );
        let (s, b) = post_json(&h, "/v1/chat/completions", json!({"messages": messages})).await;
        assert_eq!(s, StatusCode::OK, "{b}");
        assert_eq!(
            b["choices"][0]["message"]["content"],
            format!("Fine in {city}.")
        );
        let sent = provider.requests().last().unwrap().body["messages"].to_string();
        assert!(sent.contains(&format!("weather in {city}?")), "{sent}");
    }
}

#[tokio::test]
async fn hermes_sessions_api_lists_creates_forks_and_chats() {
    let provider = FakeProvider::start(vec![]);
    let h = Herald::start(&api_config(&provider.base_url, ""));
    let (s, b) = post_json(
        &h,
        "/api/sessions",
        json!({"id": "s-one", "title": "First", "system_prompt": "Be terse."}),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    assert_eq!(
        (
            b["object"].as_str(),
            b["session"]["id"].as_str(),
            b["session"]["title"].as_str()
        ),
        (Some("hermes.session"), Some("s-one"), Some("First"))
    );
    assert_eq!(b["session"]["has_system_prompt"], true);
    assert!(
        b["session"].get("system_prompt").is_none(),
        "never shown: {b}"
    );
    let (s, b) = post_json(&h, "/api/sessions", json!({"id": "s-one"})).await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("session_exists"))
    );
    let (s, b) = post_json(&h, "/api/sessions", json!({"id": "../etc"})).await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_session_id"))
    );

    // A turn in it, whole.
    provider.push(Scripted::text("Hi from the session."));
    let (s, b) = post_json(&h, "/api/sessions/s-one/chat", json!({"message": "hello"})).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["object"], "hermes.session.chat.completion");
    assert_eq!(
        b["message"],
        json!({"role": "assistant", "content": "Hi from the session."})
    );
    let (s, b) = post_json(&h, "/api/sessions/s-one/chat", json!({})).await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("missing_message"))
    );
    // And streamed, in Hermes's session events.
    provider.push(Scripted::text("Streamed in the session."));
    let text = call(
        &h,
        "POST",
        "/api/sessions/s-one/chat/stream",
        Some(json!({"message": "again"})),
        &[],
    )
    .await
    .text()
    .await
    .unwrap();
    let names: Vec<&str> = text
        .split("\n\n")
        .filter_map(|f| f.strip_prefix("event: "))
        .map(|f| f.lines().next().unwrap())
        .collect();
    assert_eq!(names.first(), Some(&"run.started"), "{text}");
    assert!(
        names.contains(&"assistant.delta") && names.contains(&"assistant.completed"),
        "{names:?}"
    );
    assert_eq!(
        &names[names.len() - 2..],
        ["run.completed", "done"],
        "{text}"
    );
    let sent = provider.requests().last().unwrap().body["messages"].to_string();
    assert!(
        sent.contains("Hi from the session.") && sent.contains("Be terse."),
        "the session's history and prompt: {sent}"
    );

    let (s, b) = get_json(&h, "/api/sessions/s-one/messages").await;
    assert_eq!(s, StatusCode::OK);
    let roles: Vec<&str> = b["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"], "{b}");

    let (s, b) = call(
        &h,
        "PATCH",
        "/api/sessions/s-one",
        Some(json!({"title": "Renamed"})),
        &[],
    )
    .await
    .json::<Value>()
    .await
    .map(|b| (StatusCode::OK, b))
    .unwrap();
    assert_eq!(
        (s, b["session"]["title"].as_str()),
        (StatusCode::OK, Some("Renamed")),
        "{b}"
    );
    let r = call(
        &h,
        "PATCH",
        "/api/sessions/s-one",
        Some(json!({"model": "x"})),
        &[],
    )
    .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);

    let (s, b) = post_json(&h, "/api/sessions/s-one/fork", json!({"id": "s-two"})).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    assert_eq!(b["session"]["parent_session_id"], "s-one");
    let (_, b) = get_json(&h, "/api/sessions/s-two/messages").await;
    assert_eq!(
        b["data"].as_array().unwrap().len(),
        4,
        "the transcript carried: {b}"
    );

    let (_, b) = get_json(&h, "/api/sessions?limit=1").await;
    assert_eq!(
        (b["data"].as_array().unwrap().len(), b["has_more"].as_bool()),
        (1, Some(true)),
        "{b}"
    );
    let (_, b) = get_json(&h, "/api/sessions?source=api_server").await;
    let ids: Vec<&str> = b["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"s-one") && ids.contains(&"s-two"), "{b}");

    let r = call(&h, "DELETE", "/api/sessions/s-two", None, &[]).await;
    assert_eq!(r.json::<Value>().await.unwrap()["deleted"], true);
    let (s, b) = get_json(&h, "/api/sessions/s-two").await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("session_not_found"))
    );
}

#[tokio::test]
async fn health_discovery_and_the_model_field_as_hermes_has_them() {
    let provider = FakeProvider::start(vec![]);
    let h = Herald::start(&api_config(
        &provider.base_url,
        "      model_routes:\n        fast: {model: fake-large}\n",
    ));
    let r = call(&h, "GET", "/health", None, &[]).await;
    let b: Value = r.json().await.unwrap();
    assert_eq!(b["version"], "0.19.0");
    assert_eq!(b["herald_version"], env!("CARGO_PKG_VERSION"));
    let (_, caps) = get_json(&h, "/v1/capabilities").await;
    for f in [
        "session_resources",
        "session_chat",
        "session_chat_streaming",
        "session_fork",
        "skills_api",
    ] {
        assert_eq!(caps["features"][f], true, "{f}");
    }
    assert_eq!(
        caps["endpoints"]["session_fork"]["path"],
        "/api/sessions/{session_id}/fork"
    );
    std::fs::create_dir_all(h.home().join("skills/devops/deploy")).unwrap();
    std::fs::write(
        h.home().join("skills/devops/deploy/SKILL.md"),
        "---\nname: deploy\ndescription: Ship it.\n---\nSteps.\n",
    )
    .unwrap();
    let (s, b) = get_json(&h, "/v1/skills").await;
    assert_eq!(s, StatusCode::OK);
    let deploy = b["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "deploy")
        .cloned();
    assert_eq!(
        deploy,
        Some(json!({"name": "deploy", "description": "Ship it.", "category": "devops"})),
        "{b}"
    );
    let (_, b) = get_json(&h, "/v1/toolsets").await;
    let file = b["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "file")
        .unwrap()
        .clone();
    assert_eq!(file["enabled"], true, "{b}");
    assert!(
        file["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("read_file"))
    );

    // The model field: listed ids and aliases, provider models, else 400.
    let chat =
        |model: &str| json!({"model": model, "messages": [{"role": "user", "content": "hi"}]});
    for (model, sent) in [
        ("hermes-agent", "fake-model"),
        ("fast", "fake-large"),
        ("fake-large", "fake-large"),
        ("auto:fake-large", "fake-large"),
    ] {
        provider.push(Scripted::text("ok"));
        let (s, b) = post_json(&h, "/v1/chat/completions", chat(model)).await;
        assert_eq!(s, StatusCode::OK, "{model}: {b}");
        assert_eq!(b["model"], model, "echoed");
        assert_eq!(
            provider.requests().last().unwrap().body["model"],
            sent,
            "{model}"
        );
    }
    for unknown in ["qwen3:4b", "fake-model:latest", "HERMES-AGENT", "auto:nope"] {
        let (s, b) = post_json(&h, "/v1/chat/completions", chat(unknown)).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{unknown}: {b}");
    }
    let (s, b) = post_json(&h, "/v1/chat/completions", chat("gpt-9-imaginary")).await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("model_not_found")),
        "{b}"
    );
    let (s, _) = post_json(&h, "/v1/responses", json!({"model": "nope", "input": "hi"})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);

    // reasoning.available on the runs API's events: {event, run_id, timestamp, text}.
    provider.push(Scripted::Events(vec![
        json!({"choices": [{"index": 0, "delta": {"reasoning_content": "Thinking it over."}}]}),
        json!({"choices": [{"index": 0, "delta": {"content": "Done."}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    ]));
    let (_, b) = post_json(&h, "/v1/runs", json!({"input": "think"})).await;
    let run_id = b["run_id"].as_str().unwrap().to_owned();
    let (events, text) = super::api::run_events(&h, &run_id).await;
    let reasoning = events
        .iter()
        .find(|e| e["event"] == "reasoning.available")
        .expect(&text);
    assert_eq!(reasoning["text"], "Thinking it over.");
    assert_eq!(reasoning["run_id"], run_id.as_str());
    assert!(reasoning["timestamp"].is_number());
    // A finished run's stop answers its status object.
    let (s, b) = post_json(&h, &format!("/v1/runs/{run_id}/stop"), json!({})).await;
    assert_eq!(
        (s, b["status"].as_str(), b["object"].as_str()),
        (StatusCode::OK, Some("completed"), Some("hermes.run"))
    );
}

#[tokio::test]
async fn parked_runs_are_bounded_and_answered_only_as_they_asked() {
    let provider = FakeProvider::start(vec![]);
    let config = api_config(&provider.base_url, "")
        .replace("      key:", "      max_parked_runs: 1\n      key:");
    let h = Herald::start(&config);
    provider.push(Scripted::tool_calls(&[(
        "k1",
        "get_weather",
        r#"{"city": "Oslo"}"#,
    )]));
    let (s, first) = post_json(
        &h,
        "/v1/responses",
        json!({"input": "Oslo?", "tools": [weather_function()]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{first}");
    let fc = first["output"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "function_call")
        .unwrap()
        .clone();
    let id = fc["call_id"].as_str().unwrap().to_owned();
    // The lot is full: another request with tools of its own waits its turn.
    let (s, b) = post_json(
        &h,
        "/v1/chat/completions",
        json!({"messages": [{"role": "user", "content": "x"}], "tools": [weather_tool()]}),
    )
    .await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (StatusCode::TOO_MANY_REQUESTS, Some("rate_limit_exceeded")),
        "{b}"
    );
    // A chat request cannot answer a Responses run, nor can the same result come twice.
    let chat = json!({"messages": [{"role": "user", "content": "Oslo?"}, {"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": id, "content": "snow"}]});
    let (s, b) = post_json(&h, "/v1/chat/completions", chat).await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("unknown_tool_call")),
        "{b}"
    );
    let twice = json!({"input": [{"type": "function_call_output", "call_id": id, "output": "a"}, {"type": "function_call_output", "call_id": id, "output": "b"}]});
    let (s, b) = post_json(&h, "/v1/responses", twice).await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("duplicate_tool_result")),
        "{b}"
    );
    // A reference named twice is refused, as OpenAI refuses it.
    let refs = json!({"input": [{"type": "item_reference", "id": fc["id"]}, {"type": "item_reference", "id": fc["id"]}, {"role": "user", "content": "x"}]});
    let (s, b) = post_json(&h, "/v1/responses", refs).await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("duplicate_item")),
        "{b}"
    );
    // Still parked and answerable once.
    provider.push(Scripted::text("Snow."));
    let ok = json!({"input": [{"type": "function_call_output", "call_id": id, "output": "snow"}]});
    let (s, b) = post_json(&h, "/v1/responses", ok).await;
    assert_eq!(s, StatusCode::OK, "{b}");

    // A later chat turn keeps the client's earlier tool round in its history.
    provider.push(Scripted::text("Noted the weather."));
    let later = json!({"messages": [
        {"role": "user", "content": "Lima?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "old_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Lima\"}"}}]},
        {"role": "tool", "tool_call_id": "old_1", "content": "warm in Lima"},
        {"role": "assistant", "content": "Warm."},
        {"role": "user", "content": "and tomorrow?"}]});
    let (s, b) = post_json(&h, "/v1/chat/completions", later).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let text = provider.requests().last().unwrap().body["messages"].to_string();
    assert!(
        text.contains("warm in Lima") && text.contains("old_1"),
        "{text}"
    );
}
