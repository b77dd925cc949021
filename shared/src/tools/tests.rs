use proptest::prelude::*;
use serde_json::json;

use super::*;

fn call(name: &str, arguments: Value) -> ToolCall {
    ToolCall {
        name: name.into(),
        arguments: arguments.as_object().cloned().expect("an object"),
    }
}

fn write_file() -> ToolSpec {
    ToolSpec {
        name: "write_file".into(),
        description: Some("Writes a file".into()),
        parameters: json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
            "additionalProperties": false,
        }),
    }
}

#[test]
fn a_turn_with_text_and_two_calls_splits_into_both() {
    let text = "I will write it.\n<tool_call>\n{\"name\": \"write_file\", \"arguments\": \
                {\"path\": \"a.txt\", \"content\": \"hi\"}}\n</tool_call>\n<tool_call>\n\
                {\"name\": \"list\", \"arguments\": \"{\\\"dir\\\": \\\".\\\"}\"}\n</tool_call>";
    let turn = parse_assistant_turn(text, 8).expect("well formed");
    assert_eq!(turn.content, "I will write it.");
    assert_eq!(
        turn.calls,
        vec![
            call("write_file", json!({"path": "a.txt", "content": "hi"})),
            call("list", json!({"dir": "."})),
        ]
    );
}

#[test]
fn a_turn_without_tags_is_all_content() {
    let turn = parse_assistant_turn("  The answer is 42. ", 8).expect("plain text");
    assert_eq!(turn.content, "The answer is 42.");
    assert!(turn.calls.is_empty());
}

#[test]
fn each_malformation_has_its_own_error() {
    let cases = [
        ("<tool_call>{\"name\": \"a\"}", ToolCallError::Unclosed),
        ("{\"name\": \"a\"}</tool_call>", ToolCallError::Unopened),
        (
            "</tool_call><tool_call>{}</tool_call>",
            ToolCallError::Unopened,
        ),
        (
            "<tool_call><tool_call>{\"name\":\"a\"}</tool_call>",
            ToolCallError::Unclosed,
        ),
        (
            "<tool_call>{\"arguments\": {}}</tool_call>",
            ToolCallError::MissingName,
        ),
        (
            "<tool_call>{\"name\": \" \"}</tool_call>",
            ToolCallError::MissingName,
        ),
        (
            "<tool_call>{\"name\": \"a\", \"arguments\": [1]}</tool_call>",
            ToolCallError::ArgumentsNotObject,
        ),
        (
            "<tool_call>{\"name\": \"a\", \"arguments\": \"[1]\"}</tool_call>",
            ToolCallError::ArgumentsNotObject,
        ),
        (
            "<tool_call>{\"name\": \"a\", \"id\": 1}</tool_call>",
            ToolCallError::UnknownKey { key: "id".into() },
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(parse_assistant_turn(text, 8), Err(expected), "{text}");
    }
    assert!(matches!(
        parse_assistant_turn("<tool_call>name: a</tool_call>", 8),
        Err(ToolCallError::NotJson { .. })
    ));
    let three = "<tool_call>{\"name\":\"a\"}</tool_call>".repeat(3);
    assert_eq!(
        parse_assistant_turn(&three, 2),
        Err(ToolCallError::TooManyCalls { limit: 2 })
    );
}

#[test]
fn calls_are_checked_against_the_offered_schema() {
    let tools = [write_file()];
    let ok = call("write_file", json!({"path": "a", "content": "b"}));
    assert_eq!(
        check_call(&tools, &ok).map(|t| t.name.as_str()),
        Ok("write_file")
    );
    assert_eq!(
        check_call(&tools, &call("delete", json!({}))),
        Err(ToolCallError::UnknownTool {
            name: "delete".into()
        })
    );
    assert_eq!(
        check_call(&tools, &call("write_file", json!({"path": "a"}))),
        Err(ToolCallError::MissingArgument {
            tool: "write_file".into(),
            argument: "content".into()
        })
    );
    assert_eq!(
        check_call(
            &tools,
            &call("write_file", json!({"path": 3, "content": "b"}))
        ),
        Err(ToolCallError::WrongType {
            tool: "write_file".into(),
            argument: "path".into(),
            expected: "string".into()
        })
    );
    assert_eq!(
        check_call(
            &tools,
            &call(
                "write_file",
                json!({"path": "a", "content": "b", "mode": 1})
            )
        ),
        Err(ToolCallError::UnexpectedArgument {
            tool: "write_file".into(),
            argument: "mode".into()
        })
    );
}

#[test]
fn the_prompt_lists_every_tool_as_one_json_line() {
    let prompt = tools_prompt(&[write_file()]);
    let line = prompt
        .lines()
        .find(|l| l.contains("write_file"))
        .expect("the tool is listed");
    let parsed: Value = serde_json::from_str(line).expect("one JSON line per tool");
    assert_eq!(
        parsed["function"]["parameters"]["required"],
        json!(["path", "content"])
    );
}

fn arb_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn arb_call() -> impl Strategy<Value = ToolCall> {
    (
        "[a-z][a-z_]{0,15}",
        prop::collection::btree_map("[a-z_]{1,8}", arb_value(), 0..4),
    )
        .prop_map(|(name, arguments)| ToolCall {
            name,
            arguments: arguments.into_iter().collect(),
        })
}

proptest! {
    #[test]
    fn rendered_turns_parse_back_to_themselves(
        content in "[^<>]{0,40}",
        calls in prop::collection::vec(arb_call(), 0..4),
    ) {
        let turn = AssistantTurn { content: content.trim().to_string(), calls };
        let parsed = parse_assistant_turn(&render_turn(&turn), 8).expect("its own rendering parses");
        prop_assert_eq!(parsed, turn);
    }

    #[test]
    fn any_text_parses_or_is_refused_without_panicking(text in ".{0,200}") {
        let _ = parse_assistant_turn(&text, 8);
    }

    #[test]
    fn cutting_a_call_short_is_refused(call in arb_call(), cut in 1usize..40) {
        let rendered = render_call(&call);
        let keep = rendered.len().saturating_sub(cut);
        if let Some(truncated) = rendered.get(..keep) {
            prop_assert!(parse_assistant_turn(truncated, 8).is_err(), "{truncated}");
        }
    }

    #[test]
    fn tag_soup_never_panics(
        parts in prop::collection::vec(prop_oneof![
            Just("<tool_call>".to_string()),
            Just("</tool_call>".to_string()),
            Just("{\"name\": \"a\"}".to_string()),
            "[^<]{0,8}".prop_map(|s| s),
        ], 0..10)
    ) {
        let text = parts.concat();
        if let Ok(turn) = parse_assistant_turn(&text, 8) {
            prop_assert!(!turn.content.contains(CALL_OPEN) && !turn.content.contains(CALL_CLOSE));
        }
    }
}
