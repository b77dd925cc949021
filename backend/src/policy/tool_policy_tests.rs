//! Tools through the remote policies, against local axum fakes of the remote APIs (OpenAI's and
//! vLLM's `/v1/chat/completions`, vLLM's `/generate`). The fakes replay answers in the shapes
//! those servers send; they stand in for the remote servers, not for any of our code.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::routing::post;
use lachesis_inference::ChatMessage;
use lachesis_shared::tools::{
    AssistantTurn, ToolCall, ToolSpec, parse_assistant_turn, render_turn,
};
use serde_json::{Value, json};

use super::testing::byte_tokenizer;
use super::{
    Backoff, OpenAiPolicy, Policy, PolicyError, PolicyRequest, ServerPool, ServerPoolConfig,
    VllmPolicy,
};

/// OpenAI's chat answer when the model calls a tool (as its API reference shows it).
const OPENAI_TOOL_ANSWER: &str = r#"{
    "id": "chatcmpl-abc123", "object": "chat.completion", "created": 1699896916,
    "model": "gpt-4o-mini",
    "choices": [{
        "index": 0,
        "message": {"role": "assistant", "content": null, "refusal": null,
            "tool_calls": [{"id": "call_abc123", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\n\"city\": \"Boston\"\n}"}}]},
        "logprobs": null,
        "finish_reason": "tool_calls"
    }],
    "usage": {"prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99}
}"#;

/// vLLM's OpenAI server with a tool parser (`--enable-auto-tool-choice`): text beside the call,
/// `reasoning_content` and `stop_reason` fields, its own id scheme.
const VLLM_TOOL_ANSWER: &str = r#"{
    "id": "chatcmpl-9b1f", "object": "chat.completion", "created": 1718000000,
    "model": "Qwen/Qwen2.5-1.5B-Instruct", "prompt_logprobs": null,
    "choices": [{
        "index": 0,
        "message": {"role": "assistant", "reasoning_content": null, "content": "Let me check.",
            "tool_calls": [{"id": "chatcmpl-tool-4c2e", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}},
                {"id": "chatcmpl-tool-7d1a", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]},
        "logprobs": null, "finish_reason": "tool_calls", "stop_reason": null
    }],
    "usage": {"prompt_tokens": 200, "completion_tokens": 40, "total_tokens": 240}
}"#;

/// A fake remote server: answers every POST with `answer` and keeps the request bodies.
#[derive(Clone)]
struct Fake {
    answer: &'static str,
    seen: Arc<Mutex<Vec<Value>>>,
}

impl Fake {
    async fn start(answer: &'static str, path: &str) -> (Self, String) {
        async fn reply(State(fake): State<Fake>, body: String) -> String {
            let body = serde_json::from_str(&body).unwrap_or(Value::Null);
            fake.seen.lock().expect("not poisoned").push(body);
            fake.answer.to_owned()
        }
        let fake = Fake {
            answer,
            seen: Arc::default(),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let url = format!("http://{}", listener.local_addr().expect("an address"));
        let router = Router::new()
            .route(path, post(reply))
            .with_state(fake.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        (fake, url)
    }

    fn last(&self) -> Value {
        self.seen
            .lock()
            .expect("not poisoned")
            .last()
            .cloned()
            .expect("a request arrived")
    }
}

fn pool(url: String) -> ServerPool {
    ServerPool::new(ServerPoolConfig {
        base_urls: vec![url],
        max_retries: 0,
        timeout: Duration::from_secs(5),
        ..ServerPoolConfig::default()
    })
    .expect("a valid configuration")
    .with_backoff(Backoff {
        base: Duration::from_millis(1),
        max: Duration::from_millis(1),
        failures_before_cooldown: 1,
        cooldown: Duration::from_secs(1),
    })
}

fn weather() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: Some("Weather in a city".into()),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
    }
}

fn call(city: &str) -> ToolCall {
    ToolCall {
        name: "get_weather".into(),
        arguments: json!({"city": city})
            .as_object()
            .cloned()
            .expect("an object"),
    }
}

/// A dialogue in which the model already called the tool once and got its result.
fn request() -> PolicyRequest {
    let earlier = render_turn(&AssistantTurn {
        content: "Looking.".into(),
        calls: vec![call("Paris")],
    });
    PolicyRequest {
        messages: vec![
            ChatMessage::new("user", "Weather in Paris, then Boston?"),
            ChatMessage::new("assistant", earlier),
            ChatMessage::new("tool", "rain"),
        ],
        n: 1,
        max_tokens: 64,
        temperature: 1.0,
        top_p: 1.0,
        stop: Vec::new(),
        tools: vec![weather()],
    }
}

fn chat_policy(url: String) -> OpenAiPolicy {
    OpenAiPolicy::new(pool(url), byte_tokenizer(), "m", true)
}

#[tokio::test]
async fn tools_and_earlier_calls_travel_in_openais_shape_and_calls_come_back_as_blocks() {
    let (fake, url) = Fake::start(OPENAI_TOOL_ANSWER, "/v1/chat/completions").await;
    let rollouts = chat_policy(url)
        .complete(request())
        .await
        .expect("answered");
    let sent = fake.last();
    assert_eq!(
        sent["tools"],
        json!([{"type": "function", "function": {"name": "get_weather",
            "description": "Weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])
    );
    let assistant = &sent["messages"][1];
    assert_eq!(assistant["content"], "Looking.");
    let sent_call = &assistant["tool_calls"][0];
    assert_eq!(sent_call["type"], "function");
    assert_eq!(sent_call["function"]["arguments"], "{\"city\":\"Paris\"}");
    assert_eq!(
        sent["messages"][2],
        json!({"role": "tool", "content": "rain", "tool_call_id": sent_call["id"]})
    );

    let rollout = &rollouts[0];
    let turn = parse_assistant_turn(&rollout.completion, 8).expect("a well-formed turn");
    assert_eq!(turn.calls, [call("Boston")]);
    assert_eq!(turn.content, "");
    // The completion's ids are its text re-encoded, trained after the masked prompt.
    let tokenizer = byte_tokenizer();
    let completion_ids = tokenizer.encode(&rollout.completion).expect("encodes");
    assert!(rollout.tokens.ends_with(&completion_ids));
    let prompt = &rollout.tokens[..rollout.tokens.len() - completion_ids.len()];
    let prompt = tokenizer.decode(prompt).expect("decodes");
    assert!(
        prompt.contains("<tools>"),
        "the recorded prompt teaches the tools"
    );
}

#[tokio::test]
async fn vllm_tool_parser_answers_keep_their_text_and_every_call() {
    let (_fake, url) = Fake::start(VLLM_TOOL_ANSWER, "/v1/chat/completions").await;
    let rollouts = chat_policy(url)
        .complete(request())
        .await
        .expect("answered");
    let turn = parse_assistant_turn(&rollouts[0].completion, 8).expect("a well-formed turn");
    assert_eq!(turn.content, "Let me check.");
    assert_eq!(turn.calls, [call("Oslo"), call("Rome")]);
}

#[tokio::test]
async fn malformed_calls_from_the_server_are_typed_errors() {
    const NOT_JSON: &str = r#"{"choices": [{"index": 0, "finish_reason": "tool_calls",
        "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "c",
        "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": "}}]}}]}"#;
    const NOT_OBJECT: &str = r#"{"choices": [{"index": 0, "finish_reason": "tool_calls",
        "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "c",
        "type": "function", "function": {"name": "get_weather", "arguments": "[1]"}}]}}]}"#;
    const NO_FUNCTION: &str = r#"{"choices": [{"index": 0, "finish_reason": "tool_calls",
        "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "c"}]}}]}"#;
    for answer in [NOT_JSON, NOT_OBJECT, NO_FUNCTION] {
        let (_fake, url) = Fake::start(answer, "/v1/chat/completions").await;
        let result = chat_policy(url).complete(request()).await;
        assert!(
            matches!(result, Err(PolicyError::MalformedResponse(_))),
            "{answer}: {result:?}"
        );
    }
}

#[tokio::test]
async fn a_tool_result_answering_no_call_is_refused_before_sending() {
    let (fake, url) = Fake::start(OPENAI_TOOL_ANSWER, "/v1/chat/completions").await;
    let mut orphan = request();
    orphan.messages[1] = ChatMessage::new("assistant", "No call here.");
    let result = chat_policy(url).complete(orphan).await;
    assert!(
        matches!(result, Err(PolicyError::BadRequest(_))),
        "{result:?}"
    );
    assert!(fake.seen.lock().expect("not poisoned").is_empty());
}

#[tokio::test]
async fn vllm_generate_gets_the_tools_in_the_templated_prompt() {
    const ANSWER: &str = r#"{"text": ["ok"], "finish_reasons": ["stop"],
        "logprobs": [[[{"111": -0.1}], [{"107": -0.2}]]]}"#;
    let (fake, url) = Fake::start(ANSWER, "/generate").await;
    let policy = VllmPolicy::new(pool(url), byte_tokenizer(), "m");
    let rollouts = policy.complete(request()).await.expect("answered");
    let ids: Vec<u32> = serde_json::from_value(fake.last()["prompt"]["prompt_token_ids"].clone())
        .expect("token ids");
    let prompt = byte_tokenizer().decode(&ids).expect("decodes");
    assert!(
        prompt.starts_with("<|im_start|>system\nYou can use tools."),
        "{prompt}"
    );
    assert!(prompt.contains(r#""name":"get_weather""#), "{prompt}");
    // The earlier call is replayed as the model wrote it, and the result in a `tool` turn.
    assert!(
        prompt.contains("<|im_start|>assistant\nLooking.\n<tool_call>\n"),
        "{prompt}"
    );
    assert!(
        prompt.contains("<|im_start|>tool\nrain<|im_end|>"),
        "{prompt}"
    );
    assert_eq!(rollouts[0].completion, "ok");
}
