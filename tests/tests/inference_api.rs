//! The embedded model's HTTP endpoints: OpenAI-compatible `/v1/...` and vLLM's `/generate`, their
//! answers' shapes, and typed errors for bad requests.

// One binary for the model's HTTP surface: tool calls and weight loading live beside the plain
// completions.
#[path = "inference_api/arena_adapter.rs"]
mod arena_adapter;
#[path = "inference_api/arena_battles.rs"]
mod arena_battles;
#[path = "inference_api/streaming.rs"]
mod streaming;
#[path = "inference_api/tool_calls.rs"]
mod tool_calls;
#[path = "inference_api/trainer_process.rs"]
mod trainer_process;
#[path = "inference_api/weights.rs"]
mod weights;
#[path = "inference_api/weights_access.rs"]
mod weights_access;

use lachesis_tests::{TestApp, config_for, fresh_database, model_path};
use serde_json::{Value, json};

async fn app_with_model() -> TestApp {
    let mut config = config_for(&fresh_database().await);
    config.model = Some(model_path());
    TestApp::spawn_with(config).await
}

async fn post_raw(app: &TestApp, path: &str, body: &str) -> (u16, Value) {
    let resp = app
        .client
        .post(app.url(path))
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

#[tokio::test]
async fn chat_completions_answer_with_logprobs_and_usage() {
    let app = app_with_model().await;
    let answer = app
        .post(
            "/v1/chat/completions",
            &json!({
                "model": "smollm2",
                "messages": [{"role": "user", "content": "What is 2+2?"}],
                "max_tokens": 24, "temperature": 0, "n": 2,
                "logprobs": true, "top_logprobs": 3
            }),
        )
        .await;
    assert_eq!(answer["object"], "chat.completion");
    let choices = answer["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 2);
    let text = choices[0]["message"]["content"].as_str().unwrap();
    assert!(text.contains('4'), "{text:?}");
    assert_eq!(choices[0]["message"]["role"], "assistant");
    let tokens = choices[0]["logprobs"]["content"].as_array().unwrap();
    let joined: String = tokens
        .iter()
        .map(|t| t["token"].as_str().unwrap())
        .collect();
    assert_eq!(joined, text, "the token strings spell the answer");
    for token in tokens {
        assert!(token["logprob"].as_f64().unwrap() <= 0.0);
        assert_eq!(token["top_logprobs"].as_array().unwrap().len(), 3);
    }
    let usage = &answer["usage"];
    assert_eq!(
        usage["total_tokens"].as_u64().unwrap(),
        usage["prompt_tokens"].as_u64().unwrap() + usage["completion_tokens"].as_u64().unwrap()
    );
    let models = app.get("/v1/models").await;
    assert_eq!(models["data"][0]["object"], "model");
}

#[tokio::test]
async fn completions_and_generate_agree_on_greedy_tokens() {
    let app = app_with_model().await;
    let text = app
        .post(
            "/v1/completions",
            &json!({"prompt": "The capital of France is", "max_tokens": 6, "temperature": 0, "logprobs": 1}),
        )
        .await;
    assert_eq!(text["object"], "text_completion");
    let completion = text["choices"][0]["text"].as_str().unwrap();
    assert_eq!(
        text["choices"][0]["logprobs"]["tokens"]
            .as_array()
            .unwrap()
            .len(),
        6
    );

    let raw = app
        .client
        .post(app.url("/generate"))
        .json(
            &json!({"prompt": "The capital of France is", "max_tokens": 6, "temperature": 0,
                      "logprobs": 2, "n": 3, "prompt_logprobs": 1}),
        )
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let generated: Value = serde_json::from_str(&raw).unwrap();
    let texts = generated["text"].as_array().unwrap();
    assert_eq!(texts.len(), 3);
    assert!(
        texts.iter().all(|t| t == completion),
        "{texts:?} vs {completion:?}"
    );
    assert_eq!(
        generated["finish_reasons"],
        json!(["length", "length", "length"])
    );
    // Each token: [{"<sampled id>": logprob, ...alternatives}], the sampled id first.
    let ids = generated["token_ids"][0].as_array().unwrap();
    let entries = generated["logprobs"][0].as_array().unwrap();
    assert_eq!(ids.len(), entries.len());
    assert!(
        raw.contains(&format!("\"logprobs\":[[[{{\"{}\":", ids[0])),
        "{raw}"
    );
    let prompt_lps = generated["prompt_logprobs"].as_array().unwrap();
    assert_eq!(
        prompt_lps.len(),
        generated["prompt_token_ids"].as_array().unwrap().len()
    );
    assert!(prompt_lps[0].is_null());

    // Prompt token ids in, as atroposlib sends them.
    let by_ids = app
        .post(
            "/generate",
            &json!({"prompt": {"prompt_token_ids": generated["prompt_token_ids"]},
                    "max_tokens": 6, "temperature": 0, "logprobs": 0}),
        )
        .await;
    assert_eq!(by_ids["token_ids"][0], generated["token_ids"][0]);
    assert_eq!(app.get("/health").await["status"], "ok");
    assert_eq!(app.get("/health_generate").await["status"], "ok");
}

#[tokio::test]
async fn bad_requests_get_openai_errors_and_the_engine_keeps_serving() {
    let app = app_with_model().await;
    let cases = [
        ("/v1/chat/completions", "{not json", "body"),
        ("/v1/chat/completions", r#"{"messages": "hi"}"#, "messages"),
        ("/v1/chat/completions", r#"{"messages": []}"#, "messages"),
        (
            "/v1/chat/completions",
            r#"{"messages": [{"role": "user", "content": "x"}], "temperature": -1}"#,
            "temperature",
        ),
        (
            "/v1/chat/completions",
            r#"{"messages": [{"role": "user", "content": "x"}], "stream": true, "logprobs": true}"#,
            "logprobs",
        ),
        (
            "/v1/completions",
            r#"{"prompt": "x", "stream": true, "max_tokens": 100000000}"#,
            "context",
        ),
        ("/v1/completions", r#"{"prompt": "x", "n": 0}"#, "n"),
        (
            "/v1/completions",
            r#"{"prompt": "x", "max_tokens": 100000000}"#,
            "context",
        ),
        (
            "/v1/completions",
            r#"{"prompt": [4294967295]}"#,
            "vocabulary",
        ),
        (
            "/generate",
            r#"{"prompt": {"prompt_token_ids": []}}"#,
            "empty",
        ),
        ("/generate", r#"{"prompt": "x", "top_p": 0}"#, "top_p"),
        ("/generate", r#"{"prompt": 7}"#, "prompt"),
    ];
    for (path, body, mentions) in cases {
        let (status, error) = post_raw(&app, path, body).await;
        assert_eq!(status, 400, "{path} {body}: {error}");
        assert_eq!(error["error"]["type"], "invalid_request_error", "{error}");
        let message = error["error"]["message"].as_str().unwrap().to_owned()
            + error["error"]["param"].as_str().unwrap_or("");
        assert!(message.contains(mentions), "{path} {body}: {error}");
    }
    let ok = app
        .post(
            "/generate",
            &json!({"prompt": "Hi", "max_tokens": 2, "temperature": 0}),
        )
        .await;
    assert_eq!(ok["text"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn without_a_model_the_routes_say_so() {
    let app = TestApp::spawn().await;
    let (status, error) = post_raw(&app, "/generate", r#"{"prompt": "x"}"#).await;
    assert_eq!(status, 503);
    assert_eq!(error["error"]["type"], "model_not_loaded");
    let health = app.client.get(app.url("/health")).send().await.unwrap();
    assert_eq!(health.status().as_u16(), 503);
}
