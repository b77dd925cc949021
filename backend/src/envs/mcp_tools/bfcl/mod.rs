//! The Berkeley Function Calling Leaderboard's single-turn, non-live categories as an evaluation of
//! tool calling: each question offers a few functions and asks for one or more calls, and the
//! calls are judged the way BFCL's AST checker judges them (right function, allowed values, no
//! stray or missing parameters), re-implemented in [`checker`].
//!
//! The data come from the `bfcl-eval` wheel (Apache-2.0), unpacked by
//! `scripts/ensure-bfcl-data.sh`: one JSON object per line in `BFCL_v4_<category>.json`, with the
//! answers in `possible_answer/` under the same name and in the same order.

pub mod checker;
mod eval;
pub mod schema;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use lachesis_inference::ChatMessage;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::policy::PolicyError;

pub use checker::{Mismatch, check};
pub use eval::{BfclReport, CategoryScore, MIN_MAX_TOKENS, QuestionOutcome, evaluate, metrics};
pub use schema::tool_spec;

/// Where the data are looked for when `LACHESIS_BFCL_DIR` is unset, relative to the working
/// directory (the repository root for the CLI and the scripts).
pub const DEFAULT_DIR: &str = ".venv/bfcl/bfcl_eval/data";

/// The environment variable naming the data directory.
pub const DIR_VAR: &str = "LACHESIS_BFCL_DIR";

/// A BFCL category. Which checker applies follows from it: one call, one call chosen among
/// several functions, several calls to one function in any order, several calls to several.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    SimplePython,
    Multiple,
    Parallel,
    ParallelMultiple,
}

impl Category {
    pub const ALL: [Category; 4] = [
        Category::SimplePython,
        Category::Multiple,
        Category::Parallel,
        Category::ParallelMultiple,
    ];

    /// BFCL's name for it, as in its file names and our metric names.
    pub fn name(self) -> &'static str {
        match self {
            Category::SimplePython => "simple_python",
            Category::Multiple => "multiple",
            Category::Parallel => "parallel",
            Category::ParallelMultiple => "parallel_multiple",
        }
    }

    fn file_name(self) -> String {
        format!("BFCL_v4_{}.json", self.name())
    }
}

impl core::fmt::Display for Category {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// A function as BFCL documents it. Its `parameters` keep BFCL's Python-flavoured type names
/// (`dict`, `float`, `tuple`, `any`): the checker needs them as they are, and [`tool_spec`]
/// translates them for the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionDoc {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub parameters: Value,
}

/// One call the answer expects: the function, and for each parameter the values accepted (the
/// empty string among them marks the parameter as one that may be left out).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExpectedCall {
    pub name: String,
    pub allowed: BTreeMap<String, Vec<Value>>,
}

/// One question with its answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Question {
    pub id: String,
    pub category: Category,
    pub messages: Vec<ChatMessage>,
    pub functions: Vec<FunctionDoc>,
    pub expected: Vec<ExpectedCall>,
}

/// Why the data cannot be read, or an evaluation cannot finish.
#[derive(Debug, thiserror::Error)]
pub enum BfclError {
    #[error(
        "cannot read {path}: {source} (run scripts/ensure-bfcl-data.sh and set {DIR_VAR} to the \
         directory it prints)"
    )]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}, line {line}: {reason}")]
    Malformed {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    #[error("{category}: {questions} questions but {answers} answers")]
    CountMismatch {
        category: Category,
        questions: usize,
        answers: usize,
    },
    #[error("{category}: question {question} is paired with the answer to {answer}")]
    IdMismatch {
        category: Category,
        question: String,
        answer: String,
    },
    #[error("the policy failed: {0}")]
    Policy(#[from] PolicyError),
}

/// The data directory: `LACHESIS_BFCL_DIR` if set, else [`DEFAULT_DIR`]; absolute, so messages
/// about it say exactly where it was looked for.
pub fn data_dir() -> PathBuf {
    let dir = std::env::var_os(DIR_VAR)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_DIR));
    std::path::absolute(&dir).unwrap_or(dir)
}

#[derive(Deserialize)]
struct RawQuestion {
    id: String,
    question: Vec<Vec<ChatMessage>>,
    function: Vec<FunctionDoc>,
}

#[derive(Deserialize)]
struct RawAnswer {
    id: String,
    ground_truth: Vec<BTreeMap<String, BTreeMap<String, Vec<Value>>>>,
}

/// The questions of `category` in `dir`, in the file's order, paired with their answers.
pub fn load(dir: &Path, category: Category) -> Result<Vec<Question>, BfclError> {
    let questions_path = dir.join(category.file_name());
    let answers_path = dir.join("possible_answer").join(category.file_name());
    let questions: Vec<RawQuestion> = read_lines(&questions_path)?;
    let answers: Vec<RawAnswer> = read_lines(&answers_path)?;
    if questions.len() != answers.len() {
        return Err(BfclError::CountMismatch {
            category,
            questions: questions.len(),
            answers: answers.len(),
        });
    }
    questions
        .into_iter()
        .zip(answers)
        .enumerate()
        .map(|(i, (question, answer))| {
            if question.id != answer.id {
                return Err(BfclError::IdMismatch {
                    category,
                    question: question.id,
                    answer: answer.id,
                });
            }
            let expected = answer
                .ground_truth
                .into_iter()
                .map(|call| {
                    // Each expected call is an object with the function's name as its only key.
                    let mut entries = call.into_iter();
                    match (entries.next(), entries.next()) {
                        (Some((name, allowed)), None) => Ok(ExpectedCall { name, allowed }),
                        _ => Err(BfclError::Malformed {
                            path: answers_path.clone(),
                            line: i + 1,
                            reason: "an expected call is not an object with one key".into(),
                        }),
                    }
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Question {
                id: question.id,
                category,
                // Single-turn categories have one turn; any others are joined in order.
                messages: question.question.into_iter().flatten().collect(),
                functions: question.function,
                expected,
            })
        })
        .collect()
}

fn read_lines<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Vec<T>, BfclError> {
    let text = std::fs::read_to_string(path).map_err(|source| BfclError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line).map_err(|e| BfclError::Malformed {
                path: path.to_path_buf(),
                line: i + 1,
                reason: e.to_string(),
            })
        })
        .collect()
}
