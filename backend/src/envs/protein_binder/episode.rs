//! One design episode: the model is given a target sequence and the four tools, and calls them
//! turn by turn, choosing each call's arguments. A malformed turn, a call out of order or one
//! whose arguments fail their checks is answered with the reason and costs a penalty; a service
//! failure is reported and the stage may be tried again. The episode ends with the complex
//! scored, or when turns, retries or the budget run out.

use lachesis_inference::ChatMessage;
use lachesis_shared::live::LiveEvent;
use lachesis_shared::protein::{
    DesignStage, ProteinEpisodeEvent, ProteinEpisodeStep, StructureTrace,
};
use lachesis_shared::tools::{ToolSpec, check_call, parse_assistant_turn};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::nim::client::{EpisodeBudget, NimClient};
use super::pipeline::{self, CallError, PipelineState};
use super::targets::Target;
use crate::envs::EnvError;
use crate::envs::in_process::LiveFeed;
use crate::policy::{Policy, PolicyRequest, Rollout, join_turns};

/// What bounds an episode and how it is scored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeRules {
    pub max_turns: usize,
    /// Failed attempts at one stage before the episode ends.
    pub max_failures_per_stage: usize,
    /// Credit for each of the first three stages reached.
    pub stage_credit: f64,
    /// Weights of the complex's confidence figures in the final stage's score (normalised over
    /// the figures the prediction returned).
    pub plddt_weight: f64,
    pub iptm_weight: f64,
    /// Taken off per malformed, out-of-order or refused call.
    pub invalid_call_penalty: f64,
}

impl Default for EpisodeRules {
    fn default() -> Self {
        Self {
            max_turns: 10,
            max_failures_per_stage: 3,
            stage_credit: 0.1,
            plddt_weight: 1.0,
            iptm_weight: 1.0,
            invalid_call_penalty: 0.1,
        }
    }
}

/// A finished episode.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Episode {
    pub target: String,
    pub messages: Vec<ChatMessage>,
    pub stages: usize,
    pub invalid_calls: usize,
    pub service_failures: usize,
    pub plddt: Option<f64>,
    pub iptm: Option<f64>,
    pub score: f64,
    /// Milliseconds spent waiting on services, and the rest of the episode (the model's turns).
    pub waited_ms: u64,
    pub worked_ms: u64,
    pub model_ms: u64,
    #[serde(skip)]
    pub rollout: Option<Rollout>,
}

pub const SYSTEM: &str = "You design protein binders with four tools, called in order: \
predict_target_structure, design_binder_backbone, design_binder_sequence, evaluate_complex. \
Call exactly one tool per turn. After the complex is evaluated, reply briefly without a tool call.";

/// Where an episode's steps are shown as they happen, if anywhere.
pub struct Observer<'a> {
    pub feed: Option<&'a dyn LiveFeed>,
    pub episode: u64,
}

impl Observer<'_> {
    pub const NONE: Observer<'static> = Observer {
        feed: None,
        episode: 0,
    };

    async fn emit(&self, step: ProteinEpisodeStep) {
        if let Some(feed) = self.feed {
            let event = ProteinEpisodeEvent {
                episode: self.episode,
                step,
            };
            feed.publish(LiveEvent::ProteinEpisode(Box::new(event)))
                .await;
        }
    }
}

/// The trace without residues whose coordinates JSON cannot carry (a non-finite number would be
/// sent as null and the viewer would drop the whole event).
fn finite_trace(mut trace: StructureTrace) -> StructureTrace {
    for chain in &mut trace.chains {
        chain
            .residues
            .retain(|r| r.ca.iter().all(|x| x.is_finite()));
        for residue in &mut chain.residues {
            residue.plddt = residue.plddt.filter(|p| p.is_finite());
        }
    }
    trace
}

/// The score of a confidence figure pair: pLDDT mapped from 50..90 onto 0..1, ipTM as is.
pub fn confidence(plddt: f64, iptm: Option<f64>, rules: &EpisodeRules) -> f64 {
    let plddt_part = ((plddt - 50.0) / 40.0).clamp(0.0, 1.0);
    match iptm {
        Some(iptm) if rules.iptm_weight > 0.0 => {
            let total = rules.plddt_weight + rules.iptm_weight;
            (rules.plddt_weight * plddt_part + rules.iptm_weight * iptm.clamp(0.0, 1.0)) / total
        }
        _ => plddt_part,
    }
}

/// The episode's reward: credit for the stages reached, the complex's confidence scaled into
/// what is left of 1, less the penalties.
pub fn reward(
    stages: usize,
    plddt: Option<f64>,
    iptm: Option<f64>,
    invalid_calls: usize,
    rules: &EpisodeRules,
) -> f64 {
    let credit = rules.stage_credit * stages.min(3) as f64;
    let final_part = match (stages, plddt) {
        (4, Some(plddt)) => {
            (1.0 - 3.0 * rules.stage_credit).max(0.0) * confidence(plddt, iptm, rules)
        }
        _ => 0.0,
    };
    credit + final_part - rules.invalid_call_penalty * invalid_calls as f64
}

pub fn prompt(target: &Target) -> String {
    format!(
        "Design a protein that binds the target {} ({} residues).\nTarget sequence: {}\n\
         Start by predicting its structure.",
        target.name,
        target.sequence.len(),
        target.sequence
    )
}

/// Plays one episode on `target`.
#[allow(clippy::too_many_arguments)]
pub async fn play(
    target: &Target,
    seed: u64,
    policy: &dyn Policy,
    request: &PolicyRequest,
    nim: &NimClient,
    mut budget: EpisodeBudget,
    rules: &EpisodeRules,
    observer: &Observer<'_>,
) -> Result<Episode, EnvError> {
    let tools: Vec<ToolSpec> = pipeline::tool_specs();
    observer
        .emit(ProteinEpisodeStep::Started {
            target: target.name.clone(),
            sequence: target.sequence.clone(),
        })
        .await;
    let mut state = PipelineState {
        target_sequence: target.sequence.clone(),
        seed,
        ..PipelineState::default()
    };
    let mut episode = Episode {
        target: target.name.clone(),
        messages: vec![
            ChatMessage::new("system", SYSTEM),
            ChatMessage::new("user", prompt(target)),
        ],
        stages: 0,
        invalid_calls: 0,
        service_failures: 0,
        plddt: None,
        iptm: None,
        score: 0.0,
        waited_ms: 0,
        worked_ms: 0,
        model_ms: 0,
        rollout: None,
    };
    let mut failures_this_stage = 0;
    for _ in 0..rules.max_turns {
        if pipeline::next_stage(&state).is_none() {
            break;
        }
        let turn_request = PolicyRequest {
            messages: episode.messages.clone(),
            n: 1,
            tools: tools.clone(),
            ..request.clone()
        };
        let thinking = std::time::Instant::now();
        let rollout = policy
            .complete(turn_request)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| EnvError::Other("the policy returned no rollout".into()))?;
        episode.model_ms += u64::try_from(thinking.elapsed().as_millis()).unwrap_or(u64::MAX);
        let text = rollout.completion.clone();
        episode.rollout = Some(match &episode.rollout {
            Some(earlier) => join_turns(earlier, &rollout).unwrap_or(rollout),
            None => rollout,
        });
        episode
            .messages
            .push(ChatMessage::new("assistant", text.clone()));
        let call = match parse_assistant_turn(&text, 1) {
            Ok(turn) if turn.calls.len() == 1 => {
                let call = turn
                    .calls
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| unreachable!("one call"));
                match check_call(&tools, &call) {
                    Ok(_) => Ok(call),
                    Err(error) => Err(error.to_string()),
                }
            }
            Ok(_) => Err(format!(
                "no tool call; the next step is {}",
                pipeline::next_stage(&state).map_or("none", DesignStage::tool)
            )),
            Err(error) => Err(error.to_string()),
        };
        let call = match call {
            Ok(call) => call,
            Err(reason) => {
                episode.invalid_calls += 1;
                observer
                    .emit(ProteinEpisodeStep::Refused {
                        reason: reason.clone(),
                    })
                    .await;
                episode
                    .messages
                    .push(ChatMessage::new("user", format!("Error: {reason}")));
                continue;
            }
        };
        let stage = DesignStage::of_tool(&call.name);
        if let Some(stage) = stage {
            observer
                .emit(ProteinEpisodeStep::Called {
                    stage,
                    arguments: Value::Object(call.arguments.clone()),
                })
                .await;
        }
        match pipeline::run_call(&call, &mut state, nim, &mut budget).await {
            Ok(result) => {
                failures_this_stage = 0;
                episode.waited_ms += result.waited_ms;
                episode.worked_ms += result.worked_ms;
                observer
                    .emit(ProteinEpisodeStep::Answered {
                        stage: result.stage,
                        ok: true,
                        summary: result.summary.clone(),
                        waited_ms: result.waited_ms,
                        worked_ms: result.worked_ms,
                        backend: result.backend,
                        structure: result.structure.as_ref().map(|s| {
                            finite_trace(s.trace(result.stage != DesignStage::BinderBackbone))
                        }),
                    })
                    .await;
                episode
                    .messages
                    .push(ChatMessage::new("tool", result.summary));
            }
            Err(error) => {
                if error.is_invalid_call() {
                    episode.invalid_calls += 1;
                } else {
                    episode.service_failures += 1;
                }
                failures_this_stage += 1;
                let reason = error.to_string();
                match (stage, &error) {
                    (Some(stage), CallError::Invalid(_) | CallError::Service(_)) => {
                        observer
                            .emit(ProteinEpisodeStep::Answered {
                                stage,
                                ok: false,
                                summary: reason.clone(),
                                waited_ms: 0,
                                worked_ms: 0,
                                backend: lachesis_shared::protein::ToolBackend::Nim,
                                structure: None,
                            })
                            .await;
                    }
                    _ => {
                        observer
                            .emit(ProteinEpisodeStep::Refused {
                                reason: reason.clone(),
                            })
                            .await;
                    }
                }
                episode
                    .messages
                    .push(ChatMessage::new("tool", format!("Error: {reason}")));
                if failures_this_stage >= rules.max_failures_per_stage {
                    break;
                }
            }
        }
    }
    episode.stages = pipeline::stages_done(&state);
    episode.plddt = state.plddt;
    episode.iptm = state.iptm;
    episode.score = reward(
        episode.stages,
        state.plddt,
        state.iptm,
        episode.invalid_calls,
        rules,
    );
    observer
        .emit(ProteinEpisodeStep::Finished {
            reward: episode.score,
            stages: episode.stages,
            plddt: episode.plddt,
            iptm: episode.iptm,
        })
        .await;
    Ok(episode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reward_gives_stage_credit_then_confidence_less_penalties() {
        let rules = EpisodeRules::default();
        assert_eq!(reward(0, None, None, 0, &rules), 0.0);
        assert!((reward(2, None, None, 0, &rules) - 0.2).abs() < 1e-12);
        assert!((reward(4, Some(90.0), None, 0, &rules) - 1.0).abs() < 1e-12);
        assert!((reward(4, Some(70.0), None, 0, &rules) - (0.3 + 0.7 * 0.5)).abs() < 1e-12);
        assert!((reward(4, Some(40.0), None, 1, &rules) - (0.3 - 0.1)).abs() < 1e-12);
        // ipTM, where given, weighs as much as pLDDT by default.
        assert!((reward(4, Some(90.0), Some(0.0), 0, &rules) - (0.3 + 0.7 * 0.5)).abs() < 1e-12);
        let plddt_only = EpisodeRules {
            iptm_weight: 0.0,
            ..rules
        };
        assert!((reward(4, Some(90.0), Some(0.0), 0, &plddt_only) - 1.0).abs() < 1e-12);
    }
}
