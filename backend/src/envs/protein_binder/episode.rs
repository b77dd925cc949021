//! One design episode: the model is given a target sequence and the four tools, and calls them
//! turn by turn, choosing each call's arguments. A malformed turn, a call out of order or one
//! whose arguments fail their checks is answered with the reason and costs a penalty; a service
//! failure is reported and the stage may be tried again. The episode ends with the complex
//! scored, or when turns, retries or the budget run out.

use lachesis_inference::ChatMessage;
use lachesis_shared::live::LiveEvent;
use lachesis_shared::protein::{
    DesignOutcome, DesignStage, ProteinEpisodeEvent, ProteinEpisodeStep, StructureTrace,
};
use lachesis_shared::tools::{ToolSpec, check_call, parse_assistant_turn};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ProteinSettings;
use super::nim::client::{EpisodeBudget, NimClient};
use super::pipeline::{self, CallError, PipelineState};
use super::targets::Target;
use crate::envs::EnvError;
pub use crate::envs::episode::Observer;
use crate::envs::episode::{Dialogue, EpisodeStep, next_turn, record_turn};
use crate::policy::{Policy, PolicyRequest, Rollout};

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

impl EpisodeStep for ProteinEpisodeStep {
    fn into_event(self, episode: u64) -> LiveEvent {
        LiveEvent::ProteinEpisode(Box::new(ProteinEpisodeEvent {
            episode,
            step: self,
        }))
    }
}

impl Dialogue for Episode {
    fn into_dialogue(self) -> (Vec<ChatMessage>, Option<Rollout>, f64) {
        (self.messages, self.rollout, self.score)
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
pub fn confidence(plddt: f64, iptm: Option<f64>, settings: &ProteinSettings) -> f64 {
    let plddt_part = ((plddt - 50.0) / 40.0).clamp(0.0, 1.0);
    match iptm {
        Some(iptm) if settings.iptm_weight > 0.0 => {
            let total = settings.plddt_weight + settings.iptm_weight;
            (settings.plddt_weight * plddt_part + settings.iptm_weight * iptm.clamp(0.0, 1.0))
                / total
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
    settings: &ProteinSettings,
) -> f64 {
    let credit = settings.stage_credit * stages.min(3) as f64;
    let final_part = match (stages, plddt) {
        (4, Some(plddt)) => {
            (1.0 - 3.0 * settings.stage_credit).max(0.0) * confidence(plddt, iptm, settings)
        }
        _ => 0.0,
    };
    credit + final_part - settings.invalid_call_penalty * invalid_calls as f64
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
    settings: &ProteinSettings,
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
    for _ in 0..settings.max_turns {
        if pipeline::next_stage(&state).is_none() {
            break;
        }
        let thinking = std::time::Instant::now();
        let rollout = next_turn(policy, request, &episode.messages, &tools).await?;
        episode.model_ms += u64::try_from(thinking.elapsed().as_millis()).unwrap_or(u64::MAX);
        let text = record_turn(&mut episode.messages, &mut episode.rollout, rollout);
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
                let step = match (stage, &error) {
                    (Some(stage), CallError::Invalid(_) | CallError::Service(_)) => {
                        ProteinEpisodeStep::Answered {
                            stage,
                            ok: false,
                            summary: reason.clone(),
                            waited_ms: 0,
                            worked_ms: 0,
                            backend: lachesis_shared::protein::ToolBackend::Nim,
                            structure: None,
                        }
                    }
                    _ => ProteinEpisodeStep::Refused {
                        reason: reason.clone(),
                    },
                };
                observer.emit(step).await;
                episode
                    .messages
                    .push(ChatMessage::new("tool", format!("Error: {reason}")));
                if failures_this_stage >= settings.max_failures_per_stage {
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
        settings,
    );
    observer
        .emit(ProteinEpisodeStep::Finished(DesignOutcome {
            reward: episode.score,
            stages: episode.stages,
            plddt: episode.plddt,
            iptm: episode.iptm,
        }))
        .await;
    Ok(episode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reward_gives_stage_credit_then_confidence_less_penalties() {
        let settings = ProteinSettings::default();
        assert_eq!(reward(0, None, None, 0, &settings), 0.0);
        assert!((reward(2, None, None, 0, &settings) - 0.2).abs() < 1e-12);
        assert!((reward(4, Some(90.0), None, 0, &settings) - 1.0).abs() < 1e-12);
        assert!((reward(4, Some(70.0), None, 0, &settings) - (0.3 + 0.7 * 0.5)).abs() < 1e-12);
        assert!((reward(4, Some(40.0), None, 1, &settings) - (0.3 - 0.1)).abs() < 1e-12);
        // ipTM, where given, weighs as much as pLDDT by default.
        assert!((reward(4, Some(90.0), Some(0.0), 0, &settings) - (0.3 + 0.7 * 0.5)).abs() < 1e-12);
        let plddt_only = ProteinSettings {
            iptm_weight: 0.0,
            ..settings
        };
        assert!((reward(4, Some(90.0), Some(0.0), 0, &plddt_only) - 1.0).abs() < 1e-12);
    }
}
