//! Tool calling as a model writes it: the tools offered (OpenAI's `tools[].function` shape), the
//! calls parsed out of an assistant turn, and the checks a call must pass before it is run.
//!
//! A model without a native tool format writes each call as a JSON object between
//! `<tool_call>` and `</tool_call>` on lines of their own, the convention ChatML models trained for
//! tools follow. Parsing is strict: a turn either parses whole or is refused with the reason, so a
//! malformed call is never half-run.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The tag that opens a call in an assistant turn.
pub const CALL_OPEN: &str = "<tool_call>";
/// The tag that closes a call.
pub const CALL_CLOSE: &str = "</tool_call>";

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A JSON Schema object for its arguments.
    #[serde(default = "empty_object_schema")]
    pub parameters: Value,
}

fn empty_object_schema() -> Value {
    serde_json::json!({"type": "object", "properties": {}})
}

/// One call the model made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The tool's name.
    pub name: String,
    /// Its arguments, a JSON object.
    pub arguments: Map<String, Value>,
}

/// An assistant turn split into what it says and what it calls.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AssistantTurn {
    /// The text outside the calls, trimmed.
    pub content: String,
    /// The calls, in the order written.
    pub calls: Vec<ToolCall>,
}

/// Why an assistant turn's calls, or one call, cannot be run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ToolCallError {
    /// A `<tool_call>` with no `</tool_call>` after it.
    Unclosed,
    /// A `</tool_call>` with no `<tool_call>` before it.
    Unopened,
    /// The text between the tags is not a JSON object.
    NotJson {
        /// The JSON parser's message.
        reason: String,
    },
    /// The object lacks a non-empty string `name`.
    MissingName,
    /// `arguments` is neither an object nor a string holding one.
    ArgumentsNotObject,
    /// A key other than `name` and `arguments`.
    UnknownKey {
        /// The key.
        key: String,
    },
    /// More calls in one turn than allowed.
    TooManyCalls {
        /// The limit.
        limit: usize,
    },
    /// A call to a tool that was not offered.
    UnknownTool {
        /// The name called.
        name: String,
    },
    /// A required argument left out.
    MissingArgument {
        /// The tool.
        tool: String,
        /// The argument.
        argument: String,
    },
    /// An argument the schema does not declare, where it allows no others.
    UnexpectedArgument {
        /// The tool.
        tool: String,
        /// The argument.
        argument: String,
    },
    /// An argument of another JSON type than its schema says.
    WrongType {
        /// The tool.
        tool: String,
        /// The argument.
        argument: String,
        /// The type the schema asks for.
        expected: String,
    },
}

impl core::fmt::Display for ToolCallError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Unclosed => write!(f, "a {CALL_OPEN} is never closed"),
            Self::Unopened => write!(f, "a {CALL_CLOSE} closes nothing"),
            Self::NotJson { reason } => write!(f, "a tool call is not a JSON object: {reason}"),
            Self::MissingName => write!(f, "a tool call has no name"),
            Self::ArgumentsNotObject => write!(f, "a tool call's arguments are not an object"),
            Self::UnknownKey { key } => write!(f, "a tool call has an unknown key {key:?}"),
            Self::TooManyCalls { limit } => write!(f, "more than {limit} tool calls in one turn"),
            Self::UnknownTool { name } => write!(f, "no tool is called {name:?}"),
            Self::MissingArgument { tool, argument } => {
                write!(f, "{tool} needs the argument {argument:?}")
            }
            Self::UnexpectedArgument { tool, argument } => {
                write!(f, "{tool} takes no argument {argument:?}")
            }
            Self::WrongType {
                tool,
                argument,
                expected,
            } => write!(f, "{tool}'s argument {argument:?} must be {expected}"),
        }
    }
}

impl std::error::Error for ToolCallError {}

/// The most calls one assistant turn may make unless a caller says otherwise.
pub const DEFAULT_MAX_CALLS_PER_TURN: usize = 8;

/// Splits an assistant turn into its text and its calls, refusing the whole turn if any call is
/// malformed or there are more than `max_calls`.
pub fn parse_assistant_turn(text: &str, max_calls: usize) -> Result<AssistantTurn, ToolCallError> {
    let mut content = String::new();
    let mut calls = Vec::new();
    let mut rest = text;
    loop {
        let open = rest.find(CALL_OPEN);
        let close = rest.find(CALL_CLOSE);
        match (open, close) {
            (None, None) => {
                content.push_str(rest);
                break;
            }
            (None, Some(_)) => return Err(ToolCallError::Unopened),
            (Some(o), Some(c)) if c < o => return Err(ToolCallError::Unopened),
            (Some(_), None) => return Err(ToolCallError::Unclosed),
            (Some(o), Some(_)) => {
                content.push_str(&rest[..o]);
                let inner_start = o + CALL_OPEN.len();
                let after_open = &rest[inner_start..];
                let c = after_open.find(CALL_CLOSE).ok_or(ToolCallError::Unclosed)?;
                let body = &after_open[..c];
                if body.contains(CALL_OPEN) {
                    return Err(ToolCallError::Unclosed);
                }
                if calls.len() == max_calls {
                    return Err(ToolCallError::TooManyCalls { limit: max_calls });
                }
                calls.push(parse_call(body)?);
                rest = &after_open[c + CALL_CLOSE.len()..];
            }
        }
    }
    Ok(AssistantTurn {
        content: content.trim().to_string(),
        calls,
    })
}

/// One call's JSON: `{"name": "...", "arguments": {...}}`, the arguments possibly as a string
/// holding the object (OpenAI's wire form).
pub fn parse_call(body: &str) -> Result<ToolCall, ToolCallError> {
    let value: Value = serde_json::from_str(body.trim()).map_err(|e| ToolCallError::NotJson {
        reason: e.to_string(),
    })?;
    let Value::Object(mut object) = value else {
        return Err(ToolCallError::NotJson {
            reason: "not an object".into(),
        });
    };
    let name = match object.remove("name") {
        Some(Value::String(name)) if !name.trim().is_empty() => name,
        _ => return Err(ToolCallError::MissingName),
    };
    let arguments = match object.remove("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(arguments)) => arguments,
        Some(Value::String(encoded)) => match serde_json::from_str(&encoded) {
            Ok(Value::Object(arguments)) => arguments,
            _ => return Err(ToolCallError::ArgumentsNotObject),
        },
        Some(_) => return Err(ToolCallError::ArgumentsNotObject),
    };
    if let Some(key) = object.keys().next() {
        return Err(ToolCallError::UnknownKey { key: key.clone() });
    }
    Ok(ToolCall { name, arguments })
}

/// A call as the model writes it, so a conversation replays the model's own format.
pub fn render_call(call: &ToolCall) -> String {
    let json = serde_json::json!({"name": call.name, "arguments": call.arguments});
    format!("{CALL_OPEN}\n{json}\n{CALL_CLOSE}")
}

/// An assistant turn as the model writes it: its text, then each call on lines of its own.
pub fn render_turn(turn: &AssistantTurn) -> String {
    let mut parts: Vec<String> = Vec::new();
    if !turn.content.is_empty() {
        parts.push(turn.content.clone());
    }
    parts.extend(turn.calls.iter().map(render_call));
    parts.join("\n")
}

/// What a model with no native tool format is told about the tools and how to call them.
pub fn tools_prompt(tools: &[ToolSpec]) -> String {
    let mut prompt = String::from(
        "You can use tools. Each tool is described by one JSON line inside <tools></tools>:\n<tools>\n",
    );
    for tool in tools {
        let line = serde_json::json!({
            "type": "function",
            "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
        });
        prompt.push_str(&line.to_string());
        prompt.push('\n');
    }
    prompt.push_str(
        "</tools>\nTo use a tool, write a JSON object naming it and giving its arguments, alone \
         between tags, like this:\n<tool_call>\n{\"name\": \"tool_name\", \"arguments\": \
         {\"argument\": \"value\"}}\n</tool_call>\nYou may make several calls in one turn. Each \
         result comes back in a `tool` message. When you have what you need, answer without \
         tags.",
    );
    prompt
}

/// Checks a call against the offered tools: the tool exists, required arguments are there,
/// declared arguments have their declared JSON type, and no undeclared argument is passed where
/// the schema sets `additionalProperties: false`.
pub fn check_call<'a>(
    tools: &'a [ToolSpec],
    call: &ToolCall,
) -> Result<&'a ToolSpec, ToolCallError> {
    let tool =
        tools
            .iter()
            .find(|t| t.name == call.name)
            .ok_or_else(|| ToolCallError::UnknownTool {
                name: call.name.clone(),
            })?;
    let schema = &tool.parameters;
    let properties = schema.get("properties").and_then(Value::as_object);
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for argument in required.iter().filter_map(Value::as_str) {
            if !call.arguments.contains_key(argument) {
                return Err(ToolCallError::MissingArgument {
                    tool: tool.name.clone(),
                    argument: argument.to_string(),
                });
            }
        }
    }
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    for (argument, value) in &call.arguments {
        let declared = properties.and_then(|p| p.get(argument));
        match declared {
            None if closed => {
                return Err(ToolCallError::UnexpectedArgument {
                    tool: tool.name.clone(),
                    argument: argument.clone(),
                });
            }
            None => {}
            Some(property) => {
                if let Some(expected) = property.get("type").and_then(Value::as_str)
                    && !has_json_type(value, expected)
                {
                    return Err(ToolCallError::WrongType {
                        tool: tool.name.clone(),
                        argument: argument.clone(),
                        expected: expected.to_string(),
                    });
                }
            }
        }
    }
    Ok(tool)
}

/// Whether `value` is of JSON Schema type `expected` (unknown type names accept anything).
fn has_json_type(value: &Value, expected: &str) -> bool {
    match expected {
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.is_i64() || value.is_u64(),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        "null" => value.is_null(),
        _ => true,
    }
}

/// One step of a tool-calling episode, as the browser's episode page shows it live.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolEpisodeEvent {
    /// Which episode (they may interleave).
    pub episode: u64,
    /// What happened.
    pub step: ToolEpisodeStep,
}

/// What happened in a tool-calling episode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ToolEpisodeStep {
    /// The episode began with this task.
    Started {
        /// What the model was asked.
        task: String,
        /// The task's kind.
        template: String,
        /// How many tools are offered (each follows as an `Offered` step).
        tools: usize,
    },
    /// A tool offered to the model, with its schema.
    Offered {
        /// The tool.
        tool: ToolSpec,
        /// The server offering it.
        server: String,
    },
    /// The model called a tool.
    Called {
        /// The call.
        call: ToolCall,
        /// The server that ran it, if any did.
        server: Option<String>,
        /// What came back (or why it did not run), cut for display.
        result: String,
        /// The call failed or was refused.
        failed: bool,
    },
    /// A model turn that was not a well-formed call.
    Malformed {
        /// Why.
        error: String,
    },
    /// The episode ended.
    Finished {
        /// The model's final answer, if it gave one.
        answer: Option<String>,
        /// Whether the outcome check held.
        solved: bool,
        /// The reward.
        score: f64,
        /// What the check looked at.
        check: String,
        /// A server failure that ended it early.
        server_failure: Option<String>,
    },
}

#[cfg(test)]
mod tests;
