//! Tool calls end to end with the real embedded model (SmolLM2): the embedded policy teaches the
//! tools in the system message and keeps multi-turn rollouts joinable, and `/v1/chat/completions`
//! takes `tools`, `tool_choice`, `tool` messages and assistant `tool_calls`, within its limits.

use lachesis::policy::{EmbeddedPolicy, Policy, PolicyRequest, Rollout, join_turns};
use lachesis_inference::{ChatMessage, Engine, EngineOptions};
use lachesis_shared::tools::{AssistantTurn, ToolCall, ToolSpec, render_turn};
use lachesis_tests::{TestApp, config_for, fresh_database, model_path};
use serde_json::{Value, json};

fn weather_tool() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: Some("The current weather in a city".into()),
        parameters: json!({"type": "object",
            "properties": {"city": {"type": "string", "description": "The city's name"}},
            "required": ["city"]}),
    }
}

fn request(messages: Vec<ChatMessage>, max_tokens: usize) -> PolicyRequest {
    PolicyRequest {
        messages,
        n: 1,
        max_tokens,
        temperature: 0.0,
        top_p: 1.0,
        stop: Vec::new(),
        tools: vec![weather_tool()],
    }
}

fn policy() -> EmbeddedPolicy {
    let engine = Engine::load(&model_path(), EngineOptions::default()).expect("the model loads");
    EmbeddedPolicy::new(engine)
}

async fn one(policy: &EmbeddedPolicy, request: PolicyRequest) -> Rollout {
    let mut rollouts = policy.complete(request).await.expect("a completion");
    assert_eq!(rollouts.len(), 1);
    rollouts.remove(0)
}

fn prompt_len(rollout: &Rollout) -> usize {
    rollout
        .masks
        .iter()
        .position(|&m| m != -100)
        .unwrap_or(rollout.masks.len())
}

/// Checks the joined row: `first`'s completion and `second`'s are trained (their ids as masks),
/// and what came between them (the tool result) is masked and holds `between`.
fn assert_joined(policy: &EmbeddedPolicy, first: &Rollout, second: &Rollout, between: &str) {
    let joined = join_turns(first, second).expect("the second prompt begins with the first row");
    let first_start = prompt_len(first);
    let first_end = first.tokens.len();
    let second_start = prompt_len(second);
    assert!(first_end > first_start && second.tokens.len() > second_start);
    for i in first_start..first_end {
        assert_eq!(
            joined.masks[i],
            i64::from(joined.tokens[i]),
            "first turn, {i}"
        );
    }
    for i in first_end..second_start {
        assert_eq!(joined.masks[i], -100, "between the turns, {i}");
        assert_eq!(joined.inference_logprobs[i], 1.0);
    }
    for i in second_start..joined.tokens.len() {
        assert_eq!(
            joined.masks[i],
            i64::from(joined.tokens[i]),
            "second turn, {i}"
        );
    }
    let middle = policy
        .engine
        .tokenizer()
        .decode(&joined.tokens[first_end..second_start])
        .unwrap();
    assert!(
        middle.contains(&format!("<|im_start|>tool\n{between}<|im_end|>")),
        "{middle:?}"
    );
}

#[tokio::test]
async fn the_embedded_policy_teaches_tools_and_keeps_a_tool_dialogue_joinable() {
    let policy = policy();
    let user = ChatMessage::new("user", "What is the weather in Oslo?");
    let tokenizer = policy.engine.tokenizer().clone();

    // (a) The prompt the model saw holds the tool's schema, in the system message.
    let first = one(&policy, request(vec![user.clone()], 40)).await;
    let prompt = tokenizer
        .decode(&first.tokens[..prompt_len(&first)])
        .unwrap();
    assert!(
        prompt.starts_with("<|im_start|>system\nYou can use tools."),
        "{prompt}"
    );
    assert!(prompt.contains(r#""name":"get_weather""#), "{prompt}");
    assert!(prompt.contains(r#""required":["city"]"#), "{prompt}");

    // (b) The model's own (greedy) first turn, a tool result, then a second completion: the
    // second prompt must begin with the first row so the dialogue trains as one row.
    let mut dialogue = vec![
        user.clone(),
        ChatMessage::new("assistant", first.completion.clone()),
        ChatMessage::new("tool", "sunny, 21 C"),
    ];
    let second = one(&policy, request(dialogue.clone(), 16)).await;
    assert_joined(&policy, &first, &second, "sunny, 21 C");

    // The same with a first turn that is a `<tool_call>` block, as a model trained for tools
    // writes it: its canonical tokens and the end-of-turn token the engine samples last.
    let call = render_turn(&AssistantTurn {
        content: String::new(),
        calls: vec![ToolCall {
            name: "get_weather".into(),
            arguments: json!({"city": "Oslo"}).as_object().cloned().unwrap(),
        }],
    });
    let mut ids = tokenizer.encode(&call).unwrap();
    ids.push(tokenizer.eos_token_id());
    let called = lachesis::policy::rollout_from_ids(
        &first.tokens[..prompt_len(&first)],
        &ids,
        &vec![-0.5; ids.len()],
        call.clone(),
        lachesis::policy::Finish::Stop,
    );
    dialogue[1] = ChatMessage::new("assistant", call);
    dialogue[2] = ChatMessage::new("tool", r#"{"sky": "clear"}"#);
    let answered = one(&policy, request(dialogue, 16)).await;
    assert_joined(&policy, &called, &answered, r#"{"sky": "clear"}"#);
}

async fn app_with_model() -> TestApp {
    let mut config = config_for(&fresh_database().await);
    config.model = Some(model_path());
    TestApp::spawn_with(config).await
}

async fn post_raw(app: &TestApp, body: &Value) -> (u16, Value) {
    let resp = app
        .client
        .post(app.url("/v1/chat/completions"))
        .json(body)
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.json().await.unwrap())
}

fn wire_tool(name: &str, description: &str) -> Value {
    json!({"type": "function", "function": {"name": name, "description": description,
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}})
}

/// An answer's message is either calls (string arguments holding objects, `tool_calls` finish)
/// or text.
fn assert_answer_shape(answer: &Value) {
    let choice = &answer["choices"][0];
    let message = &choice["message"];
    assert_eq!(message["role"], "assistant");
    match message.get("tool_calls") {
        Some(calls) => {
            assert_eq!(choice["finish_reason"], "tool_calls", "{answer}");
            for call in calls.as_array().unwrap() {
                assert!(call["id"].as_str().unwrap().starts_with("call_"));
                assert_eq!(call["type"], "function");
                let arguments = call["function"]["arguments"].as_str().unwrap();
                let parsed: Value = serde_json::from_str(arguments).unwrap();
                assert!(parsed.is_object(), "{arguments}");
            }
            assert!(message["content"].is_null() || message["content"].is_string());
        }
        None => {
            assert!(message["content"].is_string(), "{answer}");
            assert!(["stop", "length"].contains(&choice["finish_reason"].as_str().unwrap()));
        }
    }
}

#[tokio::test]
async fn chat_completions_take_tools_tool_choice_and_tool_messages() {
    let app = app_with_model().await;
    let user = json!({"role": "user", "content": "What is the weather in Oslo?"});
    for tool_choice in [
        json!("auto"),
        json!("required"),
        json!({"type": "function", "function": {"name": "get_weather"}}),
        json!("none"),
    ] {
        let (status, answer) = post_raw(
            &app,
            &json!({"messages": [user], "tools": [wire_tool("get_weather", "Weather in a city")],
                "tool_choice": tool_choice, "max_tokens": 40, "temperature": 0}),
        )
        .await;
        assert_eq!(status, 200, "{tool_choice}: {answer}");
        assert_answer_shape(&answer);
        // The tools were put into the prompt, unless tool_choice says not to offer them.
        let prompt_tokens = answer["usage"]["prompt_tokens"].as_u64().unwrap();
        if tool_choice == "none" {
            assert!(prompt_tokens < 60, "{prompt_tokens}");
        } else {
            assert!(prompt_tokens > 100, "{prompt_tokens}");
        }
    }

    // A call the client ran, and its result, sent back.
    let (status, answer) = post_raw(
        &app,
        &json!({"messages": [user,
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_7",
                "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
            {"role": "tool", "tool_call_id": "call_7", "content": "sunny, 21 C"}],
            "tools": [wire_tool("get_weather", "Weather in a city")],
            "max_tokens": 24, "temperature": 0}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_answer_shape(&answer);

    // A call whose arguments are not JSON is the client's mistake.
    let (status, error) = post_raw(
        &app,
        &json!({"messages": [user,
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function",
                "function": {"name": "get_weather", "arguments": "{city"}}]}]}),
    )
    .await;
    assert_eq!(status, 400, "{error}");
    assert_eq!(error["error"]["param"], "messages[1]");
}

#[tokio::test]
async fn too_many_tools_or_too_large_schemas_are_refused() {
    let app = app_with_model().await;
    let user = json!({"role": "user", "content": "Hi"});
    let many: Vec<Value> = (0..65).map(|i| wire_tool(&format!("t{i}"), "x")).collect();
    let (status, error) = post_raw(&app, &json!({"messages": [user], "tools": many})).await;
    assert_eq!(status, 400, "{error}");
    assert_eq!(error["error"]["type"], "invalid_request_error");
    assert_eq!(error["error"]["param"], "tools");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("--inference-max-tools"), "{message}");

    let huge = wire_tool("big", &"d".repeat(64 * 1024));
    let (status, error) = post_raw(&app, &json!({"messages": [user], "tools": [huge]})).await;
    assert_eq!(status, 400, "{error}");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("--inference-max-tool-schema-bytes"),
        "{message}"
    );

    // The limits hold whether or not the tools would be offered: they bound what is parsed.
    let many: Vec<Value> = (0..65).map(|i| wire_tool(&format!("t{i}"), "x")).collect();
    let (status, _) = post_raw(
        &app,
        &json!({"messages": [user], "tools": many, "tool_choice": "none"}),
    )
    .await;
    assert_eq!(status, 400);
    // (The boundary itself, the 64th tool accepted, is in the unit tests of `inference::tools`:
    // 64 tools make a prompt of thousands of tokens, too slow for a debug build here.)
}
