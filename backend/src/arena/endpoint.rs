//! An endpoint contender: an OpenAI-compatible chat endpoint the server's admin entered, asked to
//! stream its answer (`"stream": true`) so the voter sees it being written, as an embedded
//! contender's. An endpoint that answers with one JSON body instead is read whole.

use std::time::Duration;

use futures::StreamExt;
use lachesis_inference::ChatMessage;
use serde_json::Value;

use super::answer::AnswerError;

/// The environment variable holding the key sent to admin-chosen contender endpoints.
pub const ENDPOINT_KEY_VAR: &str = "LACHESIS_ARENA_API_KEY";

/// Most bytes read from an endpoint for one answer, chunks' wrapping included: a contender that
/// ignores its token limit cannot hold the server's memory.
const MAX_RESPONSE_BYTES: usize = 1 << 20;

/// The endpoint's answer to `messages`; its text so far goes to `on_text` as chunks arrive.
pub async fn answer(
    base_url: &str,
    model: &str,
    messages: &[ChatMessage],
    max_tokens: usize,
    timeout: Duration,
    on_text: &(dyn Fn(String) + Sync),
) -> Result<String, AnswerError> {
    let failed = |what: String| AnswerError::Failed(what);
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .map_err(|e| failed(e.to_string()))?;
    let base = base_url.trim_end_matches('/');
    let base = base.strip_suffix("/v1").unwrap_or(base);
    let body = serde_json::json!({
        "model": model,
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": 0.7,
        "stream": true,
    });
    let mut request = client
        .post(format!("{base}/v1/chat/completions"))
        .json(&body);
    if let Some(key) = std::env::var(ENDPOINT_KEY_VAR)
        .ok()
        .filter(|k| !k.is_empty())
    {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.map_err(|e| failed(e.to_string()))?;
    let status = response.status();
    if !status.is_success() {
        return Err(failed(format!("the endpoint answered {status}")));
    }
    let streamed = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let mut reader = StreamReader::default();
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| failed(e.to_string()))?;
        if reader.received + body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(failed(format!(
                "the endpoint sent more than {MAX_RESPONSE_BYTES} bytes"
            )));
        }
        if !streamed {
            body.extend_from_slice(&chunk);
            continue;
        }
        let before = reader.text.len();
        let done = reader.feed(&chunk)?;
        if reader.text.len() > before {
            on_text(reader.text.clone());
        }
        if done {
            break;
        }
    }
    if streamed {
        return Ok(reader.text);
    }
    let value: Value = serde_json::from_slice(&body)
        .map_err(|e| failed(format!("the endpoint's answer is not JSON: {e}")))?;
    value["choices"][0]["message"]["content"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| failed("the endpoint's answer has no choices[0].message.content".into()))
}

/// Reads server-sent events as they arrive, in pieces cut anywhere, keeping the first choice's
/// text.
#[derive(Debug, Default)]
pub struct StreamReader {
    pending: Vec<u8>,
    received: usize,
    pub text: String,
}

impl StreamReader {
    /// Takes the next bytes; `Ok(true)` once `data: [DONE]` has arrived.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<bool, AnswerError> {
        self.received += bytes.len();
        self.pending.extend_from_slice(bytes);
        while let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let Some(data) = line.trim_end().strip_prefix("data:") else {
                // Comments (keep-alives), event names, ids and blank separators carry no text.
                continue;
            };
            let data = data.trim();
            if data == "[DONE]" {
                return Ok(true);
            }
            let chunk: Value = serde_json::from_str(data).map_err(|e| {
                AnswerError::Failed(format!("the endpoint sent a chunk that is not JSON: {e}"))
            })?;
            if let Some(error) = chunk.get("error") {
                return Err(AnswerError::Failed(format!("the endpoint failed: {error}")));
            }
            let first = chunk["choices"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["index"].as_u64().unwrap_or(0) == 0));
            if let Some(piece) = first.and_then(|c| c["delta"]["content"].as_str()) {
                self.text.push_str(piece);
            }
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::StreamReader;

    const STREAM: &str = concat!(
        ": keep-alive\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"A warm \"}}]}\n\n",
        "data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"ignored\"}}]}\n\n",
        "data:{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"blanket, caf\u{e9}.\"}}]}\r\n\r\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"after the end\"}}]}\n\n",
    );

    #[test]
    fn the_first_choices_pieces_make_its_text() {
        let mut reader = StreamReader::default();
        assert!(reader.feed(STREAM.as_bytes()).unwrap());
        assert_eq!(reader.text, "A warm blanket, caf\u{e9}.");
        let mut broken = StreamReader::default();
        assert!(broken.feed(b"data: {not json}\n").is_err());
        let mut failing = StreamReader::default();
        assert!(
            failing
                .feed(b"data: {\"error\": {\"message\": \"busy\"}}\n")
                .is_err()
        );
    }

    proptest! {
        /// Cut anywhere, even inside a character, the stream reads the same.
        #[test]
        fn pieces_cut_anywhere_read_the_same(cuts in proptest::collection::vec(0usize..400, 0..8)) {
            let bytes = STREAM.as_bytes();
            let mut points: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
            points.sort_unstable();
            let mut reader = StreamReader::default();
            let mut start = 0;
            let mut done = false;
            for point in points.into_iter().chain([bytes.len()]) {
                if !done {
                    done = reader.feed(&bytes[start..point]).unwrap();
                }
                start = point;
            }
            prop_assert!(done);
            prop_assert_eq!(reader.text.as_str(), "A warm blanket, caf\u{e9}.");
        }

        /// Whatever an endpoint sends, reading it ends in text or a typed error, never a panic.
        #[test]
        fn any_bytes_are_read_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let mut reader = StreamReader::default();
            let _ = reader.feed(&bytes);
        }
    }
}
