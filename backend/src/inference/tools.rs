//! Tool calling on `/v1/chat/completions`: which tools a request offers and how strongly
//! (`tools`, `tool_choice`), within the server's limits, and the answer's `tool_calls`.
//!
//! The embedded model has no native tool format, so the tools are taught in the system message
//! exactly as the embedded policy teaches them ([`offer_tools`]), and a call is the
//! `<tool_call>` block the model writes. `required` and a named tool are asked for in that
//! prompt, not enforced by constrained decoding: a small model may still answer in prose.

use lachesis_shared::tools::ToolSpec;
use serde::Deserialize;
use serde_json::{Value, json};

use super::InferenceError;
use super::limits::InferenceLimits;
use crate::policy::tool_chat::{ToolChoice, WireTool, call_to_wire, completion_calls};

/// `tool_choice` as OpenAI spells it: a mode, or `{"type": "function", "function": {"name"}}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum WireToolChoice {
    Mode(String),
    Named {
        #[serde(rename = "type")]
        kind: String,
        function: NamedFunction,
    },
}

#[derive(Debug, Clone, Deserialize)]
pub struct NamedFunction {
    pub name: String,
}

/// The tools a request offers and how, checked against the server's limits and each other.
pub fn offered(
    limits: &InferenceLimits,
    tools: Vec<WireTool>,
    choice: Option<WireToolChoice>,
) -> Result<(Vec<ToolSpec>, ToolChoice), InferenceError> {
    if tools.len() > limits.max_tools {
        return Err(InferenceError::TooManyTools {
            count: tools.len(),
            limit: limits.max_tools,
        });
    }
    // What goes into the prompt is each tool's JSON; count that, not the request's formatting.
    let bytes: usize = tools
        .iter()
        .map(|tool| json!(tool.function).to_string().len())
        .sum();
    if bytes > limits.max_tool_schema_bytes {
        return Err(InferenceError::ToolSchemasTooLarge {
            bytes,
            limit: limits.max_tool_schema_bytes,
        });
    }
    let mut specs = Vec::with_capacity(tools.len());
    for (index, tool) in tools.into_iter().enumerate() {
        if tool.kind != "function" {
            return Err(InferenceError::bad(
                format!(
                    "tool type {:?} is not supported (\"function\" is)",
                    tool.kind
                ),
                &format!("tools[{index}].type"),
            ));
        }
        if tool.function.name.trim().is_empty() {
            return Err(InferenceError::bad(
                "a tool needs a name",
                &format!("tools[{index}].function.name"),
            ));
        }
        specs.push(tool.function);
    }
    let choice = match choice {
        None => ToolChoice::Auto,
        Some(WireToolChoice::Mode(mode)) => match mode.as_str() {
            "none" => ToolChoice::None,
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            other => {
                return Err(InferenceError::bad(
                    format!(
                        "tool_choice {other:?} is not one of \"none\", \"auto\", \"required\" or a named function"
                    ),
                    "tool_choice",
                ));
            }
        },
        Some(WireToolChoice::Named { kind, function }) => {
            if kind != "function" {
                return Err(InferenceError::bad(
                    format!("tool_choice type {kind:?} is not supported (\"function\" is)"),
                    "tool_choice.type",
                ));
            }
            if !specs.iter().any(|s| s.name == function.name) {
                return Err(InferenceError::bad(
                    format!(
                        "tool_choice names {:?}, which is not in tools",
                        function.name
                    ),
                    "tool_choice.function.name",
                ));
            }
            ToolChoice::Named(function.name)
        }
    };
    if specs.is_empty() && matches!(choice, ToolChoice::Required | ToolChoice::Named(_)) {
        return Err(InferenceError::bad(
            "tool_choice asks for a call but no tools are offered",
            "tool_choice",
        ));
    }
    Ok((specs, choice))
}

/// One choice's `message` and `finish_reason`. When tools were offered and the text parses as a
/// turn with calls, the calls become `tool_calls` (arguments as JSON strings, ids unique so a
/// dialogue never repeats one), the text outside them the content (or `null`), and the finish
/// reason `tool_calls`. Text with a malformed call is answered as it is, as content with the
/// engine's finish reason: the caller sees what the model wrote rather than a guess at a call.
pub fn answer_message(text: &str, tools_offered: bool, finish: &str) -> (Value, String) {
    let turn = tools_offered.then(|| completion_calls(text)).flatten();
    match turn {
        None => (
            json!({"role": "assistant", "content": text}),
            finish.to_owned(),
        ),
        Some(turn) => {
            let calls: Vec<_> = turn
                .calls
                .iter()
                .map(|call| call_to_wire(format!("call_{:016x}", rand::random::<u64>()), call))
                .collect();
            let content = (!turn.content.is_empty()).then_some(turn.content);
            (
                json!({"role": "assistant", "content": content, "tool_calls": calls}),
                "tool_calls".to_owned(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str) -> WireTool {
        WireTool::function(ToolSpec {
            name: name.into(),
            description: None,
            parameters: json!({"type": "object", "properties": {}}),
        })
    }

    fn choice(value: Value) -> Option<WireToolChoice> {
        Some(serde_json::from_value(value).expect("a tool_choice shape"))
    }

    #[test]
    fn tool_choice_modes_and_names_are_read() {
        let limits = InferenceLimits::default();
        let offer = |c| offered(&limits, vec![tool("a")], c).map(|(_, c)| c);
        assert_eq!(offer(None).unwrap(), ToolChoice::Auto);
        assert_eq!(offer(choice(json!("none"))).unwrap(), ToolChoice::None);
        assert_eq!(
            offer(choice(json!("required"))).unwrap(),
            ToolChoice::Required
        );
        let named = choice(json!({"type": "function", "function": {"name": "a"}}));
        assert_eq!(offer(named).unwrap(), ToolChoice::Named("a".into()));
        for bad in [
            json!("sometimes"),
            json!({"type": "function", "function": {"name": "b"}}),
            json!({"type": "retrieval", "function": {"name": "a"}}),
        ] {
            assert!(
                matches!(
                    offer(choice(bad.clone())),
                    Err(InferenceError::BadRequest { .. })
                ),
                "{bad}"
            );
        }
        let none_offered = offered(&limits, Vec::new(), choice(json!("required")));
        assert!(matches!(
            none_offered,
            Err(InferenceError::BadRequest { .. })
        ));
    }

    #[test]
    fn tool_count_and_schema_size_are_bounded() {
        let limits = InferenceLimits {
            max_tools: 2,
            max_tool_schema_bytes: 200,
            ..InferenceLimits::default()
        };
        assert!(offered(&limits, vec![tool("a"), tool("b")], None).is_ok());
        assert!(matches!(
            offered(&limits, vec![tool("a"), tool("b"), tool("c")], None),
            Err(InferenceError::TooManyTools { count: 3, limit: 2 })
        ));
        let big = tool(&"x".repeat(200));
        assert!(matches!(
            offered(&limits, vec![big], None),
            Err(InferenceError::ToolSchemasTooLarge { limit: 200, .. })
        ));
    }

    #[test]
    fn calls_become_tool_calls_and_malformed_ones_stay_text() {
        let text =
            "Checking.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n</tool_call>";
        let (message, finish) = answer_message(text, true, "stop");
        assert_eq!(finish, "tool_calls");
        assert_eq!(message["content"], "Checking.");
        let call = &message["tool_calls"][0];
        assert!(call["id"].as_str().unwrap().starts_with("call_"));
        assert_eq!(call["type"], "function");
        assert_eq!(call["function"]["name"], "a");
        assert_eq!(call["function"]["arguments"], "{\"x\":1}");

        let only_call = "<tool_call>\n{\"name\": \"a\"}\n</tool_call>";
        assert_eq!(
            answer_message(only_call, true, "stop").0["content"],
            Value::Null
        );
        // Without tools offered the same text is just text.
        let (message, finish) = answer_message(text, false, "stop");
        assert_eq!(
            (message["content"].as_str(), finish.as_str()),
            (Some(text), "stop")
        );
        let malformed = "<tool_call>\n{\"name\": \"a\", \"arguments\": 5}\n</tool_call>";
        let (message, finish) = answer_message(malformed, true, "length");
        assert_eq!(
            (message["content"].as_str(), finish.as_str()),
            (Some(malformed), "length")
        );
        assert!(message.get("tool_calls").is_none());
    }
}
