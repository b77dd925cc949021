//! The embedded model's routes against callers who try to exhaust the server: memory-hungry
//! requests, oversized stop lists, callers over their token rate, streams left open, and more
//! requests than the engine admits. Each is refused with an OpenAI-shaped error while everyone
//! else is served.

use lachesis::inference::limits::InferenceLimits;
use lachesis_tests::{TestApp, config_for, fresh_database, model_path};
use serde_json::{Value, json};

async fn app_with(limits: impl FnOnce(&mut InferenceLimits)) -> TestApp {
    let mut config = config_for(&fresh_database().await);
    config.model = Some(model_path());
    limits(&mut config.inference_limits);
    TestApp::spawn_with(config).await
}

struct Answer {
    status: u16,
    retry_after: Option<u64>,
    body: Value,
}

impl Answer {
    fn message(&self) -> &str {
        self.body["error"]["message"].as_str().unwrap_or_default()
    }

    fn error_type(&self) -> &str {
        self.body["error"]["type"].as_str().unwrap_or_default()
    }
}

async fn call(app: &TestApp, path: &str, body: &Value, headers: &[(&str, &str)]) -> Answer {
    let mut request = app.client.post(app.url(path)).json(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("the server answers");
    let status = response.status().as_u16();
    let retry_after = response.headers().get("retry-after").map(|v| {
        v.to_str()
            .unwrap()
            .parse()
            .expect("Retry-After is whole seconds")
    });
    let body = response.json().await.expect("a JSON body");
    Answer {
        status,
        retry_after,
        body,
    }
}

/// The same request in each generation route's shape: token ids for the two that take them,
/// and for chat a message of half as many words (a word is one or two tokens, so the templated
/// prompt stays inside the context).
fn on_every_route(prompt_ids: &[u32], fields: Value) -> Vec<(&'static str, Value)> {
    let with = |mut body: Value| {
        body.as_object_mut()
            .unwrap()
            .extend(fields.as_object().unwrap().clone());
        body
    };
    let words = " hello".repeat(prompt_ids.len() / 2);
    vec![
        ("/v1/completions", with(json!({"prompt": prompt_ids}))),
        (
            "/generate",
            with(json!({"prompt": {"prompt_token_ids": prompt_ids}})),
        ),
        (
            "/v1/chat/completions",
            with(json!({"messages": [{"role": "user", "content": words}]})),
        ),
    ]
}

fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))
        .expect("VmRSS in /proc/self/status");
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap();
    kib * 1024
}

async fn hello(app: &TestApp, headers: &[(&str, &str)]) -> Answer {
    call(
        app,
        "/generate",
        &json!({"prompt": {"prompt_token_ids": [1, 2, 3, 4]}, "max_tokens": 8, "temperature": 0}),
        headers,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_answers_near_the_context_are_refused_before_memory_is_spent() {
    let app = app_with(|_| {}).await;
    let context = app.get("/v1/models").await["data"][0]["max_model_len"]
        .as_u64()
        .unwrap() as usize;
    // 64 answers of a near-full context would copy the KV cache 64 times: tens of GB.
    let prompt: Vec<u32> = vec![28; context - 300];
    let requests = on_every_route(&prompt, json!({"n": 64, "max_tokens": 200}));
    let before = resident_bytes();
    for round in 0..20 {
        let (path, body) = &requests[round % requests.len()];
        let answer = call(&app, path, body, &[]).await;
        assert_eq!(answer.status, 400, "{path}: {}", answer.body);
        assert_eq!(answer.error_type(), "invalid_request_error");
        for named in ["KV cache", "n (64)", "--inference-kv-budget-mib", "lower n"] {
            assert!(answer.message().contains(named), "{path}: {}", answer.body);
        }
    }
    let grown = resident_bytes().saturating_sub(before);
    assert!(
        grown < 200 * 1024 * 1024,
        "resident memory grew by {} MiB",
        grown / (1024 * 1024)
    );
    assert_eq!(
        hello(&app, &[]).await.status,
        200,
        "the engine still serves"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_lists_and_n_beyond_the_limits_are_refused() {
    let app = app_with(|limits| limits.max_n = 4).await;
    let prompt = [1, 2, 3, 4];
    let five_stops = json!({"stop": ["a", "b", "c", "d", "e"], "max_tokens": 4});
    let long_stop = json!({"stop": ["x".repeat(300)], "max_tokens": 4});
    let five_answers = json!({"n": 5, "max_tokens": 4});
    let refusals = [
        (five_stops, "--inference-max-stop"),
        (long_stop, "300 bytes"),
        (five_answers, "--inference-max-n"),
    ];
    for (fields, named) in refusals {
        for (path, body) in on_every_route(&prompt, fields.clone()) {
            let answer = call(&app, path, &body, &[]).await;
            assert_eq!(answer.status, 400, "{path} {fields}: {}", answer.body);
            assert_eq!(answer.error_type(), "invalid_request_error");
            assert!(answer.message().contains(named), "{path}: {}", answer.body);
        }
    }
    // OpenAI's four stop strings and the server's four answers are fine.
    let allowed = json!({"stop": ["a", "b", "c", "d"], "n": 4, "max_tokens": 4});
    for (path, body) in on_every_route(&prompt, allowed) {
        let answer = call(&app, path, &body, &[]).await;
        assert_eq!(answer.status, 200, "{path}: {}", answer.body);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_over_its_token_rate_waits_while_others_are_served() {
    // 40 tokens at once, then one a minute: a few 12-token requests, then nothing for a while.
    let app = app_with(|limits| {
        limits.tokens_per_minute = 1;
        limits.burst_tokens = 40;
    })
    .await;
    let mut limited = None;
    for _ in 0..10 {
        let answer = hello(&app, &[]).await;
        match answer.status {
            200 => continue,
            429 => {
                limited = Some(answer);
                break;
            }
            other => panic!("unexpected {other}: {}", answer.body),
        }
    }
    let limited = limited.expect("the caller is limited within ten requests");
    assert_eq!(limited.error_type(), "rate_limit_exceeded");
    assert!(
        limited.message().contains("--inference-tokens-per-minute"),
        "{}",
        limited.body
    );
    assert!(
        limited.retry_after.is_some_and(|secs| secs >= 1),
        "429 without Retry-After: {}",
        limited.body
    );

    // Other callers, by token and by session, have their own balances.
    let other_token = hello(&app, &[("authorization", "Bearer another-caller")]).await;
    assert_eq!(other_token.status, 200, "{}", other_token.body);
    let cookie = format!("{}=someone-else", lachesis::auth::SESSION_COOKIE);
    let other_session = hello(&app, &[("cookie", &cookie)]).await;
    assert_eq!(other_session.status, 200, "{}", other_session.body);
    assert_eq!(
        hello(&app, &[]).await.status,
        429,
        "the first caller still waits"
    );

    // A request bigger than the whole burst can never pass: it is refused as too large.
    let too_big = call(
        &app,
        "/generate",
        &json!({"prompt": {"prompt_token_ids": [1, 2, 3, 4]}, "max_tokens": 64}),
        &[("authorization", "Bearer a-third-caller")],
    )
    .await;
    assert_eq!(too_big.status, 400, "{}", too_big.body);
    assert!(
        too_big.message().contains("--inference-burst-tokens"),
        "{}",
        too_big.body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_saturated_engine_answers_503_with_retry_after_at_once() {
    let app = app_with(|limits| limits.max_in_flight = 1).await;
    // The model keeps counting for as long as it may, so each request runs for many steps.
    let counting = json!({"prompt": "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,",
                          "max_tokens": 128, "temperature": 0});
    let answers =
        futures::future::join_all((0..4).map(|_| call(&app, "/v1/completions", &counting, &[])))
            .await;
    let served = answers.iter().filter(|a| a.status == 200).count();
    let refused: Vec<&Answer> = answers.iter().filter(|a| a.status == 503).collect();
    assert_eq!(
        served + refused.len(),
        answers.len(),
        "only 200 or 503: {:?}",
        answers.iter().map(|a| &a.body).collect::<Vec<_>>()
    );
    assert!(served >= 1, "the admitted request is served");
    assert!(!refused.is_empty(), "one engine place for four requests");
    for answer in refused {
        assert_eq!(answer.error_type(), "server_busy", "{}", answer.body);
        assert_eq!(answer.retry_after, Some(1), "{}", answer.body);
    }
    for answer in answers.iter().filter(|a| a.status == 200) {
        assert!(
            !answer.body["choices"][0]["text"]
                .as_str()
                .unwrap()
                .is_empty()
        );
    }
    // Nothing stays admitted once the answers are out.
    assert_eq!(hello(&app, &[]).await.status, 200);
}

/// Two API tokens with the inference scope on a server with accounts on.
async fn two_callers(app: &TestApp) -> (String, String) {
    let owner = lachesis_tests::sign_up(app, "/api/auth/setup", "ada", "lab").await;
    let mut tokens = Vec::new();
    for name in ["greedy", "patient"] {
        let created: Value = app
            .client
            .post(app.url("/api/teams/lab/tokens"))
            .header("cookie", &owner.0)
            .header("x-csrf-token", &owner.1)
            .json(&json!({"name": name, "inference": true}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        tokens.push(created["token"].as_str().unwrap().to_string());
    }
    (tokens.remove(0), tokens.remove(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_caller_cannot_fill_the_engine_while_another_waits() {
    let mut config = config_for(&fresh_database().await);
    config.model = Some(model_path());
    config.auth = true;
    config.inference_limits.per_caller = 2;
    let app = TestApp::spawn_with(config).await;
    let (greedy, patient) = two_callers(&app).await;
    let greedy = format!("Bearer {greedy}");
    let patient = format!("Bearer {patient}");
    let counting = json!({"prompt": "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,",
                          "max_tokens": 96, "temperature": 0});
    // Four at once from one caller: two are run, the others refused until one is answered, and
    // meanwhile another caller is served.
    let greedy_headers = [("authorization", greedy.as_str())];
    let flood = futures::future::join_all(
        (0..4).map(|_| call(&app, "/v1/completions", &counting, &greedy_headers)),
    );
    let polite = async {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        call(
            &app,
            "/v1/completions",
            &json!({"prompt": "Hi", "max_tokens": 4}),
            &[("authorization", &patient)],
        )
        .await
    };
    let (flood, polite) = tokio::join!(flood, polite);
    assert_eq!(polite.status, 200, "{}", polite.body);
    let served = flood.iter().filter(|a| a.status == 200).count();
    let refused: Vec<&Answer> = flood.iter().filter(|a| a.status == 429).collect();
    assert_eq!(served + refused.len(), 4);
    assert!(served >= 2, "its share is served");
    assert!(!refused.is_empty(), "beyond its share it waits its turn");
    for answer in refused {
        assert_eq!(answer.retry_after, Some(1));
        assert!(
            answer.message().contains("--inference-per-caller"),
            "{}",
            answer.body
        );
    }
    // Once answered, the same caller is served again.
    let again = call(
        &app,
        "/v1/completions",
        &json!({"prompt": "Hi", "max_tokens": 4}),
        &[("authorization", &greedy)],
    )
    .await;
    assert_eq!(again.status, 200, "{}", again.body);
}

/// A streamed answer holds its caller's share like any other until it ends, and a caller that
/// walks away from its stream gets its share back: the stream's generation is not left holding it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_holds_its_callers_share_until_the_caller_leaves() {
    let mut config = config_for(&fresh_database().await);
    config.model = Some(model_path());
    config.auth = true;
    config.inference_limits.per_caller = 1;
    let app = TestApp::spawn_with(config).await;
    let (greedy, patient) = two_callers(&app).await;
    let greedy = format!("Bearer {greedy}");
    let patient = format!("Bearer {patient}");
    let long = json!({"prompt": "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,", "max_tokens": 2000,
                      "temperature": 0, "stream": true});
    let mut stream = app
        .client
        .post(app.url("/v1/completions"))
        .header("authorization", &greedy)
        .json(&long)
        .send()
        .await
        .expect("the stream starts");
    assert_eq!(stream.status().as_u16(), 200);
    let first = stream
        .chunk()
        .await
        .expect("a chunk")
        .expect("not yet over");
    assert!(String::from_utf8_lossy(&first).starts_with("data: "));

    let short = json!({"prompt": "Hi", "max_tokens": 4});
    let second = call(
        &app,
        "/v1/completions",
        &short,
        &[("authorization", &greedy)],
    )
    .await;
    assert_eq!(second.status, 429, "{}", second.body);
    let other = call(
        &app,
        "/v1/completions",
        &short,
        &[("authorization", &patient)],
    )
    .await;
    assert_eq!(other.status, 200, "{}", other.body);

    drop(stream);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let again = call(
            &app,
            "/v1/completions",
            &short,
            &[("authorization", &greedy)],
        )
        .await;
        if again.status == 200 {
            break;
        }
        assert_eq!(again.status, 429, "{}", again.body);
        assert!(
            std::time::Instant::now() < deadline,
            "the caller's share never came back"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}
