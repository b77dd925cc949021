//! Candidate answers to real questions: the answer BFCL's data give, and variations of it that
//! are right or wrong in the ways models go wrong. Which is which is for the reference to say.

use lachesis_shared::tools::ToolCall;
use serde_json::{Map, Value, json};

use super::super::Question;

fn call(name: &str, arguments: Map<String, Value>) -> ToolCall {
    ToolCall {
        name: name.to_string(),
        arguments,
    }
}

/// Each expected call with the first allowed value of each parameter: the answer BFCL's own data
/// says is right. Parameters whose first value is the "may be left out" marker are left out, and
/// so are optional ones the function does not document (BFCL's answers name a few, and its
/// checker rejects them).
pub(super) fn first_values(q: &Question) -> Vec<ToolCall> {
    q.expected
        .iter()
        .map(|e| {
            let documented = |p: &str| {
                q.functions
                    .iter()
                    .find(|f| f.name == e.name)
                    .and_then(|f| f.parameters.get("properties"))
                    .is_some_and(|props| props.get(p).is_some())
            };
            let arguments = e
                .allowed
                .iter()
                .filter(|(p, allowed)| documented(p) || !allowed.contains(&json!("")))
                .filter_map(|(p, allowed)| Some((p.clone(), first_value(allowed)?)))
                .collect();
            call(&e.name, arguments)
        })
        .collect()
}

/// The first allowed value, `None` if that is the marker. Expected objects hold allowed values
/// per key in turn, and so do the objects in expected lists of objects: those are unwrapped too.
fn first_value(allowed: &[Value]) -> Option<Value> {
    let first = allowed.first().filter(|v| **v != "")?;
    Some(unwrap_allowed(first))
}

fn unwrap_allowed(value: &Value) -> Value {
    match value {
        Value::Object(keys) => Value::Object(
            keys.iter()
                .filter_map(|(k, v)| {
                    let v = match v {
                        Value::Array(allowed) => first_value(allowed)?,
                        other => other.clone(),
                    };
                    Some((k.clone(), v))
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(unwrap_allowed).collect()),
        other => other.clone(),
    }
}

fn param_type<'a>(q: &'a Question, function: &str, param: &str) -> Option<&'a str> {
    let doc = q.functions.iter().find(|f| f.name == function)?;
    doc.parameters
        .pointer(&format!("/properties/{param}/type"))
        .and_then(Value::as_str)
}

/// A value of the same kind that no answer is likely to allow.
fn perturb(value: &Value) -> Value {
    match value {
        Value::String(s) => json!(format!("{s} zzq")),
        Value::Number(n) if n.is_f64() => json!(n.as_f64().unwrap_or(0.0) + 1000.5),
        Value::Number(n) => json!(n.as_i64().unwrap_or(0) + 1000),
        Value::Bool(b) => json!(!b),
        Value::Array(items) => {
            let mut items = items.clone();
            items.push(items.first().map(perturb).unwrap_or(json!(7)));
            Value::Array(items)
        }
        Value::Object(map) => {
            let mut map = map.clone();
            map.insert("zzq".into(), json!(1));
            Value::Object(map)
        }
        Value::Null => json!("zzq"),
    }
}

/// Candidate answers to `q`, right and wrong in the ways models go wrong, each labelled.
pub(super) fn candidates(q: &Question) -> Vec<(String, Vec<ToolCall>)> {
    let truth = first_values(q);
    let mut out = vec![
        ("truth".to_string(), truth.clone()),
        ("none".into(), vec![]),
    ];
    let mut extra = truth.clone();
    extra.extend(truth.first().cloned());
    out.push(("extra call".into(), extra));
    if truth.len() > 1 {
        out.push(("reversed".into(), truth.iter().rev().cloned().collect()));
        out.push(("one short".into(), truth[1..].to_vec()));
    }
    // Variations of each call in turn, the others left right.
    for (i, c) in truth.iter().enumerate() {
        let mut vary = |label: String, edit: &dyn Fn(&mut ToolCall)| {
            let mut calls = truth.clone();
            edit(&mut calls[i]);
            out.push((format!("call {i}: {label}"), calls));
        };
        vary("unexpected param".into(), &|c| {
            c.arguments.insert("zzq_extra".into(), json!(1));
        });
        if let Some(other) = q.functions.iter().find(|f| f.name != c.name) {
            let name = other.name.clone();
            vary(format!("calls {name}"), &move |c| c.name = name.clone());
        }
        let doc = q.functions.iter().find(|f| f.name == c.name);
        let required: Vec<String> = doc
            .and_then(|d| d.parameters.get("required"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(String::from))
            .collect();
        if let Some(r) = required.iter().find(|r| c.arguments.contains_key(*r)) {
            let r = r.clone();
            vary(format!("without {r}"), &move |c| {
                c.arguments.remove(&r);
            });
        }
        let optional: Vec<String> = q.expected[i]
            .allowed
            .iter()
            .filter(|(p, allowed)| allowed.contains(&json!("")) && c.arguments.contains_key(*p))
            .map(|(p, _)| p.clone())
            .collect();
        if !optional.is_empty() {
            vary("optional left out".into(), &move |c| {
                for p in &optional {
                    c.arguments.remove(p);
                }
            });
        }
        for (p, value) in &c.arguments {
            let p = p.clone();
            let ty = param_type(q, &c.name, &p).unwrap_or("");
            let set = |v: Value| {
                let p = p.clone();
                move |c: &mut ToolCall| {
                    c.arguments.insert(p.clone(), v.clone());
                }
            };
            vary(format!("{p} perturbed"), &set(perturb(value)));
            if let Some(alt) = q.expected[i].allowed[&p].get(1).filter(|v| *v != "") {
                vary(format!("{p} second allowed"), &set(alt.clone()));
            }
            match value {
                Value::Number(n) if n.is_f64() => {
                    let f = n.as_f64().unwrap_or(0.0);
                    if f.fract() == 0.0 && f.abs() < 1e15 {
                        vary(format!("{p} as int"), &set(json!(f as i64)));
                    }
                    vary(format!("{p} as string"), &set(json!(f.to_string())));
                }
                Value::Number(n) => {
                    let k = n.as_i64().unwrap_or(0);
                    vary(format!("{p} as float"), &set(json!(k as f64)));
                    vary(format!("{p} as string"), &set(json!(k.to_string())));
                    if ty == "integer" && (k == 0 || k == 1) {
                        vary(format!("{p} as bool"), &set(json!(k == 1)));
                    }
                }
                Value::String(s) => {
                    let shouted = format!(" {}, ", s.to_uppercase().replace(' ', "_"));
                    vary(format!("{p} shouted"), &set(json!(shouted)));
                    vary(format!("{p} as list"), &set(json!([s])));
                }
                Value::Array(items) => {
                    let shouted: Vec<Value> = items
                        .iter()
                        .map(|v| match v {
                            Value::String(s) => json!(format!("{}.", s.to_uppercase())),
                            other => other.clone(),
                        })
                        .collect();
                    vary(format!("{p} items shouted"), &set(Value::Array(shouted)));
                    vary(
                        format!("{p} reversed"),
                        &set(json!(items.iter().rev().collect::<Vec<_>>())),
                    );
                    vary(format!("{p} empty"), &set(json!([])));
                }
                Value::Bool(b) => vary(format!("{p} as int"), &set(json!(i32::from(*b)))),
                _ => {}
            }
        }
    }
    out
}
