use serde_json::json;

use super::*;

fn weather() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: Some("Weather in a city".into()),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}},
            "required": ["city"]}),
    }
}

fn call(city: &str) -> ToolCall {
    ToolCall {
        name: "get_weather".into(),
        arguments: json!({"city": city}).as_object().cloned().unwrap(),
    }
}

#[test]
fn tools_go_into_a_new_or_the_existing_system_message() {
    let user = vec![ChatMessage::new("user", "Weather in Oslo?")];
    let offered = offer_tools(&user, &[weather()], &ToolChoice::Auto);
    assert_eq!(offered.len(), 2);
    assert_eq!(offered[0].role, "system");
    assert!(offered[0].content.contains("\"get_weather\""));
    assert_eq!(offered[1], user[0]);

    let with_system = vec![
        ChatMessage::new("system", "Be brief."),
        ChatMessage::new("user", "Hi"),
    ];
    let offered = offer_tools(&with_system, &[weather()], &ToolChoice::Required);
    assert_eq!(offered.len(), 2);
    assert!(offered[0].content.starts_with("You can use tools."));
    assert!(offered[0].content.ends_with("\n\nBe brief."));
    assert!(offered[0].content.contains("must call at least one tool"));

    let named = offer_tools(
        &user,
        &[weather()],
        &ToolChoice::Named("get_weather".into()),
    );
    assert!(named[0].content.contains("must call the tool get_weather"));
}

#[test]
fn no_tools_or_tool_choice_none_leave_the_messages_alone() {
    let user = vec![ChatMessage::new("user", "Hi")];
    assert_eq!(offer_tools(&user, &[], &ToolChoice::Auto), user);
    assert_eq!(offer_tools(&user, &[weather()], &ToolChoice::None), user);
}

#[test]
fn a_dialogue_with_calls_gets_openai_ids_matched_in_order() {
    let assistant = format!(
        "Let me look.\n{}",
        render_turn(&AssistantTurn {
            content: String::new(),
            calls: vec![call("Oslo"), call("Rome")],
        })
    );
    let messages = vec![
        ChatMessage::new("user", "Weather?"),
        ChatMessage::new("assistant", assistant),
        ChatMessage::new("tool", "cold"),
        ChatMessage::new("tool", "warm"),
        ChatMessage::new("assistant", turn_text("", vec![call("Paris")])),
        ChatMessage::new("tool", "mild"),
    ];
    let wire = serde_json::to_value(to_wire_messages(&messages).unwrap()).unwrap();
    assert_eq!(wire[0], json!({"role": "user", "content": "Weather?"}));
    assert_eq!(
        wire[1],
        json!({"role": "assistant", "content": "Let me look.", "tool_calls": [
            {"id": "call_0", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}},
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\":\"Rome\"}"}}]})
    );
    assert_eq!(
        wire[2],
        json!({"role": "tool", "content": "cold", "tool_call_id": "call_0"})
    );
    assert_eq!(wire[3]["tool_call_id"], "call_1");
    assert_eq!(wire[4]["content"], Value::Null);
    assert_eq!(wire[4]["tool_calls"][0]["id"], "call_2");
    assert_eq!(wire[5]["tool_call_id"], "call_2");
}

#[test]
fn a_tool_result_with_no_call_to_answer_is_refused() {
    let messages = vec![
        ChatMessage::new("user", "Hi"),
        // A malformed call is plain text: it opens no call to answer.
        ChatMessage::new("assistant", "<tool_call>\n{oops\n</tool_call>"),
        ChatMessage::new("tool", "result"),
    ];
    assert_eq!(
        to_wire_messages(&messages),
        Err(DialogueError::UnansweredTool { index: 2 })
    );
}

#[test]
fn wire_messages_render_for_the_model_and_back() {
    let wire: Vec<WireMessage> = serde_json::from_value(json!([
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_9", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
        {"role": "tool", "tool_call_id": "call_9", "content": "cold"}
    ]))
    .unwrap();
    let messages = from_wire_messages(wire).unwrap();
    assert_eq!(
        messages[1].content,
        render_turn(&AssistantTurn {
            content: String::new(),
            calls: vec![call("Oslo")],
        })
    );
    assert_eq!(messages[2], ChatMessage::new("tool", "cold"));
    // And back: the same call, the id renumbered for this dialogue.
    let again = to_wire_messages(&messages).unwrap();
    assert_eq!(
        calls_from_wire(&again[1].tool_calls).unwrap(),
        vec![call("Oslo")]
    );
    assert_eq!(again[2].tool_call_id.as_deref(), Some("call_0"));
}

#[test]
fn malformed_wire_calls_and_missing_content_are_typed_errors() {
    let bad_arguments = [json!("{not json"), json!("[1, 2]"), json!(7), json!(["x"])];
    for arguments in bad_arguments {
        let calls = vec![WireToolCall {
            id: "c".into(),
            kind: "function".into(),
            function: WireFunction {
                name: "get_weather".into(),
                arguments: arguments.clone(),
            },
        }];
        assert_eq!(
            calls_from_wire(&calls),
            Err(WireCallError::Arguments { index: 0 }),
            "{arguments}"
        );
    }
    let nameless: Vec<WireToolCall> =
        serde_json::from_value(json!([{"id": "c", "function": {"name": " ", "arguments": "{}"}}]))
            .unwrap();
    assert_eq!(
        calls_from_wire(&nameless),
        Err(WireCallError::NoName { index: 0 })
    );
    let user_without_content: Vec<WireMessage> =
        serde_json::from_value(json!([{"role": "user", "content": null}])).unwrap();
    assert_eq!(
        from_wire_messages(user_without_content),
        Err(WireMessageError::NoContent { index: 0 })
    );
}

#[test]
fn completions_with_well_formed_calls_are_found_and_others_are_text() {
    let text = turn_text("Checking.", vec![call("Oslo")]);
    let turn = completion_calls(&text).expect("a call");
    assert_eq!((turn.content.as_str(), turn.calls.len()), ("Checking.", 1));
    assert_eq!(completion_calls("Just text."), None);
    assert_eq!(
        completion_calls("<tool_call>\n{\"name\": 3}\n</tool_call>"),
        None
    );
    assert_eq!(completion_calls("<tool_call>\n{\"name\": \"x\"}"), None);
}
