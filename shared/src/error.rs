//! The error body every HTTP boundary of Lachesis answers with.
//!
//! It keeps FastAPI's shape (`{"detail": ...}`) because Atropos clients already parse it: `detail` is a
//! sentence for most errors and a list of field issues for invalid request bodies (HTTP 422).

use serde::{Deserialize, Serialize};

/// The JSON body of every non-2xx answer: `{"detail": ...}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What went wrong: a sentence, or the field issues of a rejected body.
    pub detail: ErrorDetail,
}

/// `detail`'s two shapes, told apart by JSON type (untagged): a string or an array.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ErrorDetail {
    /// A sentence for a person, e.g. `run not found`.
    Message(String),
    /// A request body failed validation (HTTP 422): one entry per problem.
    Fields(Vec<FieldIssue>),
}

/// One problem in a request body, as FastAPI/pydantic report it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldIssue {
    /// Machine-readable kind, pydantic's names: `missing`, `json_invalid`, `int_type`, `list_type`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// Where the problem is: `["body", "tokens", 0, 3]`.
    pub loc: Vec<serde_json::Value>,
    /// The problem in words, e.g. `Field required`.
    pub msg: String,
}

impl ErrorBody {
    /// A body whose `detail` is the sentence `text`.
    pub fn message(text: impl Into<String>) -> Self {
        Self {
            detail: ErrorDetail::Message(text.into()),
        }
    }

    /// A one-line summary, for logs and for showing the error to a person.
    pub fn summary(&self) -> String {
        match &self.detail {
            ErrorDetail::Message(text) => text.clone(),
            ErrorDetail::Fields(issues) => issues
                .iter()
                .map(|issue| {
                    let loc: Vec<String> = issue
                        .loc
                        .iter()
                        .map(|part| match part {
                            serde_json::Value::String(s) => s.clone(),
                            other => other.to_string(),
                        })
                        .collect();
                    format!("{}: {}", loc.join("."), issue.msg)
                })
                .collect::<Vec<_>>()
                .join("; "),
        }
    }
}
