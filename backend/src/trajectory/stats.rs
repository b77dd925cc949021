//! The numbers of a scored group that the dashboards keep (`group_stats`): scores, one advantage
//! per sequence, and the token count. Computed on the ingest path from already-validated JSON, so
//! they must be cheap: the token count is a byte scan, not a parse.

use lachesis_shared::atropos::ScoredData;
use serde_json::value::RawValue;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct GroupStats {
    pub scores: Vec<f64>,
    /// Each sequence's mean per-token advantage, when the group carries advantages.
    pub advantages: Option<Vec<f64>>,
    pub tokens: i64,
}

impl GroupStats {
    /// From the raw fields of a group that passed the syntax checks.
    pub fn from_raw(tokens: &RawValue, scores: &RawValue, advantages: Option<&RawValue>) -> Self {
        let advantages = advantages
            .and_then(|raw| serde_json::from_str::<Option<Vec<Vec<f64>>>>(raw.get()).ok())
            .flatten()
            .map(|per_token| per_token.iter().map(|seq| mean(seq)).collect());
        GroupStats {
            scores: serde_json::from_str(scores.get()).unwrap_or_default(),
            advantages,
            tokens: count_numbers(tokens.get()),
        }
    }

    pub fn from_typed(group: &ScoredData) -> Self {
        GroupStats {
            scores: group.scores.clone(),
            advantages: group
                .advantages
                .as_ref()
                .map(|per_token| per_token.iter().map(|seq| mean(seq)).collect()),
            tokens: group.tokens.iter().map(|t| t.len() as i64).sum(),
        }
    }
}

fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

/// Numbers in a JSON array of arrays of numbers (validated beforehand): each number starts right
/// after a `[` or a `,`, whitespace aside.
fn count_numbers(text: &str) -> i64 {
    let mut count = 0;
    let mut after_opener = false;
    for byte in text.bytes() {
        match byte {
            b'[' | b',' => after_opener = true,
            b' ' | b'\t' | b'\n' | b'\r' => {}
            b'-' | b'0'..=b'9' if after_opener => {
                count += 1;
                after_opener = false;
            }
            _ => after_opener = false,
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_string()).unwrap()
    }

    #[test]
    fn raw_and_typed_groups_give_the_same_numbers() {
        let tokens = "[[1, 2, 3], [ -4,5 ], []]";
        let scores = "[1.0, -0.5, 0]";
        let advantages = "[[0.5, 1.5], [-1], []]";
        let from_raw = GroupStats::from_raw(&raw(tokens), &raw(scores), Some(&raw(advantages)));
        let typed = ScoredData {
            tokens: serde_json::from_str(tokens).unwrap(),
            scores: serde_json::from_str(scores).unwrap(),
            advantages: serde_json::from_str(advantages).unwrap(),
            ..ScoredData::default()
        };
        assert_eq!(from_raw, GroupStats::from_typed(&typed));
        assert_eq!(from_raw.tokens, 5);
        assert_eq!(from_raw.advantages, Some(vec![1.0, -1.0, 0.0]));
        let without = GroupStats::from_raw(&raw(tokens), &raw(scores), Some(&raw("null")));
        assert_eq!(without.advantages, None);
    }
}
