//! OpenAI's streamed answers (`"stream": true`): server-sent events, one `data:` chunk per piece
//! of new text per choice, then a chunk with each choice's `finish_reason`, the usage when
//! `stream_options.include_usage` asks for it, and `data: [DONE]`.
//!
//! The request is admitted and charged before the stream starts, so a refusal is an HTTP status
//! as without streaming. Text is sent as the engine samples it, less what might still turn out to
//! be a stop string or half of a character; the finished answer settles the rest. With tools
//! offered, a choice's message (text or `tool_calls`) arrives whole in one chunk when it ends: a
//! call cannot be read before it is complete. A reader that disconnects cancels the generation.

use std::convert::Infallible;

use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use lachesis_inference::{Engine, GenerateRequest, Generation, IncrementalText, StreamedToken};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::InferenceError;
use super::admission::Reservation;
use super::tools::answer_message;

/// OpenAI's `stream_options`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct StreamOptions {
    /// Adds a last chunk, with no choices, carrying the request's usage.
    #[serde(default)]
    pub include_usage: bool,
}

/// What the chunks of one answer look like.
pub struct StreamShape {
    pub id: String,
    pub model: String,
    pub created: u64,
    pub weight_version: i64,
    /// Chat chunks carry `delta`s; legacy completion chunks carry `text`.
    pub chat: bool,
    /// Chat with tools offered: each message arrives whole when its choice ends.
    pub tools_offered: bool,
    pub include_usage: bool,
}

/// Chunks waiting for a slow reader; the generation waits for the reader beyond this.
const BUFFERED_CHUNKS: usize = 64;

/// Runs `request` under `reservation` and answers as a stream of chunks.
pub fn respond(
    engine: Engine,
    reservation: Reservation,
    request: GenerateRequest,
    shape: StreamShape,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let (events, reader) = mpsc::channel::<Event>(BUFFERED_CHUNKS);
    tokio::spawn(async move {
        // An Err means the reader left: returning drops the generation, which cancels it.
        let _ = write(&engine, reservation, request, &shape, &events).await;
    });
    let mut reader = reader;
    // A closed receiver keeps answering `None`, so the stream may be polled after its end.
    let chunks =
        futures::stream::poll_fn(move |cx| reader.poll_recv(cx).map(|event| event.map(Ok)));
    Sse::new(chunks).keep_alive(KeepAlive::default())
}

/// A choice's text as far as it has been sent.
#[derive(Default, Clone)]
struct Sent {
    written: IncrementalText,
    text_len: usize,
}

async fn write(
    engine: &Engine,
    reservation: Reservation,
    request: GenerateRequest,
    shape: &StreamShape,
    events: &mpsc::Sender<Event>,
) -> Result<(), Gone> {
    let n = request.params.n;
    let stops = request.params.stop.clone();
    let (sink, mut tokens) = mpsc::unbounded_channel::<StreamedToken>();
    let generating = reservation.run(engine, request, Some(sink));
    tokio::pin!(generating);
    let mut sent = vec![Sent::default(); n];
    if shape.chat {
        for index in 0..n {
            let delta = json!({"role": "assistant", "content": ""});
            send(events, shape.chunk(index, delta, None)).await?;
        }
    }
    let outcome = loop {
        tokio::select! {
            biased;
            done = &mut generating => break done,
            Some(token) = tokens.recv() => {
                let mut arrived = vec![token];
                while let Ok(more) = tokens.try_recv() {
                    arrived.push(more);
                }
                for token in arrived {
                    if let Some(choice) = sent.get_mut(token.choice) {
                        choice.written.push(token.token);
                    }
                }
                if shape.tools_offered {
                    continue;
                }
                for (index, choice) in sent.iter_mut().enumerate() {
                    let text = readable_text(engine, &mut choice.written, &stops);
                    if let Some(new) = text.get(choice.text_len..).filter(|t| !t.is_empty()) {
                        let chunk = shape.chunk(index, shape.text_delta(new), None);
                        choice.text_len = text.len();
                        send(events, chunk).await?;
                    }
                }
            }
        }
    };
    match outcome {
        Ok(generation) => finish(&generation, &sent, shape, events).await?,
        Err(e) => {
            let error = json!({"error": {"message": e.to_string(), "type": error_kind(&e)}});
            send(events, Event::default().data(error.to_string())).await?;
        }
    }
    send(events, Event::default().data("[DONE]")).await
}

/// Each choice's last text, its finish reason, and the usage when asked for.
async fn finish(
    generation: &Generation,
    sent: &[Sent],
    shape: &StreamShape,
    events: &mpsc::Sender<Event>,
) -> Result<(), Gone> {
    for (index, choice) in generation.choices.iter().enumerate() {
        let finish = choice.finish_reason.as_str();
        if shape.tools_offered {
            let (message, finish) = answer_message(&choice.text, true, finish);
            let mut delta = message;
            if let Some(calls) = delta.get_mut("tool_calls").and_then(Value::as_array_mut) {
                // Streamed calls are numbered, as OpenAI numbers them.
                for (i, call) in calls.iter_mut().enumerate() {
                    call["index"] = json!(i);
                }
            }
            send(events, shape.chunk(index, delta, Some(&finish))).await?;
            continue;
        }
        // The finished text is the truth; the part not sent yet follows what was.
        let already = sent.get(index).map_or(0, |s| s.text_len);
        let rest = choice.text.get(already..).unwrap_or_default();
        if !rest.is_empty() {
            send(events, shape.chunk(index, shape.text_delta(rest), None)).await?;
        }
        let end = if shape.chat { json!({}) } else { json!("") };
        send(events, shape.chunk(index, end, Some(finish))).await?;
    }
    if shape.include_usage {
        let prompt = generation.prompt_tokens.len();
        let completion = generation.completion_tokens();
        let mut last = shape.envelope(Vec::new());
        last["usage"] = json!({
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        });
        send(events, Event::default().data(last.to_string())).await?;
    }
    Ok(())
}

impl StreamShape {
    fn text_delta(&self, text: &str) -> Value {
        if self.chat {
            json!({"content": text})
        } else {
            json!(text)
        }
    }

    /// One choice's chunk: `delta` is a chat delta object, or a legacy completion's text.
    fn chunk(&self, index: usize, delta: Value, finish: Option<&str>) -> Event {
        let choice = if self.chat {
            json!({"index": index, "delta": delta, "logprobs": null, "finish_reason": finish})
        } else {
            json!({"index": index, "text": delta, "logprobs": null, "finish_reason": finish})
        };
        Event::default().data(self.envelope(vec![choice]).to_string())
    }

    fn envelope(&self, choices: Vec<Value>) -> Value {
        let object = if self.chat {
            "chat.completion.chunk"
        } else {
            "text_completion"
        };
        json!({
            "id": self.id,
            "object": object,
            "created": self.created,
            "model": self.model,
            "choices": choices,
            "weight_version": self.weight_version,
        })
    }
}

/// The reader of the stream went away.
struct Gone;

async fn send(events: &mpsc::Sender<Event>, event: Event) -> Result<(), Gone> {
    events.send(event).await.map_err(|_| Gone)
}

/// What of `tokens` can be sent for sure: decoded without the end-of-sequence token, cut at a
/// stop string, and short of a tail that may yet become one (or is half of a character).
fn readable_text(engine: &Engine, written: &mut IncrementalText, stops: &[String]) -> String {
    let tokenizer = engine.tokenizer();
    let ended = written.tokens().last() == Some(&tokenizer.eos_token_id());
    let Ok(mut text) = written.text(tokenizer, ended) else {
        return String::new();
    };
    let safe = sendable_len(&text, stops);
    text.truncate(safe);
    text
}

/// The length of `text` that can be sent: up to the first stop string, and without a trailing
/// replacement character (a character split across tokens) or a tail that begins a stop string.
fn sendable_len(text: &str, stops: &[String]) -> usize {
    let cut = stops
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| text.find(s.as_str()))
        .min()
        .unwrap_or(text.len());
    let mut end = cut;
    if text[..end].ends_with(char::REPLACEMENT_CHARACTER) {
        end -= char::REPLACEMENT_CHARACTER.len_utf8();
    }
    let kept = &text[..end];
    let held = stops
        .iter()
        .flat_map(|stop| {
            stop.char_indices()
                .skip(1)
                .map(|(i, _)| &stop[..i])
                .filter(|head| kept.ends_with(head))
                .map(str::len)
        })
        .max()
        .unwrap_or(0);
    end - held
}

fn error_kind(error: &InferenceError) -> &'static str {
    match error {
        InferenceError::Engine(lachesis_inference::EngineError::Busy(_)) => "server_busy",
        _ => "server_error",
    }
}

#[cfg(test)]
mod tests {
    use super::sendable_len;

    #[test]
    fn text_that_may_become_a_stop_string_waits() {
        let stops = vec!["\n\n".to_string(), "END".to_string()];
        assert_eq!(sendable_len("Hello", &stops), 5);
        assert_eq!(sendable_len("Hello\n", &stops), 5);
        assert_eq!(sendable_len("Hello EN", &stops), 6);
        assert_eq!(sendable_len("Hello\n\nmore", &stops), 5);
        assert_eq!(sendable_len("café\u{FFFD}", &stops), "café".len());
        assert_eq!(sendable_len("plain", &[]), 5);
    }
}
