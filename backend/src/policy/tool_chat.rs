//! Tool calls across the two chat shapes Lachesis speaks: the model's own text, where a call is a
//! `<tool_call>` block (`lachesis_shared::tools`), and OpenAI's chat wire format, where an
//! assistant message carries `tool_calls` and a `tool` message answers one by `tool_call_id`.
//!
//! One module for both directions, so the embedded policy, the vLLM and OpenAI policies and the
//! server's `/v1/chat/completions` render tools and calls the same way.

use std::collections::VecDeque;

use lachesis_inference::ChatMessage;
use lachesis_shared::tools::{
    AssistantTurn, DEFAULT_MAX_CALLS_PER_TURN, ToolCall, ToolSpec, parse_assistant_turn,
    render_turn, tools_prompt,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// How the tools are offered (OpenAI's `tool_choice`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ToolChoice {
    /// Not offered at all.
    None,
    /// Offered; the model decides.
    #[default]
    Auto,
    /// The model must call at least one.
    Required,
    /// The model must call this one.
    Named(String),
}

/// `messages` with the tools taught in the system message, for a model without a native tool
/// format: the tools prompt goes before an existing system message's text, or into a new system
/// message first. Without tools (or with [`ToolChoice::None`]) the messages are unchanged.
///
/// The system message is the same in every turn of a dialogue, so a later turn's prompt still
/// begins with an earlier turn's (what `join_turns` needs).
pub fn offer_tools(
    messages: &[ChatMessage],
    tools: &[ToolSpec],
    choice: &ToolChoice,
) -> Vec<ChatMessage> {
    if tools.is_empty() || *choice == ToolChoice::None {
        return messages.to_vec();
    }
    let mut prompt = tools_prompt(tools);
    match choice {
        ToolChoice::Required => prompt.push_str("\nIn this turn you must call at least one tool."),
        ToolChoice::Named(name) => {
            prompt.push_str(&format!("\nIn this turn you must call the tool {name}."));
        }
        ToolChoice::None | ToolChoice::Auto => {}
    }
    let mut out = messages.to_vec();
    match out.first_mut() {
        Some(first) if first.role == "system" => {
            first.content = format!("{prompt}\n\n{}", first.content);
        }
        _ => out.insert(0, ChatMessage::new("system", prompt)),
    }
    out
}

/// A tool as OpenAI's `tools` list holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireTool {
    /// Always `"function"`.
    #[serde(rename = "type")]
    pub kind: String,
    pub function: ToolSpec,
}

impl WireTool {
    pub fn function(spec: ToolSpec) -> Self {
        Self {
            kind: "function".into(),
            function: spec,
        }
    }
}

/// One call in an assistant message's `tool_calls`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireToolCall {
    pub id: String,
    #[serde(rename = "type", default = "function_kind")]
    pub kind: String,
    pub function: WireFunction,
}

fn function_kind() -> String {
    "function".into()
}

/// The called function: OpenAI sends `arguments` as a string holding a JSON object; an object
/// itself is read too, since some clients send one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireFunction {
    pub name: String,
    #[serde(default)]
    pub arguments: Value,
}

/// A chat message in OpenAI's shape, tool fields included.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireMessage {
    pub role: String,
    /// `null` is legal for an assistant message that only calls tools.
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<WireToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

/// Why a wire call cannot become a [`ToolCall`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireCallError {
    #[error("tool call {index} has no function name")]
    NoName { index: usize },
    #[error("tool call {index}'s arguments are not a JSON object (nor a string holding one)")]
    Arguments { index: usize },
}

/// Calls from OpenAI's wire shape.
pub fn calls_from_wire(calls: &[WireToolCall]) -> Result<Vec<ToolCall>, WireCallError> {
    calls
        .iter()
        .enumerate()
        .map(|(index, call)| {
            if call.function.name.trim().is_empty() {
                return Err(WireCallError::NoName { index });
            }
            let arguments = match &call.function.arguments {
                Value::Object(object) => object.clone(),
                Value::Null => Map::new(),
                Value::String(encoded) if encoded.trim().is_empty() => Map::new(),
                Value::String(encoded) => match serde_json::from_str(encoded) {
                    Ok(Value::Object(object)) => object,
                    _ => return Err(WireCallError::Arguments { index }),
                },
                _ => return Err(WireCallError::Arguments { index }),
            };
            Ok(ToolCall {
                name: call.function.name.clone(),
                arguments,
            })
        })
        .collect()
}

/// A call in OpenAI's wire shape, its arguments a JSON string as OpenAI sends them.
pub fn call_to_wire(id: String, call: &ToolCall) -> WireToolCall {
    WireToolCall {
        id,
        kind: function_kind(),
        function: WireFunction {
            name: call.name.clone(),
            arguments: Value::String(Value::Object(call.arguments.clone()).to_string()),
        },
    }
}

/// An assistant answer in the model's own text: the content, then each call as a `<tool_call>`
/// block. Without calls the content is returned as it is.
pub fn turn_text(content: &str, calls: Vec<ToolCall>) -> String {
    if calls.is_empty() {
        return content.to_owned();
    }
    render_turn(&AssistantTurn {
        content: content.trim().to_owned(),
        calls,
    })
}

/// The calls in a completion, when it parses as a turn with at least one; `None` for plain text
/// and for text whose calls are malformed (the caller then treats it as plain text).
pub fn completion_calls(text: &str) -> Option<AssistantTurn> {
    parse_assistant_turn(text, DEFAULT_MAX_CALLS_PER_TURN)
        .ok()
        .filter(|turn| !turn.calls.is_empty())
}

/// Why a dialogue cannot be sent in OpenAI's shape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DialogueError {
    #[error("message {index} is a tool result, but no earlier assistant call is left to answer")]
    UnansweredTool { index: usize },
}

/// The dialogue in OpenAI's shape: an assistant message whose text holds `<tool_call>` blocks
/// gets `tool_calls` (ids `call_<k>`, counted over the dialogue so none repeats), and each `tool`
/// message answers the oldest call not yet answered, as tool results follow their calls in order.
pub fn to_wire_messages(messages: &[ChatMessage]) -> Result<Vec<WireMessage>, DialogueError> {
    let mut next_id = 0usize;
    let mut pending: VecDeque<String> = VecDeque::new();
    let mut out = Vec::with_capacity(messages.len());
    for (index, message) in messages.iter().enumerate() {
        let mut wire = WireMessage {
            role: message.role.clone(),
            content: Some(message.content.clone()),
            tool_calls: Vec::new(),
            tool_call_id: None,
        };
        match message.role.as_str() {
            "assistant" => {
                if let Some(turn) = completion_calls(&message.content) {
                    wire.content = (!turn.content.is_empty()).then_some(turn.content);
                    for call in &turn.calls {
                        let id = format!("call_{next_id}");
                        next_id += 1;
                        pending.push_back(id.clone());
                        wire.tool_calls.push(call_to_wire(id, call));
                    }
                }
            }
            "tool" => {
                let id = pending
                    .pop_front()
                    .ok_or(DialogueError::UnansweredTool { index })?;
                wire.tool_call_id = Some(id);
            }
            _ => {}
        }
        out.push(wire);
    }
    Ok(out)
}

/// Why an OpenAI-shaped message cannot be rendered for the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireMessageError {
    #[error("message {index} has no content")]
    NoContent { index: usize },
    #[error("message {index}: {source}")]
    Call {
        index: usize,
        #[source]
        source: WireCallError,
    },
}

/// OpenAI-shaped messages as the model reads them: an assistant message's `tool_calls` become
/// `<tool_call>` blocks after its content (which may be `null`), `tool` messages keep their role
/// and content. Every other message needs content.
pub fn from_wire_messages(
    messages: Vec<WireMessage>,
) -> Result<Vec<ChatMessage>, WireMessageError> {
    messages
        .into_iter()
        .enumerate()
        .map(|(index, message)| {
            if message.role == "assistant" {
                let calls = calls_from_wire(&message.tool_calls)
                    .map_err(|source| WireMessageError::Call { index, source })?;
                let content = message.content.unwrap_or_default();
                return Ok(ChatMessage::new("assistant", turn_text(&content, calls)));
            }
            let content = message
                .content
                .ok_or(WireMessageError::NoContent { index })?;
            Ok(ChatMessage::new(message.role, content))
        })
        .collect()
}

#[cfg(test)]
#[path = "tool_chat_tests.rs"]
mod tests;
