//! The scripted designer: a policy that works through the four stages as a careful person
//! would, picking hotspots from the exposed residues the structure stage reports, a binder length,
//! a number of designs and a temperature at random. Played through the same dialogue, services
//! and checks as a model, it shows the environment is solvable and gives groups whose rewards
//! differ; `lachesis protein design` runs it once.

use std::sync::Mutex;

use futures::future::BoxFuture;
use lachesis_inference::ChatMessage;
use lachesis_shared::protein::DesignStage;
use lachesis_shared::tools::{ToolCall, render_call};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value, json};

use crate::envs::mcp_tools::solver::scripted_rollout;
use crate::policy::{Policy, PolicyError, PolicyRequest, Rollout};

pub struct PlanPolicy {
    rng: Mutex<StdRng>,
}

impl PlanPolicy {
    pub fn new(seed: u64) -> Self {
        Self {
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
        }
    }

    /// The next call after `messages`, or the closing answer.
    pub fn next_turn(&self, messages: &[ChatMessage]) -> String {
        let done = messages
            .iter()
            .filter(|m| m.role == "tool" && !m.content.starts_with("Error"))
            .count();
        let Some(stage) = DesignStage::ALL.get(done).copied() else {
            return "The binder is designed and its complex evaluated.".into();
        };
        let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        let arguments = match stage {
            DesignStage::TargetStructure => json!({"sequence": target_sequence(messages)}),
            DesignStage::BinderBackbone => {
                let exposed = exposed_residues(messages);
                let (chain, first, last) = target_chain(messages);
                let count = rng.random_range(2..=4).min(exposed.len());
                let start = if exposed.len() > count {
                    rng.random_range(0..=exposed.len() - count)
                } else {
                    0
                };
                let hotspots: Vec<String> = exposed[start..start + count].to_vec();
                let length = rng.random_range(14..=40);
                json!({
                    "contigs": format!("{chain}{first}-{last}/0 {length}-{}", length + 6),
                    "hotspot_res": hotspots,
                })
            }
            DesignStage::BinderSequence => {
                let temperature = [0.1, 0.2, 0.3, 0.5][rng.random_range(0..4)];
                json!({"num_designs": rng.random_range(2..=8), "sampling_temp": temperature})
            }
            DesignStage::ComplexEvaluation => json!({"relax_prediction": false}),
        };
        render_call(&ToolCall {
            name: stage.tool().into(),
            arguments: match arguments {
                Value::Object(map) => map,
                _ => Map::new(),
            },
        })
    }
}

fn target_sequence(messages: &[ChatMessage]) -> String {
    messages
        .iter()
        .filter(|m| m.role == "user")
        .find_map(|m| {
            m.content
                .lines()
                .find_map(|l| l.strip_prefix("Target sequence: ").map(str::to_string))
        })
        .unwrap_or_default()
}

fn structure_report(messages: &[ChatMessage]) -> &str {
    messages
        .iter()
        .find(|m| m.role == "tool" && m.content.starts_with("Target structure predicted"))
        .map_or("", |m| m.content.as_str())
}

/// The residues the structure stage listed as exposed.
fn exposed_residues(messages: &[ChatMessage]) -> Vec<String> {
    let report = structure_report(messages);
    report
        .split("candidate hotspots): ")
        .nth(1)
        .map(|rest| {
            rest.trim_end_matches('.')
                .split(", ")
                .map(|s| s.trim().trim_end_matches('.').to_string())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// The target's chain and residue range, from `chain A residues 1-29`.
fn target_chain(messages: &[ChatMessage]) -> (String, i64, i64) {
    let report = structure_report(messages);
    let parsed = report.split("chain ").nth(1).and_then(|rest| {
        let mut words = rest.split_whitespace();
        let chain = words.next()?.to_string();
        let _ = words.next()?;
        let range = words.next()?;
        let (first, last) = range.split_once('-')?;
        Some((chain, first.parse().ok()?, last.parse().ok()?))
    });
    parsed.unwrap_or_else(|| ("A".into(), 1, 1))
}

impl Policy for PlanPolicy {
    fn name(&self) -> String {
        "planned-designer".into()
    }

    fn complete(&self, request: PolicyRequest) -> BoxFuture<'_, Result<Vec<Rollout>, PolicyError>> {
        let rollouts = (0..request.n)
            .map(|_| scripted_rollout(&request.messages, self.next_turn(&request.messages)))
            .collect();
        Box::pin(async move { Ok(rollouts) })
    }
}
