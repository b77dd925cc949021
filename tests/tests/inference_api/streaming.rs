//! Streamed answers (`"stream": true`): server-sent events whose pieces, put together, are the
//! answer the same request gets unstreamed, ending with each choice's finish reason, the usage
//! when asked for, and `[DONE]`.

use lachesis_tests::TestApp;
use serde_json::{Value, json};

use super::app_with_model;

/// The `data:` payloads of a streamed answer, in order, with the response's content type.
async fn stream(app: &TestApp, path: &str, body: &Value) -> (String, Vec<String>) {
    let response = app
        .client
        .post(app.url(path))
        .json(body)
        .send()
        .await
        .expect("the server answers");
    assert_eq!(response.status().as_u16(), 200, "{path}");
    let kind = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let text = response.text().await.expect("a body");
    let data = text
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(str::to_string)
        .collect();
    (kind, data)
}

/// Each choice's pieces of text put together, and its finish reasons.
fn assemble(
    chunks: &[Value],
    n: usize,
    piece: impl Fn(&Value) -> Option<&str>,
) -> Vec<(String, Vec<String>)> {
    let mut choices = vec![(String::new(), Vec::new()); n];
    for chunk in chunks {
        for choice in chunk["choices"].as_array().expect("choices") {
            let index = choice["index"].as_u64().expect("an index") as usize;
            if let Some(text) = piece(choice) {
                choices[index].0.push_str(text);
            }
            if let Some(finish) = choice["finish_reason"].as_str() {
                choices[index].1.push(finish.to_string());
            }
        }
    }
    choices
}

#[tokio::test]
async fn a_streamed_chat_answer_is_the_unstreamed_answer_in_pieces() {
    let app = app_with_model().await;
    let body = json!({
        "messages": [{"role": "user", "content": "Name three colours and say why you like them."}],
        "max_tokens": 40, "temperature": 0, "n": 2,
    });
    let whole = app.post("/v1/chat/completions", &body).await;
    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    streamed["stream_options"] = json!({"include_usage": true});
    let (kind, data) = stream(&app, "/v1/chat/completions", &streamed).await;
    assert!(kind.starts_with("text/event-stream"), "{kind}");
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).expect("a JSON chunk"))
        .collect();
    for chunk in &chunks {
        assert_eq!(chunk["object"], "chat.completion.chunk", "{chunk}");
        assert_eq!(chunk["id"], chunks[0]["id"], "one id for every chunk");
    }
    // The first chunk of each choice names the role.
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let pieces = assemble(&chunks, 2, |c| c["delta"]["content"].as_str());
    for (index, (text, finishes)) in pieces.iter().enumerate() {
        assert_eq!(
            text.as_str(),
            whole["choices"][index]["message"]["content"]
                .as_str()
                .unwrap(),
            "choice {index}"
        );
        assert_eq!(
            finishes,
            &vec![
                whole["choices"][index]["finish_reason"]
                    .as_str()
                    .unwrap()
                    .to_string()
            ]
        );
    }
    // Text came in many pieces, not one.
    let text_chunks = chunks
        .iter()
        .filter(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|t| !t.is_empty())
        })
        .count();
    assert!(text_chunks >= 5, "{text_chunks} pieces of text");
    // The last chunk carries the usage, with no choices.
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"], json!([]));
    assert_eq!(last["usage"], whole["usage"], "{last}");
}

#[tokio::test]
async fn streamed_completions_hold_back_a_stop_string_and_end_where_the_answer_does() {
    let app = app_with_model().await;
    let body = json!({"prompt": "1, 2, 3, 4,", "max_tokens": 24, "temperature": 0,
        "stop": [" 9"]});
    let whole = app.post("/v1/completions", &body).await;
    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let (_, data) = stream(&app, "/v1/completions", &streamed).await;
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).expect("a JSON chunk"))
        .collect();
    assert!(chunks.iter().all(|c| c["object"] == "text_completion"));
    assert!(
        chunks.iter().all(|c| c.get("usage").is_none()),
        "no usage unless asked"
    );
    let pieces = assemble(&chunks, 1, |c| c["text"].as_str());
    let expected = whole["choices"][0]["text"].as_str().unwrap();
    assert_eq!(pieces[0].0, expected);
    assert!(!pieces[0].0.contains(" 9"), "{}", pieces[0].0);
    assert_eq!(
        pieces[0].1,
        vec![
            whole["choices"][0]["finish_reason"]
                .as_str()
                .unwrap()
                .to_string()
        ]
    );
}
