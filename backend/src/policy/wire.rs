//! Pieces shared by the OpenAI and vLLM wire formats: the sampling settings every request body
//! carries, and for the parsers of their answers JSON decoding into typed errors, finish reasons,
//! and logprob dictionaries whose key order matters.
//!
//! The parsers treat the server's bytes as untrusted: any surprise is a
//! [`PolicyError::MalformedResponse`] naming where it was found, never a panic.

use std::fmt;

use serde::de::{DeserializeOwned, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use super::{Finish, PolicyError, PolicyRequest};

/// Error messages quote at most this much of a server's text, so a huge or hostile body cannot
/// flood the logs.
const QUOTE_LIMIT: usize = 200;

/// The sampling settings of a request body, written in its place among the body's own fields
/// (`#[serde(flatten)]`). `stop` is not among them: the servers disagree on an empty list.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sampling {
    pub n: usize,
    pub max_tokens: usize,
    pub temperature: f32,
    pub top_p: f32,
}

impl Sampling {
    pub(crate) fn of(request: &PolicyRequest) -> Self {
        Self {
            n: request.n,
            max_tokens: request.max_tokens,
            temperature: request.temperature,
            top_p: request.top_p,
        }
    }
}

pub(crate) fn malformed(what: impl fmt::Display) -> PolicyError {
    PolicyError::MalformedResponse(what.to_string())
}

/// Decodes `body` as `T`, naming the JSON path of the first problem (`choices[0].logprobs`).
pub(crate) fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, PolicyError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        malformed(format!("at {path}: {}", quote(&e.into_inner().to_string())))
    })?;
    // Trailing garbage after the JSON document is as malformed as a wrong type.
    de.end()
        .map_err(|e| malformed(format!("after the JSON document: {e}")))?;
    Ok(value)
}

/// At most [`QUOTE_LIMIT`] bytes of `text`, cut on a character boundary.
pub(crate) fn quote(text: &str) -> String {
    if text.len() <= QUOTE_LIMIT {
        return text.to_owned();
    }
    let mut end = QUOTE_LIMIT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Maps a finish reason as OpenAI and vLLM spell it.
///
/// `tool_calls`/`function_call` mean the model ended its turn on its own, so they count as `Stop`.
/// vLLM's `abort` (the server gave up) and OpenAI's `content_filter` (the text was withheld) are
/// the server's decisions, so they are server errors rather than bad answers;
/// anything else, `null` included, is not a finished completion.
pub(crate) fn parse_finish(reason: Option<&str>) -> Result<Finish, PolicyError> {
    match reason {
        Some("stop" | "tool_calls" | "function_call") => Ok(Finish::Stop),
        Some("length") => Ok(Finish::Length),
        Some("abort") => Err(PolicyError::Server(
            "the server aborted the generation".into(),
        )),
        Some("content_filter") => Err(PolicyError::Server(
            "the server's content filter withheld the completion".into(),
        )),
        Some(other) => Err(malformed(format!(
            "unknown finish reason {:?}",
            quote(other)
        ))),
        None => Err(malformed("a choice has no finish reason")),
    }
}

/// A logprob must be a real number; JSON cannot carry NaN, but a number that overflows `f64` can
/// still arrive as infinity through some decoders, and a trainer would choke on either.
pub(crate) fn finite(value: f64, what: impl FnOnce() -> String) -> Result<f64, PolicyError> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(malformed(format!("{} is not a finite number", what())))
    }
}

/// A JSON object of `token -> logprob` kept in the server's order.
///
/// vLLM puts the sampled token first in each position's dictionary and atroposlib reads "the first
/// key"; `serde_json::Map` sorts keys unless a crate somewhere enables `preserve_order`, so the
/// order is captured here explicitly instead of depending on feature unification.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OrderedLogprobs(pub Vec<(String, f64)>);

impl<'de> Deserialize<'de> for OrderedLogprobs {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries;

        impl<'de> Visitor<'de> for Entries {
            type Value = OrderedLogprobs;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object mapping tokens to logprobs")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                // The size hint comes from the server; cap it so it cannot force a huge allocation.
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0).min(64));
                while let Some((key, value)) = map.next_entry::<String, f64>()? {
                    entries.push((key, value));
                }
                Ok(OrderedLogprobs(entries))
            }
        }

        deserializer.deserialize_map(Entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logprob_dictionaries_keep_the_servers_key_order() {
        let parsed: OrderedLogprobs =
            serde_json::from_str(r#"{"9": -0.5, "10": -1.5, "1": -2.0}"#).expect("valid");
        let keys: Vec<&str> = parsed.0.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["9", "10", "1"]);
    }

    #[test]
    fn logprob_dictionaries_refuse_non_numbers() {
        assert!(serde_json::from_str::<OrderedLogprobs>(r#"{"9": "x"}"#).is_err());
        assert!(serde_json::from_str::<OrderedLogprobs>(r#"[["9", -1.0]]"#).is_err());
    }

    #[test]
    fn finish_reasons_map_to_the_two_kinds_or_a_typed_error() {
        assert_eq!(parse_finish(Some("stop")).ok(), Some(Finish::Stop));
        assert_eq!(parse_finish(Some("tool_calls")).ok(), Some(Finish::Stop));
        assert_eq!(parse_finish(Some("length")).ok(), Some(Finish::Length));
        assert!(matches!(
            parse_finish(Some("abort")),
            Err(PolicyError::Server(_))
        ));
        assert!(matches!(
            parse_finish(Some("content_filter")),
            Err(PolicyError::Server(_))
        ));
        assert!(matches!(
            parse_finish(Some("banana")),
            Err(PolicyError::MalformedResponse(_))
        ));
        assert!(matches!(
            parse_finish(None),
            Err(PolicyError::MalformedResponse(_))
        ));
    }

    #[test]
    fn decode_names_the_path_of_the_problem_and_refuses_trailing_bytes() {
        #[derive(Debug, Deserialize)]
        struct Outer {
            #[allow(dead_code)]
            inner: Vec<u32>,
        }
        let err = decode::<Outer>(br#"{"inner": [1, "two"]}"#).expect_err("a string is no u32");
        assert!(err.to_string().contains("inner[1]"), "{err}");
        assert!(decode::<Outer>(br#"{"inner": []} x"#).is_err());
        assert!(decode::<Outer>(br#"{"inner": []}"#).is_ok());
    }

    #[test]
    fn quotes_are_bounded_and_cut_on_character_boundaries() {
        let long = "é".repeat(500);
        let q = quote(&long);
        assert!(q.len() <= QUOTE_LIMIT + "…".len());
        assert_eq!(quote("short"), "short");
    }
}
