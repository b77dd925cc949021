//! Battles in Chatbot Arena's public JSONL format, read into [`Vote`]s. Pure: reads from any
//! [`BufRead`], touches nothing else.
//!
//! One JSON object per line with `model_a`, `model_b` and `winner` (`model_a`, `model_b`, `tie` or
//! `tie (bothbad)`); `len_a`/`len_b` (answer lengths, for style control) are optional numbers; every
//! other field is ignored, so the public dumps (which carry conversations, judges, timestamps) read
//! as they are. Blank lines are skipped, as are lines with `"void": true` and, on request, lines
//! whose `excluded` field is a string (our own export marks excluded votes with the reason there).
//! Every error names the 1-based line it was found on.

use std::collections::HashMap;
use std::io::BufRead;

use serde::Deserialize;
use serde_json::Value;

use super::ratings::{Outcome, Vote};

/// The default limit on the file's size: 1 GiB, several times the largest public dump.
pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;
/// The longest model name accepted, in characters.
pub const MAX_NAME_CHARS: usize = 200;
/// The default limit on distinct models. The fit holds a models × models matrix and factorises it
/// every Newton step, so an input with (say) a new name on every line must be refused up front
/// rather than exhaust memory; real leaderboards have a few hundred models.
pub const DEFAULT_MAX_MODELS: usize = 2000;
/// How much of an offending value an error message quotes.
const QUOTE_CHARS: usize = 60;

/// How to read a battles file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseOptions {
    /// Skip lines whose `excluded` field is a string (not null).
    pub skip_excluded: bool,
    /// Require `len_a` and `len_b` on every battle (style control needs them).
    pub require_lengths: bool,
    /// Refuse files larger than this many bytes.
    pub max_bytes: u64,
    /// Refuse files naming more distinct models than this.
    pub max_models: usize,
}

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions {
            skip_excluded: false,
            require_lengths: false,
            max_bytes: DEFAULT_MAX_BYTES,
            max_models: DEFAULT_MAX_MODELS,
        }
    }
}

/// The battles as votes over model indices.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ParsedBattles {
    /// Model names; a vote's `a`/`b` index this list, in order of first appearance.
    pub names: Vec<String>,
    pub votes: Vec<Vote>,
    /// The 1-based line of each vote, so an error about a vote can point at the file.
    pub lines: Vec<usize>,
    /// Lines skipped for `"void": true`.
    pub skipped_void: usize,
    /// Lines skipped for a string `excluded` (only with [`ParseOptions::skip_excluded`]).
    pub skipped_excluded: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum BattlesFileError {
    #[error("cannot read the battles: {0}")]
    Io(#[from] std::io::Error),
    #[error("the battles file is larger than the limit of {max_bytes} bytes")]
    TooLarge { max_bytes: u64 },
    #[error("line {line}: not valid UTF-8")]
    NotUtf8 { line: usize },
    #[error("line {line}: not a JSON object: {message}")]
    NotJson { line: usize, message: String },
    #[error("line {line}: missing field `{field}`")]
    MissingField { line: usize, field: &'static str },
    #[error("line {line}: field `{field}` must be {expected}")]
    WrongType {
        line: usize,
        field: &'static str,
        expected: &'static str,
    },
    #[error(
        "line {line}: unknown winner {winner:?} (expected \"model_a\", \"model_b\", \"tie\" or \
         \"tie (bothbad)\")"
    )]
    UnknownWinner { line: usize, winner: String },
    #[error("line {line}: `{field}` {reason}")]
    InvalidName {
        line: usize,
        field: &'static str,
        reason: &'static str,
    },
    #[error("line {line}: model_a and model_b are the same model, {model:?}")]
    SameModel { line: usize, model: String },
    #[error("line {line}: `{field}` must be a finite non-negative number")]
    InvalidLength { line: usize, field: &'static str },
    #[error("line {line}: style control needs both `len_a` and `len_b`")]
    MissingLength { line: usize },
    #[error("line {line}: more than {max_models} distinct models")]
    TooManyModels { line: usize, max_models: usize },
    #[error("no battles in the file")]
    NoBattles,
}

impl BattlesFileError {
    /// The 1-based line the error is about, if it is about one.
    pub fn line(&self) -> Option<usize> {
        use BattlesFileError::*;
        match self {
            NotUtf8 { line }
            | NotJson { line, .. }
            | MissingField { line, .. }
            | WrongType { line, .. }
            | UnknownWinner { line, .. }
            | InvalidName { line, .. }
            | SameModel { line, .. }
            | InvalidLength { line, .. }
            | MissingLength { line }
            | TooManyModels { line, .. } => Some(*line),
            Io(_) | TooLarge { .. } | NoBattles => None,
        }
    }
}

/// The fields read from a line. Each is a loose [`Value`] so that a wrong type is reported as such
/// (with the field's name) rather than as an opaque decoding error; unknown fields are skipped
/// without being built.
#[derive(Deserialize)]
struct RawBattle {
    model_a: Option<Value>,
    model_b: Option<Value>,
    winner: Option<Value>,
    len_a: Option<Value>,
    len_b: Option<Value>,
    excluded: Option<Value>,
    void: Option<Value>,
}

/// Reads every battle; see the module docs for the format.
pub fn parse_battles<R: BufRead>(
    reader: R,
    options: &ParseOptions,
) -> Result<ParsedBattles, BattlesFileError> {
    // One byte past the limit is read so that a file of exactly the limit is accepted.
    let mut limited = reader.take(options.max_bytes.saturating_add(1));
    let mut parsed = ParsedBattles::default();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut buf = Vec::new();
    let mut total: u64 = 0;
    let mut line = 0;
    loop {
        buf.clear();
        let n = limited.read_until(b'\n', &mut buf)?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if total > options.max_bytes {
            return Err(BattlesFileError::TooLarge {
                max_bytes: options.max_bytes,
            });
        }
        line += 1;
        let text = std::str::from_utf8(&buf).map_err(|_| BattlesFileError::NotUtf8 { line })?;
        // A byte-order mark some editors put at the start of a file is not part of the JSON.
        let text = if line == 1 {
            text.trim_start_matches('\u{feff}')
        } else {
            text
        };
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        match parse_line(text, line, options)? {
            Line::Void => parsed.skipped_void += 1,
            Line::Excluded => parsed.skipped_excluded += 1,
            Line::Battle {
                model_a,
                model_b,
                outcome,
                len_a,
                len_b,
            } => {
                let mut id = |name: String| -> Result<usize, BattlesFileError> {
                    if let Some(&i) = index.get(&name) {
                        return Ok(i);
                    }
                    if parsed.names.len() >= options.max_models {
                        return Err(BattlesFileError::TooManyModels {
                            line,
                            max_models: options.max_models,
                        });
                    }
                    let i = parsed.names.len();
                    parsed.names.push(name.clone());
                    index.insert(name, i);
                    Ok(i)
                };
                let a = id(model_a)?;
                let b = id(model_b)?;
                parsed.votes.push(Vote {
                    a,
                    b,
                    outcome,
                    a_len: len_a,
                    b_len: len_b,
                });
                parsed.lines.push(line);
            }
        }
    }
    if parsed.votes.is_empty() {
        return Err(BattlesFileError::NoBattles);
    }
    Ok(parsed)
}

/// What a non-blank line holds.
enum Line {
    Void,
    Excluded,
    Battle {
        model_a: String,
        model_b: String,
        outcome: Outcome,
        len_a: Option<f64>,
        len_b: Option<f64>,
    },
}

/// Parses one trimmed, non-empty line.
fn parse_line(text: &str, line: usize, options: &ParseOptions) -> Result<Line, BattlesFileError> {
    // Checked first because serde would also accept a JSON array as a struct, field by position.
    if !text.starts_with('{') {
        return Err(BattlesFileError::NotJson {
            line,
            message: "the line does not start with `{`".into(),
        });
    }
    let raw: RawBattle = serde_json::from_str(text).map_err(|e| BattlesFileError::NotJson {
        line,
        message: e.to_string(),
    })?;
    if matches!(raw.void, Some(Value::Bool(true))) {
        return Ok(Line::Void);
    }
    if options.skip_excluded && matches!(raw.excluded, Some(Value::String(_))) {
        return Ok(Line::Excluded);
    }
    let model_a = name(raw.model_a, "model_a", line)?;
    let model_b = name(raw.model_b, "model_b", line)?;
    let winner = match raw.winner {
        None | Some(Value::Null) => {
            return Err(BattlesFileError::MissingField {
                line,
                field: "winner",
            });
        }
        Some(Value::String(s)) => s,
        Some(_) => {
            return Err(BattlesFileError::WrongType {
                line,
                field: "winner",
                expected: "a string",
            });
        }
    };
    let outcome = match winner.as_str() {
        "model_a" => Outcome::AWins,
        "model_b" => Outcome::BWins,
        "tie" => Outcome::Tie,
        "tie (bothbad)" => Outcome::BothBad,
        _ => {
            return Err(BattlesFileError::UnknownWinner {
                line,
                winner: quote(&winner),
            });
        }
    };
    if model_a == model_b {
        return Err(BattlesFileError::SameModel {
            line,
            model: model_a,
        });
    }
    let len_a = length(raw.len_a, "len_a", line)?;
    let len_b = length(raw.len_b, "len_b", line)?;
    if options.require_lengths && (len_a.is_none() || len_b.is_none()) {
        return Err(BattlesFileError::MissingLength { line });
    }
    Ok(Line::Battle {
        model_a,
        model_b,
        outcome,
        len_a,
        len_b,
    })
}

/// A model name: a non-empty string of at most [`MAX_NAME_CHARS`] characters without control
/// characters (which would break the printed table and any log the name ends up in).
fn name(
    value: Option<Value>,
    field: &'static str,
    line: usize,
) -> Result<String, BattlesFileError> {
    let s = match value {
        None | Some(Value::Null) => return Err(BattlesFileError::MissingField { line, field }),
        Some(Value::String(s)) => s,
        Some(_) => {
            return Err(BattlesFileError::WrongType {
                line,
                field,
                expected: "a string",
            });
        }
    };
    let invalid = |reason| BattlesFileError::InvalidName {
        line,
        field,
        reason,
    };
    if s.is_empty() {
        return Err(invalid("is empty"));
    }
    if s.chars().count() > MAX_NAME_CHARS {
        return Err(invalid("is longer than 200 characters"));
    }
    if s.chars().any(char::is_control) {
        return Err(invalid("contains a control character"));
    }
    Ok(s)
}

/// An optional answer length: absent or null is `None`; otherwise a finite non-negative number.
fn length(
    value: Option<Value>,
    field: &'static str,
    line: usize,
) -> Result<Option<f64>, BattlesFileError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(x) if x.is_finite() && x >= 0.0 => Ok(Some(x)),
            _ => Err(BattlesFileError::InvalidLength { line, field }),
        },
        Some(_) => Err(BattlesFileError::WrongType {
            line,
            field,
            expected: "a number",
        }),
    }
}

/// The start of an offending value, for an error message that stays one line long.
fn quote(s: &str) -> String {
    if s.chars().count() <= QUOTE_CHARS {
        s.to_owned()
    } else {
        let mut q: String = s.chars().take(QUOTE_CHARS).collect();
        q.push('…');
        q
    }
}
