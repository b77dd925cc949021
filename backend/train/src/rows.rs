//! From trajectory-API groups to training rows: advantages, temperatures and masks, the way
//! Atropos's example trainer reads a `ScoredData`, with the fields it ignores
//! honoured.
//!
//! - Advantages: a group's own token-level `advantages` when it sends them; otherwise its scores
//!   normalised within the group, `(s − mean) / max(std, 1e-8)` (population std) for GRPO and
//!   DAPO, `s − mean` for Dr. GRPO. A group of one sequence has no baseline and keeps its raw
//!   score, as Atropos's trainer does. `overrides[i].set_advantage_to_zero` zeroes a sequence.
//! - Temperature: `overrides[i].temperature`, else `generation_params.temperature`, else
//!   `group_overrides.temperature`, else 1 (Atropos's order).
//! - Trained tokens: those whose mask is not −100 (atroposlib's convention).

use lachesis_shared::atropos::ScoredData;
use serde_json::Value;

use crate::TrainError;
use crate::loss::Variant;

/// atroposlib's mask for positions not trained on (the prompt).
pub const IGNORED: i64 = -100;

/// One sequence ready to train on; every vector has one entry per token.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainRow {
    pub tokens: Vec<u32>,
    pub trained: Vec<bool>,
    /// The sampling engine's logprob of each token; `None` when the group sent none (the
    /// trainer then takes its own logprobs before the update, i.e. assumes on-policy data).
    pub inference_logprobs: Option<Vec<f32>>,
    pub advantages: Vec<f32>,
    pub temperature: f32,
    pub score: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RowOptions {
    pub variant: Variant,
    /// DAPO's dynamic sampling: drop groups whose scores are all equal (no signal).
    pub drop_uniform_groups: bool,
}

/// Rows of every group of a batch, in order; groups that carry no signal may be dropped.
pub fn rows_from_batch(
    groups: &[ScoredData],
    options: RowOptions,
) -> Result<Vec<TrainRow>, TrainError> {
    let mut rows = Vec::new();
    for (g, group) in groups.iter().enumerate() {
        rows.extend(rows_from_group(group, options).map_err(|e| match e {
            TrainError::Batch(msg) => TrainError::Batch(format!("group {g}: {msg}")),
            other => other,
        })?);
    }
    Ok(rows)
}

fn rows_from_group(group: &ScoredData, options: RowOptions) -> Result<Vec<TrainRow>, TrainError> {
    let n = group.tokens.len();
    if group.masks.len() != n || group.scores.len() != n {
        return Err(TrainError::Batch(format!(
            "{n} token rows, {} mask rows, {} scores",
            group.masks.len(),
            group.scores.len()
        )));
    }
    let uniform = group.scores.windows(2).all(|w| w[0] == w[1]);
    if options.drop_uniform_groups && uniform && n > 1 && group.advantages.is_none() {
        return Ok(Vec::new());
    }
    let advantages = sequence_advantages(&group.scores, options.variant);
    let mut rows = Vec::with_capacity(n);
    for (i, &advantage) in advantages.iter().enumerate() {
        let tokens = &group.tokens[i];
        let len = tokens.len();
        let mask = &group.masks[i];
        if mask.len() != len {
            return Err(TrainError::Batch(format!(
                "sequence {i}: {len} tokens but {} masks",
                mask.len()
            )));
        }
        let tokens: Vec<u32> = tokens
            .iter()
            .map(|&t| u32::try_from(t))
            .collect::<Result<_, _>>()
            .map_err(|_| TrainError::Batch(format!("sequence {i}: a token id is out of range")))?;
        let overrides = group.overrides.as_ref().and_then(|o| o.get(i));
        let zeroed = overrides
            .and_then(|o| o.get("set_advantage_to_zero"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let per_token: Vec<f32> = match &group.advantages {
            Some(given) => {
                let row = given
                    .get(i)
                    .ok_or_else(|| TrainError::Batch(format!("no advantages for sequence {i}")))?;
                if row.len() != len {
                    return Err(TrainError::Batch(format!(
                        "sequence {i}: {len} tokens but {} advantages",
                        row.len()
                    )));
                }
                row.iter().map(|&a| a as f32).collect()
            }
            None => vec![advantage as f32; len],
        };
        let per_token = if zeroed { vec![0.0; len] } else { per_token };
        let inference_logprobs = match &group.inference_logprobs {
            Some(all) => {
                let row = all.get(i).ok_or_else(|| {
                    TrainError::Batch(format!("no inference logprobs for sequence {i}"))
                })?;
                if row.len() != len {
                    return Err(TrainError::Batch(format!(
                        "sequence {i}: {len} tokens but {} inference logprobs",
                        row.len()
                    )));
                }
                Some(row.iter().map(|&l| l as f32).collect())
            }
            None => None,
        };
        let temperature = temperature(group, overrides);
        rows.push(TrainRow {
            tokens,
            trained: mask.iter().map(|&m| m != IGNORED).collect(),
            inference_logprobs,
            advantages: per_token,
            temperature,
            score: group.scores[i],
        });
    }
    Ok(rows)
}

/// One advantage per sequence from the group's scores.
pub fn sequence_advantages(scores: &[f64], variant: Variant) -> Vec<f64> {
    let n = scores.len();
    if n <= 1 {
        return scores.to_vec();
    }
    let mean = scores.iter().sum::<f64>() / n as f64;
    let centred = scores.iter().map(|s| s - mean);
    match variant {
        Variant::DrGrpo => centred.collect(),
        Variant::Grpo | Variant::Dapo => {
            let var = scores.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / n as f64;
            let std = var.sqrt().max(1e-8);
            centred.map(|c| c / std).collect()
        }
    }
}

fn temperature(group: &ScoredData, overrides: Option<&serde_json::Map<String, Value>>) -> f32 {
    let from = |map: Option<&serde_json::Map<String, Value>>| {
        map.and_then(|m| m.get("temperature"))
            .and_then(Value::as_f64)
    };
    let t = from(overrides)
        .or_else(|| from(group.generation_params.as_ref()))
        .or_else(|| from(group.group_overrides.as_ref()))
        .unwrap_or(1.0);
    // A greedy (t = 0) or nonsensical temperature trains as t = 1, as Atropos's trainer does.
    if t > 0.0 && t.is_finite() {
        t as f32
    } else {
        1.0
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn group(scores: &[f64]) -> ScoredData {
        let n = scores.len();
        ScoredData {
            tokens: vec![vec![5, 6, 7]; n],
            masks: vec![vec![IGNORED, 6, 7]; n],
            scores: scores.to_vec(),
            inference_logprobs: Some(vec![vec![1.0, -0.5, -0.25]; n]),
            ..ScoredData::default()
        }
    }

    const GRPO: RowOptions = RowOptions {
        variant: Variant::Grpo,
        drop_uniform_groups: false,
    };

    #[test]
    fn scores_become_group_normalised_advantages_per_variant() {
        // mean 0.5, population std 0.5.
        assert_eq!(sequence_advantages(&[1.0, 0.0], Variant::Grpo), [1.0, -1.0]);
        assert_eq!(
            sequence_advantages(&[1.0, 0.0], Variant::DrGrpo),
            [0.5, -0.5]
        );
        assert_eq!(sequence_advantages(&[3.0, 3.0], Variant::Dapo), [0.0, 0.0]);
        assert_eq!(sequence_advantages(&[0.7], Variant::Grpo), [0.7]);
    }

    #[test]
    fn rows_carry_masks_logprobs_and_a_broadcast_advantage() {
        let rows = rows_from_batch(&[group(&[1.0, 0.0])], GRPO).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].trained, [false, true, true]);
        assert_eq!(rows[0].advantages, [1.0; 3]);
        assert_eq!(rows[1].advantages, [-1.0; 3]);
        assert_eq!(
            rows[0].inference_logprobs.as_deref(),
            Some(&[1.0, -0.5, -0.25][..])
        );
        assert_eq!(rows[0].temperature, 1.0);
    }

    #[test]
    fn overrides_zero_advantages_and_set_temperatures_and_given_advantages_win() {
        let mut g = group(&[1.0, 0.0]);
        g.overrides = Some(vec![
            serde_json::from_value(json!({"set_advantage_to_zero": true})).unwrap(),
            serde_json::from_value(json!({"temperature": 0.7})).unwrap(),
        ]);
        g.generation_params = Some(serde_json::from_value(json!({"temperature": 0.9})).unwrap());
        let rows = rows_from_batch(std::slice::from_ref(&g), GRPO).unwrap();
        assert_eq!(rows[0].advantages, [0.0; 3]);
        assert_eq!(rows[0].temperature, 0.9);
        assert_eq!(rows[1].temperature, 0.7);
        g.advantages = Some(vec![vec![0.0, 2.0, 3.0], vec![0.0, -1.0, -1.0]]);
        g.overrides = None;
        let rows = rows_from_batch(&[g], GRPO).unwrap();
        assert_eq!(rows[0].advantages, [0.0, 2.0, 3.0]);
    }

    #[test]
    fn dynamic_sampling_drops_uniform_groups_only_when_asked() {
        let dapo = RowOptions {
            variant: Variant::Dapo,
            drop_uniform_groups: true,
        };
        let batch = [group(&[1.0, 1.0]), group(&[1.0, 0.0])];
        assert_eq!(rows_from_batch(&batch, dapo).unwrap().len(), 2);
        assert_eq!(rows_from_batch(&batch, GRPO).unwrap().len(), 4);
    }

    #[test]
    fn inconsistent_groups_are_typed_errors() {
        let mut g = group(&[1.0, 0.0]);
        g.masks[1].pop();
        assert!(matches!(
            rows_from_batch(&[g], GRPO),
            Err(TrainError::Batch(_))
        ));
        let mut g = group(&[1.0, 0.0]);
        g.tokens[0][0] = -3;
        assert!(matches!(
            rows_from_batch(&[g], GRPO),
            Err(TrainError::Batch(_))
        ));
        let mut g = group(&[1.0, 0.0]);
        g.scores.pop();
        assert!(rows_from_batch(&[g], GRPO).is_err());
    }
}
