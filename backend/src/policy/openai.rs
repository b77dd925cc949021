//! The wire format of OpenAI-compatible servers: request bodies for `/v1/completions` and
//! `/v1/chat/completions`, and checked parsers of their answers. The policy built on them is in
//! `openai_policy.rs`.

use serde::{Deserialize, Serialize};

use super::tool_chat::{
    WireMessage, WireTool, WireToolCall, calls_from_wire, to_wire_messages, turn_text,
};
use super::wire::{OrderedLogprobs, Sampling, decode, finite, malformed, parse_finish};
use super::{Finish, PolicyError, PolicyRequest};

/// The body of `POST /v1/chat/completions`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatBody {
    pub model: String,
    /// In OpenAI's shape: calls written as `<tool_call>` blocks travel as `tool_calls`, and tool
    /// results name the call they answer.
    pub messages: Vec<WireMessage>,
    /// Left out when empty: some servers refuse `"tools": []`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<WireTool>,
    #[serde(flatten)]
    pub sampling: Sampling,
    /// Left out when empty: some servers refuse `"stop": []`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    pub logprobs: bool,
}

impl ChatBody {
    /// Refuses a dialogue OpenAI's format cannot express (a tool result answering no call).
    pub fn new(model: &str, request: &PolicyRequest) -> Result<Self, PolicyError> {
        let messages = to_wire_messages(&request.messages)
            .map_err(|e| PolicyError::BadRequest(e.to_string()))?;
        Ok(Self {
            model: model.to_owned(),
            messages,
            tools: request
                .tools
                .iter()
                .cloned()
                .map(WireTool::function)
                .collect(),
            sampling: Sampling::of(request),
            stop: request.stop.clone(),
            logprobs: true,
        })
    }
}

/// The body of `POST /v1/completions`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompletionBody {
    pub model: String,
    pub prompt: String,
    #[serde(flatten)]
    pub sampling: Sampling,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    /// The legacy API's "how many alternatives"; 1 is the smallest every server accepts, and the
    /// sampled token's own logprob comes with it.
    pub logprobs: u32,
}

impl CompletionBody {
    pub fn new(model: &str, prompt: String, request: &PolicyRequest) -> Self {
        Self {
            model: model.to_owned(),
            prompt,
            sampling: Sampling::of(request),
            stop: request.stop.clone(),
            logprobs: 1,
        }
    }
}

/// One choice of either endpoint, in `index` order.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiChoice {
    pub text: String,
    pub finish: Finish,
    /// Present when the server reported logprobs.
    pub logprobs: Option<TokenLogprobs>,
}

/// Per generated token, as the server split the text: its string, logprob and alternatives.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TokenLogprobs {
    pub tokens: Vec<String>,
    pub logprobs: Vec<f64>,
    /// Alternatives per token (empty lists when the server sent none).
    pub top: Vec<Vec<(String, f64)>>,
    /// The token's UTF-8 bytes, when the chat API sent them.
    pub bytes: Vec<Option<Vec<u8>>>,
}

#[derive(Deserialize)]
struct RawCompletions {
    choices: Vec<RawCompletionChoice>,
}

#[derive(Deserialize)]
struct RawCompletionChoice {
    #[serde(default)]
    index: Option<usize>,
    text: String,
    #[serde(default)]
    finish_reason: Option<String>,
    #[serde(default)]
    logprobs: Option<RawCompletionLogprobs>,
}

#[derive(Deserialize)]
struct RawCompletionLogprobs {
    tokens: Vec<String>,
    /// `null` only appears for the first prompt token with `echo`, which we never ask for.
    token_logprobs: Vec<Option<f64>>,
    #[serde(default)]
    top_logprobs: Option<Vec<Option<OrderedLogprobs>>>,
}

#[derive(Deserialize)]
struct RawChat {
    choices: Vec<RawChatChoice>,
}

#[derive(Deserialize)]
struct RawChatChoice {
    #[serde(default)]
    index: Option<usize>,
    message: RawMessage,
    #[serde(default)]
    finish_reason: Option<String>,
    #[serde(default)]
    logprobs: Option<RawChatLogprobs>,
}

#[derive(Deserialize)]
struct RawMessage {
    /// `null` is legal (a refusal or a tool call); it reads as an empty answer.
    #[serde(default)]
    content: Option<String>,
    /// The calls a server with a native tool format parsed out of the answer.
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Deserialize)]
struct RawChatLogprobs {
    #[serde(default)]
    content: Option<Vec<RawChatToken>>,
}

#[derive(Deserialize)]
struct RawChatToken {
    token: String,
    logprob: f64,
    #[serde(default)]
    bytes: Option<Vec<u8>>,
    #[serde(default)]
    top_logprobs: Vec<RawTopToken>,
}

#[derive(Deserialize)]
struct RawTopToken {
    token: String,
    logprob: f64,
}

/// Parses a `/v1/completions` answer.
pub fn parse_completions(body: &[u8]) -> Result<Vec<OpenAiChoice>, PolicyError> {
    let raw: RawCompletions = decode(body)?;
    let mut choices = Vec::with_capacity(raw.choices.len());
    for (c, choice) in raw.choices.into_iter().enumerate() {
        let logprobs = match choice.logprobs {
            None => None,
            Some(lp) => Some(completion_logprobs(c, lp)?),
        };
        let parsed = OpenAiChoice {
            text: choice.text,
            finish: parse_finish(choice.finish_reason.as_deref())?,
            logprobs,
        };
        choices.push((choice.index, parsed));
    }
    in_index_order(choices)
}

fn completion_logprobs(c: usize, raw: RawCompletionLogprobs) -> Result<TokenLogprobs, PolicyError> {
    let count = raw.tokens.len();
    if raw.token_logprobs.len() != count {
        return Err(malformed(format!(
            "choice {c}: {count} tokens but {} logprobs",
            raw.token_logprobs.len()
        )));
    }
    let mut logprobs = Vec::with_capacity(count);
    for (t, lp) in raw.token_logprobs.into_iter().enumerate() {
        let lp = lp.ok_or_else(|| malformed(format!("choice {c}, token {t}: null logprob")))?;
        logprobs.push(finite(lp, || {
            format!("choice {c}, token {t}: the logprob")
        })?);
    }
    let top = match raw.top_logprobs {
        None => vec![Vec::new(); count],
        Some(top) if top.len() != count => {
            return Err(malformed(format!(
                "choice {c}: {count} tokens but {} top_logprobs",
                top.len()
            )));
        }
        Some(top) => top
            .into_iter()
            .enumerate()
            .map(|(t, alternatives)| {
                let alternatives = alternatives.map(|a| a.0).unwrap_or_default();
                for (_, lp) in &alternatives {
                    finite(*lp, || {
                        format!("choice {c}, token {t}: an alternative's logprob")
                    })?;
                }
                Ok(alternatives)
            })
            .collect::<Result<_, PolicyError>>()?,
    };
    Ok(TokenLogprobs {
        tokens: raw.tokens,
        logprobs,
        top,
        bytes: vec![None; count],
    })
}

/// Parses a `/v1/chat/completions` answer.
pub fn parse_chat(body: &[u8]) -> Result<Vec<OpenAiChoice>, PolicyError> {
    let raw: RawChat = decode(body)?;
    let mut choices = Vec::with_capacity(raw.choices.len());
    for (c, choice) in raw.choices.into_iter().enumerate() {
        let logprobs = match choice.logprobs.and_then(|lp| lp.content) {
            None => None,
            Some(content) => Some(chat_logprobs(c, content)?),
        };
        // Calls come back as `<tool_call>` blocks after the text, the one format environments
        // read whatever the policy.
        let calls = calls_from_wire(choice.message.tool_calls.as_deref().unwrap_or_default())
            .map_err(|e| malformed(format!("choice {c}: {e}")))?;
        let parsed = OpenAiChoice {
            text: turn_text(&choice.message.content.unwrap_or_default(), calls),
            finish: parse_finish(choice.finish_reason.as_deref())?,
            logprobs,
        };
        choices.push((choice.index, parsed));
    }
    in_index_order(choices)
}

fn chat_logprobs(c: usize, content: Vec<RawChatToken>) -> Result<TokenLogprobs, PolicyError> {
    let mut out = TokenLogprobs::default();
    for (t, token) in content.into_iter().enumerate() {
        out.logprobs.push(finite(token.logprob, || {
            format!("choice {c}, token {t}: the logprob")
        })?);
        let mut top = Vec::with_capacity(token.top_logprobs.len());
        for alternative in token.top_logprobs {
            let lp = finite(alternative.logprob, || {
                format!("choice {c}, token {t}: an alternative's logprob")
            })?;
            top.push((alternative.token, lp));
        }
        out.top.push(top);
        out.tokens.push(token.token);
        out.bytes.push(token.bytes);
    }
    Ok(out)
}

/// Orders choices by their `index`. Servers may send them in any order (vLLM streams finish out of
/// order), so the indices must be all present and exactly 0..len, or all absent (then the order
/// as sent counts).
fn in_index_order(
    choices: Vec<(Option<usize>, OpenAiChoice)>,
) -> Result<Vec<OpenAiChoice>, PolicyError> {
    if choices.iter().all(|(index, _)| index.is_none()) {
        return Ok(choices.into_iter().map(|(_, c)| c).collect());
    }
    let count = choices.len();
    let mut slots: Vec<Option<OpenAiChoice>> = vec![None; count];
    for (index, choice) in choices {
        let index = index.ok_or_else(|| malformed("some choices have an index and some not"))?;
        match slots.get_mut(index) {
            Some(slot @ None) => *slot = Some(choice),
            Some(Some(_)) => return Err(malformed(format!("choice index {index} appears twice"))),
            None => {
                return Err(malformed(format!(
                    "choice index {index} of {count} choices"
                )));
            }
        }
    }
    // Every slot is filled: `count` distinct indices below `count`.
    Ok(slots.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::testing::{CHAT_SAMPLE, COMPLETION_SAMPLE, assert_malformed};
    use lachesis_inference::ChatMessage;

    fn request() -> PolicyRequest {
        PolicyRequest {
            tools: Vec::new(),
            messages: vec![ChatMessage::new("user", "Capital of France?")],
            n: 2,
            max_tokens: 8,
            temperature: 1.0,
            top_p: 0.5,
            stop: Vec::new(),
        }
    }

    #[test]
    fn completions_parse_in_index_order_with_their_logprobs() {
        let choices = parse_completions(COMPLETION_SAMPLE.as_bytes()).expect("valid");
        assert_eq!(choices.len(), 2);
        assert_eq!(choices[0].text, " Paris");
        assert_eq!(choices[0].finish, Finish::Stop);
        let second = choices[1].logprobs.as_ref().expect("logprobs");
        assert_eq!(second.tokens, [" L", "yon"]);
        assert_eq!(second.logprobs, [-2.5, -0.25]);
        assert_eq!(
            second.top[0],
            [(" L".to_owned(), -2.5), (" P".to_owned(), -0.1)]
        );
        assert_eq!(choices[1].finish, Finish::Length);
    }

    #[test]
    fn chat_completions_parse_content_logprobs_and_bytes() {
        let choices = parse_chat(CHAT_SAMPLE.as_bytes()).expect("valid");
        assert_eq!(choices.len(), 1);
        assert_eq!(choices[0].text, "Hello there");
        let lp = choices[0].logprobs.as_ref().expect("logprobs");
        assert_eq!(lp.tokens, ["Hello", " there"]);
        assert_eq!(lp.logprobs, [-0.31725305, -0.02]);
        assert_eq!(lp.top[0].len(), 2);
        assert_eq!(lp.bytes[1].as_deref(), Some(&b" there"[..]));
    }

    #[test]
    fn answers_without_logprobs_or_content_still_parse() {
        let chat = r#"{"choices": [{"index": 0, "message": {"role": "assistant", "content": null},
            "logprobs": null, "finish_reason": "tool_calls"}]}"#;
        let choices = parse_chat(chat.as_bytes()).expect("valid");
        assert_eq!(
            (choices[0].text.as_str(), choices[0].logprobs.is_none()),
            ("", true)
        );
        let text = r#"{"choices": [{"text": "x", "finish_reason": "length", "logprobs": null}]}"#;
        assert!(
            parse_completions(text.as_bytes()).expect("valid")[0]
                .logprobs
                .is_none()
        );
    }

    #[test]
    fn inconsistent_completions_are_malformed() {
        let cases = [
            r#"{"choices": [{"text": "x", "finish_reason": "stop",
                "logprobs": {"tokens": ["x"], "token_logprobs": []}}]}"#,
            r#"{"choices": [{"text": "x", "finish_reason": "stop",
                "logprobs": {"tokens": ["x"], "token_logprobs": [null]}}]}"#,
            r#"{"choices": [{"text": "x", "finish_reason": "stop",
                "logprobs": {"tokens": ["x"], "token_logprobs": [-1], "top_logprobs": []}}]}"#,
            r#"{"choices": [{"text": "x", "finish_reason": "stop",
                "logprobs": {"tokens": ["x"], "token_logprobs": [-1], "top_logprobs": [{"x": "y"}]}}]}"#,
            r#"{"choices": [{"index": 0, "text": "x", "finish_reason": "stop"},
                            {"index": 0, "text": "y", "finish_reason": "stop"}]}"#,
            r#"{"choices": [{"index": 3, "text": "x", "finish_reason": "stop"}]}"#,
            r#"{"choices": [{"index": 0, "text": "x", "finish_reason": "stop"},
                            {"text": "y", "finish_reason": "stop"}]}"#,
            r#"{"choices": [{"text": "x"}]}"#,
            r#"{"choices": [{"text": 5, "finish_reason": "stop"}]}"#,
            r#"{"choices": {}}"#,
            r#"{}"#,
        ];
        assert_malformed(parse_completions, &cases);
    }

    #[test]
    fn inconsistent_chat_answers_are_malformed() {
        let cases = [
            r#"{"choices": [{"message": {}, "finish_reason": "stop",
                "logprobs": {"content": [{"token": "a", "logprob": "x"}]}}]}"#,
            r#"{"choices": [{"message": {}, "finish_reason": "stop",
                "logprobs": {"content": [{"token": "a", "logprob": -1, "bytes": [300]}]}}]}"#,
            r#"{"choices": [{"message": {}, "finish_reason": "stop",
                "logprobs": {"content": [{"logprob": -1}]}}]}"#,
            r#"{"choices": [{"message": {}, "finish_reason": "stop",
                "logprobs": {"content": [{"token": "a", "logprob": -1,
                "top_logprobs": [{"token": "b"}]}]}}]}"#,
            r#"{"choices": [{"finish_reason": "stop"}]}"#,
            r#"{"choices": [{"message": {"content": 3}, "finish_reason": "stop"}]}"#,
        ];
        assert_malformed(parse_chat, &cases);
    }

    #[test]
    fn request_bodies_ask_for_logprobs_and_leave_out_empty_stops() {
        let chat =
            serde_json::to_value(ChatBody::new("m", &request()).expect("sendable")).expect("json");
        assert_eq!(
            chat,
            serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "Capital of France?"}],
                "n": 2, "max_tokens": 8, "temperature": 1.0, "top_p": 0.5, "logprobs": true})
        );
        let mut with_stop = request();
        with_stop.stop = vec!["\n".into()];
        let text =
            serde_json::to_value(CompletionBody::new("m", "P".into(), &with_stop)).expect("json");
        assert_eq!(text["logprobs"], 1);
        assert_eq!(text["prompt"], "P");
        assert_eq!(text["stop"], serde_json::json!(["\n"]));
    }
}
