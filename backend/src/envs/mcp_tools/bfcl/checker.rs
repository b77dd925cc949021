//! BFCL's AST checker, re-implemented over [`ToolCall`]s. The verdicts must agree with the
//! reference (the tests compare them on real questions), so its quirks are kept on purpose:
//!
//! - Values are compared as Python compares the JSON it loaded: `1 == 1.0 == true`, strings
//!   exactly, lists and objects member by member.
//! - Types are Python's: an integer is accepted for a `float` parameter (and becomes one), a float
//!   is not accepted for an `integer`, a boolean is neither.
//! - Where the expected values have another type than the documented one (BFCL's "variables"),
//!   the value may have the expected values' type and is compared without normalisation.
//! - Strings, and strings directly inside lists and objects, are compared after normalisation:
//!   spaces and `,./-_*^` removed, lowercased, `'` read as `"`.
//! - Parallel calls are matched greedily: each expected call, in order, takes the first unmatched
//!   call that satisfies it.
//!
//! Where the reference would raise on data it does not expect (an unknown type name, a call
//! that documents no `items`), this returns [`Mismatch::BadData`], never panics.

use std::cmp::Ordering;

use lachesis_shared::tools::ToolCall;
use serde::Serialize;
use serde_json::{Map, Value};

use super::{Category, ExpectedCall, FunctionDoc};

/// Why calls do not answer a question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Mismatch {
    #[error("{got} calls where {expected} are expected")]
    WrongCount { expected: usize, got: usize },
    #[error("called {got} where {expected} is expected")]
    WrongFunction { expected: String, got: String },
    #[error("{function} needs the parameter {param:?}")]
    MissingRequired { function: String, param: String },
    #[error("{function} was given {param:?}, which it does not take or the answer leaves out")]
    UnexpectedParam { function: String, param: String },
    #[error("{function}'s {param:?} must be of type {expected}")]
    WrongType {
        function: String,
        param: String,
        expected: String,
    },
    #[error("{function}'s {param:?} has a value the answer does not allow")]
    ValueNotAllowed { function: String, param: String },
    #[error("{function} left out {param:?}, which the answer needs")]
    MissingExpected { function: String, param: String },
    #[error("no call matches expected call {index} ({function}): {closest}")]
    NoMatch {
        index: usize,
        function: String,
        /// Why the last candidate tried failed.
        closest: Box<Mismatch>,
    },
    #[error("the question's data cannot be checked: {reason}")]
    BadData { reason: String },
}

/// Whether `calls` answer a question of `category` offering `functions` and expecting `expected`.
pub fn check(
    category: Category,
    functions: &[FunctionDoc],
    expected: &[ExpectedCall],
    calls: &[ToolCall],
) -> Result<(), Mismatch> {
    match category {
        Category::SimplePython => {
            if calls.len() != 1 {
                return Err(Mismatch::WrongCount {
                    expected: 1,
                    got: calls.len(),
                });
            }
            // BFCL judges a simple question against its only function, whatever the answer names.
            let (Some(doc), Some(want)) = (functions.first(), expected.first()) else {
                return Err(bad("a simple question without a function or an answer"));
            };
            check_call(doc, &calls[0], want)
        }
        Category::Multiple => {
            if calls.len() != expected.len() {
                return Err(Mismatch::WrongCount {
                    expected: expected.len(),
                    got: calls.len(),
                });
            }
            let Some(want) = expected.first() else {
                return Err(bad("a question without an answer"));
            };
            check_call(find_doc(functions, &want.name)?, &calls[0], want)
        }
        Category::Parallel | Category::ParallelMultiple => {
            check_unordered(functions, expected, calls)
        }
    }
}

fn bad(reason: impl Into<String>) -> Mismatch {
    Mismatch::BadData {
        reason: reason.into(),
    }
}

fn find_doc<'a>(functions: &'a [FunctionDoc], name: &str) -> Result<&'a FunctionDoc, Mismatch> {
    functions
        .iter()
        .find(|f| f.name == name)
        .ok_or_else(|| bad(format!("the answer calls {name}, which is not offered")))
}

/// Every expected call matched by a distinct call, greedily in the expected order (as the
/// reference does: an optimal matching could accept what it rejects).
fn check_unordered(
    functions: &[FunctionDoc],
    expected: &[ExpectedCall],
    calls: &[ToolCall],
) -> Result<(), Mismatch> {
    if calls.len() != expected.len() {
        return Err(Mismatch::WrongCount {
            expected: expected.len(),
            got: calls.len(),
        });
    }
    let mut used = vec![false; calls.len()];
    for (index, want) in expected.iter().enumerate() {
        let doc = find_doc(functions, &want.name)?;
        let mut closest = None;
        let found = calls.iter().enumerate().find(|(j, call)| {
            if used[*j] {
                return false;
            }
            match check_call(doc, call, want) {
                Ok(()) => true,
                Err(e) => {
                    closest = Some(e);
                    false
                }
            }
        });
        match found {
            Some((j, _)) => used[j] = true,
            None => {
                return Err(Mismatch::NoMatch {
                    index,
                    function: want.name.clone(),
                    closest: Box::new(closest.unwrap_or_else(|| bad("no call left to match"))),
                });
            }
        }
    }
    Ok(())
}

/// One call against one documented function and its expected values.
fn check_call(doc: &FunctionDoc, call: &ToolCall, want: &ExpectedCall) -> Result<(), Mismatch> {
    let function = || doc.name.clone();
    if call.name != doc.name {
        return Err(Mismatch::WrongFunction {
            expected: doc.name.clone(),
            got: call.name.clone(),
        });
    }
    let empty = Map::new();
    let properties = doc
        .parameters
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required = doc.parameters.get("required").and_then(Value::as_array);
    for param in required.into_iter().flatten().filter_map(Value::as_str) {
        if !call.arguments.contains_key(param) {
            return Err(Mismatch::MissingRequired {
                function: function(),
                param: param.to_string(),
            });
        }
    }
    for (param, value) in &call.arguments {
        let (Some(schema), Some(allowed)) = (properties.get(param), want.allowed.get(param)) else {
            return Err(Mismatch::UnexpectedParam {
                function: function(),
                param: param.clone(),
            });
        };
        if !check_param(&doc.name, param, schema, value, allowed)? {
            return Err(Mismatch::ValueNotAllowed {
                function: function(),
                param: param.clone(),
            });
        }
    }
    for (param, allowed) in &want.allowed {
        if !call.arguments.contains_key(param) && !allowed.iter().any(is_empty_str) {
            return Err(Mismatch::MissingExpected {
                function: function(),
                param: param.clone(),
            });
        }
    }
    Ok(())
}

/// Python's type of a JSON value as `json.loads` gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PyType {
    Str,
    Int,
    Float,
    Bool,
    List,
    Dict,
    None,
}

impl PyType {
    fn of(value: &Value) -> PyType {
        match value {
            Value::Null => PyType::None,
            Value::Bool(_) => PyType::Bool,
            Value::Number(n) if n.is_f64() => PyType::Float,
            Value::Number(_) => PyType::Int,
            Value::String(_) => PyType::Str,
            Value::Array(_) => PyType::List,
            Value::Object(_) => PyType::Dict,
        }
    }

    /// The Python type BFCL reads a documented type name as (`any` is checked as a string).
    fn documented(name: &str) -> Option<PyType> {
        Some(match name {
            "string" | "any" => PyType::Str,
            "integer" => PyType::Int,
            "float" => PyType::Float,
            "boolean" => PyType::Bool,
            "array" | "tuple" => PyType::List,
            "dict" => PyType::Dict,
            _ => return None,
        })
    }
}

fn is_empty_str(value: &Value) -> bool {
    matches!(value, Value::String(s) if s.is_empty())
}

/// The type of the first expected value that is not the "may be left out" marker.
fn answer_type(allowed: &[Value]) -> Option<PyType> {
    allowed.iter().find(|v| !is_empty_str(v)).map(PyType::of)
}

/// Type-checks one parameter, then compares its value with the allowed ones. `Ok(false)`: the
/// type is right but the value is not allowed.
fn check_param(
    function: &str,
    param: &str,
    schema: &Value,
    value: &Value,
    allowed: &[Value],
) -> Result<bool, Mismatch> {
    let type_name = schema
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| bad(format!("{function}'s {param:?} has no type")))?;
    let documented = PyType::documented(type_name).ok_or_else(|| {
        bad(format!(
            "{function}'s {param:?} has unknown type {type_name:?}"
        ))
    })?;
    let nested = if matches!(type_name, "array" | "tuple") {
        let inner = schema
            .pointer("/items/type")
            .and_then(Value::as_str)
            .ok_or_else(|| bad(format!("{function}'s {param:?} has no item type")))?;
        Some(PyType::documented(inner).ok_or_else(|| {
            bad(format!(
                "{function}'s {param:?} has unknown item type {inner:?}"
            ))
        })?)
    } else {
        None
    };
    // Python would convert an int passed for a float; the value compared is the converted one.
    let converted;
    let value = match value {
        Value::Number(n) if type_name == "float" && !n.is_f64() => {
            let as_float = n
                .as_i64()
                .map(|i| i as f64)
                .or_else(|| n.as_u64().map(|u| u as f64));
            converted = as_float
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number);
            converted.as_ref().unwrap_or(value)
        }
        _ => value,
    };
    let wrong_type = || Mismatch::WrongType {
        function: function.to_string(),
        param: param.to_string(),
        expected: type_name.to_string(),
    };
    let expected_type = answer_type(allowed);
    // Expected values of another type than documented are "variables": compared as they are.
    let mut variable = expected_type.is_some_and(|t| t != documented);
    let actual = PyType::of(value);
    if actual == documented {
        if let Some(inner) = nested
            && !items_fit(value, allowed, inner)
        {
            return Err(wrong_type());
        }
    } else if expected_type == Some(actual) {
        variable = true;
    } else {
        return Err(wrong_type());
    }
    if !variable {
        match (documented, nested) {
            (PyType::Dict, _) => return Ok(dict_allowed(value, allowed)),
            (PyType::List, Some(PyType::Dict)) => return Ok(list_of_dicts_allowed(value, allowed)),
            (PyType::Str, _) => {
                let got = value.as_str().map(normalise);
                let allowed = allowed.iter().filter_map(Value::as_str).map(normalise);
                return Ok(got.is_some_and(|got| allowed.into_iter().any(|a| a == got)));
            }
            (PyType::List, _) => return Ok(list_allowed(value, allowed)),
            _ => {}
        }
    }
    Ok(allowed.iter().any(|a| py_eq(value, a)))
}

/// One level of item typing: the items fit if some expected value is not a list, or every item
/// has the documented item type or the type of that expected list's first element.
fn items_fit(value: &Value, allowed: &[Value], inner: PyType) -> bool {
    let items = value.as_array().map(Vec::as_slice).unwrap_or_default();
    allowed.iter().any(|answer| match answer {
        Value::Array(answer) => {
            let answer_type = answer_type(answer);
            items.iter().all(|item| {
                let t = PyType::of(item);
                t == inner || answer_type == Some(t)
            })
        }
        _ => true,
    })
}

/// BFCL's string normalisation: spaces and `,./-_*^` dropped, lowercased, `'` read as `"`.
pub fn normalise(s: &str) -> String {
    let kept: String = s
        .chars()
        .filter(|c| !matches!(c, ' ' | ',' | '.' | '/' | '-' | '_' | '*' | '^'))
        .collect();
    kept.to_lowercase().replace('\'', "\"")
}

/// A value with its strings normalised, the rest as it is.
fn normalised(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(normalise(s)),
        other => other.clone(),
    }
}

/// The list's string items normalised; an expected value that is a string is read as the list of
/// its characters (Python iterates it so), anything else cannot be a list.
fn normalised_list(value: &Value) -> Option<Vec<Value>> {
    match value {
        Value::Array(items) => Some(items.iter().map(normalised).collect()),
        Value::String(s) => Some(
            s.chars()
                .map(|c| Value::String(normalise(&c.to_string())))
                .collect(),
        ),
        _ => None,
    }
}

fn list_allowed(value: &Value, allowed: &[Value]) -> bool {
    let Some(got) = normalised_list(value) else {
        return false;
    };
    let got = Value::Array(got);
    allowed
        .iter()
        .filter_map(normalised_list)
        .any(|a| py_eq(&got, &Value::Array(a)))
}

/// An object matches an expected object if each of its keys is expected with an allowed value
/// (strings normalised) and each expected key it lacks may be left out.
fn dict_allowed(value: &Value, allowed: &[Value]) -> bool {
    let Some(got) = value.as_object() else {
        return false;
    };
    allowed.iter().filter(|a| !is_empty_str(a)).any(|answer| {
        let Some(answer) = answer.as_object() else {
            return false;
        };
        let keys_allowed = got.iter().all(|(key, v)| {
            let Some(options) = answer.get(key).and_then(normalised_list) else {
                return false;
            };
            let v = normalised(v);
            options.iter().any(|o| py_eq(&v, o))
        });
        keys_allowed
            && answer
                .iter()
                .all(|(key, options)| got.contains_key(key) || may_be_left_out(options))
    })
}

/// Python's `"" in options` for whatever `options` is.
fn may_be_left_out(options: &Value) -> bool {
    match options {
        Value::Array(items) => items.iter().any(is_empty_str),
        // The empty string is in every string.
        Value::String(_) => true,
        Value::Object(keys) => keys.contains_key(""),
        _ => false,
    }
}

/// A list of objects matches an expected list of the same length whose objects it matches in
/// order; the "may be left out" marker counts as an empty list.
fn list_of_dicts_allowed(value: &Value, allowed: &[Value]) -> bool {
    let Some(got) = value.as_array() else {
        return false;
    };
    allowed.iter().any(|answer| {
        let answer: &[Value] = match answer {
            Value::Array(items) => items,
            a if is_empty_str(a) => &[],
            _ => return false,
        };
        answer.len() == got.len()
            && got
                .iter()
                .zip(answer)
                .all(|(item, expected)| dict_allowed(item, std::slice::from_ref(expected)))
    })
}

/// Python's `==` between values `json.loads` produced: numbers and booleans by numeric value,
/// lists and objects member by member.
pub fn py_eq(a: &Value, b: &Value) -> bool {
    if let (Some(x), Some(y)) = (Num::of(a), Num::of(b)) {
        return x.cmp_eq(y);
    }
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| py_eq(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| py_eq(v, w)))
        }
        _ => false,
    }
}

#[derive(Clone, Copy)]
enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    fn of(value: &Value) -> Option<Num> {
        match value {
            Value::Bool(b) => Some(Num::Int(i128::from(*b))),
            Value::Number(n) if n.is_f64() => n.as_f64().map(Num::Float),
            Value::Number(n) => n
                .as_i64()
                .map(i128::from)
                .or_else(|| n.as_u64().map(i128::from))
                .map(Num::Int),
            _ => None,
        }
    }

    /// Exact comparison, as Python compares an int with a float (no rounding of the int).
    fn cmp_eq(self, other: Num) -> bool {
        match (self, other) {
            (Num::Int(x), Num::Int(y)) => x == y,
            (Num::Float(x), Num::Float(y)) => x.partial_cmp(&y) == Some(Ordering::Equal),
            (Num::Int(i), Num::Float(f)) | (Num::Float(f), Num::Int(i)) => {
                // Every i64/u64 lies well inside ±2^100, where an integral f64 converts exactly.
                f.fract() == 0.0 && f.abs() < 1e30 && f as i128 == i
            }
        }
    }
}
