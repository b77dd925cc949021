//! The single-turn mode Atropos's community MCP environment trained with: the model sees the
//! tools and the request once and answers with its calls, which are compared with the gold calls
//! (here, the task's plan) without running anything. Every gold call must be matched by a
//! distinct model call that has each of the gold call's keys, with equal values, extra
//! arguments allowed; any unmatched call on either side fails. +1 for a match, -1 otherwise;
//! when a whole group matches, shorter answers are preferred.

use lachesis_shared::tools::{ToolCall, parse_assistant_turn};
use serde_json::{Map, Value};

use super::tasks::PlannedCall;

pub const MATCHED: f64 = 1.0;
pub const MISMATCHED: f64 = -1.0;

/// Whether every key of `gold` is in `model` with an equal value; where both values are objects
/// (the arguments), every gold sub-key must be present and equal, extra model keys allowed.
fn object_matches(model: &Map<String, Value>, gold: &Map<String, Value>) -> bool {
    gold.iter()
        .all(|(key, gold_value)| match (model.get(key), gold_value) {
            (Some(Value::Object(m)), Value::Object(g)) => {
                g.iter().all(|(k, v)| m.get(k).is_some_and(|mv| mv == v))
            }
            (Some(model_value), _) => model_value == gold_value,
            (None, _) => false,
        })
}

fn as_object(name: &str, arguments: &Map<String, Value>) -> Map<String, Value> {
    let mut object = Map::new();
    object.insert("name".into(), Value::String(name.into()));
    object.insert("arguments".into(), Value::Object(arguments.clone()));
    object
}

/// Whether the model's calls match the gold calls one to one.
pub fn calls_match(model: &[ToolCall], gold: &[PlannedCall]) -> bool {
    if model.is_empty() || gold.is_empty() || model.len() != gold.len() {
        return false;
    }
    let mut remaining: Vec<Map<String, Value>> = gold
        .iter()
        .map(|g| as_object(&g.tool, &g.arguments))
        .collect();
    for call in model {
        let candidate = as_object(&call.name, &call.arguments);
        match remaining
            .iter()
            .position(|gold| object_matches(&candidate, gold))
        {
            Some(i) => {
                remaining.swap_remove(i);
            }
            None => return false,
        }
    }
    remaining.is_empty()
}

/// The score of one answer: +1 when its calls parse and match the gold calls, else -1.
pub fn score(completion: &str, gold: &[PlannedCall], max_calls: usize) -> f64 {
    match parse_assistant_turn(completion, max_calls) {
        Ok(turn) if calls_match(&turn.calls, gold) => MATCHED,
        _ => MISMATCHED,
    }
}

/// When every answer of a group matched, scales each by its length: full credit up to half the
/// completion budget, falling linearly to 0 at the whole budget.
pub fn prefer_short(scores: &mut [f64], completion_tokens: &[usize], max_tokens: usize) {
    if scores.is_empty() || scores.iter().any(|&s| s != MATCHED) {
        return;
    }
    let half = (max_tokens as f64 / 2.0).max(1.0);
    for (score, &tokens) in scores.iter_mut().zip(completion_tokens) {
        let tokens = tokens as f64;
        if tokens > half {
            *score = (1.0 - (tokens - half) / half).max(0.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::envs::mcp_tools::sandbox::ServerKind;

    fn gold(tool: &str, arguments: Value) -> PlannedCall {
        PlannedCall {
            server: ServerKind::Filesystem,
            tool: tool.into(),
            arguments: arguments.as_object().cloned().unwrap_or_default(),
        }
    }

    fn turn(calls: &[(&str, Value)]) -> String {
        calls
            .iter()
            .map(|(name, args)| {
                lachesis_shared::tools::render_call(&ToolCall {
                    name: (*name).into(),
                    arguments: args.as_object().cloned().unwrap_or_default(),
                })
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn extra_arguments_are_allowed_but_every_gold_argument_must_be_equal() {
        let g = [gold("write_file", json!({"path": "a.txt", "content": "x"}))];
        let extra = turn(&[(
            "write_file",
            json!({"path": "a.txt", "content": "x", "mode": 1}),
        )]);
        assert_eq!(score(&extra, &g, 8), MATCHED);
        let wrong = turn(&[("write_file", json!({"path": "b.txt", "content": "x"}))]);
        assert_eq!(score(&wrong, &g, 8), MISMATCHED);
        let missing = turn(&[("write_file", json!({"path": "a.txt"}))]);
        assert_eq!(score(&missing, &g, 8), MISMATCHED);
        assert_eq!(score("I would write the file.", &g, 8), MISMATCHED);
        assert_eq!(
            score("<tool_call>{\"name\": \"write_file\"", &g, 8),
            MISMATCHED
        );
    }

    #[test]
    fn calls_match_in_any_order_but_one_to_one() {
        let g = [
            gold("create_directory", json!({"path": "d"})),
            gold("write_file", json!({"path": "d/f", "content": "c"})),
        ];
        let swapped = turn(&[
            ("write_file", json!({"path": "d/f", "content": "c"})),
            ("create_directory", json!({"path": "d"})),
        ]);
        assert_eq!(score(&swapped, &g, 8), MATCHED);
        let doubled = turn(&[
            ("create_directory", json!({"path": "d"})),
            ("create_directory", json!({"path": "d"})),
        ]);
        assert_eq!(score(&doubled, &g, 8), MISMATCHED);
        let extra = format!(
            "{swapped}\n{}",
            turn(&[("list_directory", json!({"path": "."}))])
        );
        assert_eq!(score(&extra, &g, 8), MISMATCHED);
    }

    #[test]
    fn a_group_that_all_matched_prefers_short_answers() {
        let mut scores = [MATCHED, MATCHED, MATCHED];
        prefer_short(&mut scores, &[100, 150, 400], 200);
        assert_eq!(scores, [1.0, 0.5, 0.0]);
        let mut mixed = [MATCHED, MISMATCHED];
        prefer_short(&mut mixed, &[400, 400], 200);
        assert_eq!(mixed, [MATCHED, MISMATCHED]);
    }
}
