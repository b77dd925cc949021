//! The protein page's state: the latest binder design episodes, each built up from its live
//! steps into four stage rows, the model's refused turns, the latest structure and the outcome.

use lachesis_shared::protein::{
    DesignOutcome, DesignStage, ProteinEpisodeEvent, ProteinEpisodeStep, StructureTrace,
    ToolBackend,
};
use serde_json::Value;

/// Episodes kept on the page, newest first.
pub const EPISODES_SHOWN: usize = 6;

/// Where a stage stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StageState {
    /// Not reached (yet).
    #[default]
    Pending,
    /// The next stage: the model is writing its call.
    Calling,
    /// Called: waiting on the tool's answer.
    Waiting,
    /// Answered successfully.
    Done,
    /// The tool failed (the model may call it again).
    Failed,
}

impl StageState {
    /// Its `data-state`.
    pub fn key(self) -> &'static str {
        match self {
            StageState::Pending => "pending",
            StageState::Calling => "calling",
            StageState::Waiting => "waiting",
            StageState::Done => "done",
            StageState::Failed => "failed",
        }
    }

    /// For people.
    pub fn label(self) -> &'static str {
        match self {
            StageState::Pending => "pending",
            StageState::Calling => "model is calling",
            StageState::Waiting => "waiting on the tool",
            StageState::Done => "done",
            StageState::Failed => "failed",
        }
    }
}

/// A tool's answer to a stage's call.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub ok: bool,
    pub summary: String,
    pub waited_ms: u64,
    pub worked_ms: u64,
    pub backend: ToolBackend,
}

/// One stage's row.
#[derive(Debug, Clone, PartialEq)]
pub struct StageView {
    pub stage: DesignStage,
    pub state: StageState,
    /// The arguments of the latest call.
    pub arguments: Option<Value>,
    /// The answer to the latest call.
    pub answer: Option<Answer>,
    /// How many times the model called it.
    pub attempts: u32,
}

/// The episode's end, as the environment reported it.
pub type Outcome = DesignOutcome;

/// A turn the environment refused, placed before the stage the model was trying to reach
/// (`before` is that stage's index; 4 after the last one).
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub before: usize,
    pub reason: String,
}

/// One episode as seen so far.
#[derive(Debug, Clone, PartialEq)]
pub struct EpisodeView {
    pub id: u64,
    pub target: String,
    pub sequence: String,
    /// The four stages, in order.
    pub stages: Vec<StageView>,
    pub refused: Vec<Refusal>,
    /// The latest structure a stage produced.
    pub structure: Option<(DesignStage, StructureTrace)>,
    pub outcome: Option<Outcome>,
    /// Bumped by every step applied (the page re-renders a card only when it changes).
    pub revision: u64,
}

impl EpisodeView {
    fn new(id: u64, target: String, sequence: String) -> Self {
        let mut stages: Vec<StageView> = DesignStage::ALL
            .into_iter()
            .map(|stage| StageView {
                stage,
                state: StageState::Pending,
                arguments: None,
                answer: None,
                attempts: 0,
            })
            .collect();
        stages[0].state = StageState::Calling;
        Self {
            id,
            target,
            sequence,
            stages,
            refused: Vec::new(),
            structure: None,
            outcome: None,
            revision: 0,
        }
    }

    /// The first stage not done (4 when all are).
    pub fn frontier(&self) -> usize {
        self.stages
            .iter()
            .position(|s| s.state != StageState::Done)
            .unwrap_or(self.stages.len())
    }

    /// How many stages are done.
    pub fn done(&self) -> usize {
        self.stages
            .iter()
            .filter(|s| s.state == StageState::Done)
            .count()
    }
}

/// Applies one live step: a `Started` opens an episode at the top; other steps extend theirs
/// (steps of an episode that started before the page opened are dropped).
pub fn apply(episodes: &mut Vec<EpisodeView>, event: ProteinEpisodeEvent) {
    let ProteinEpisodeEvent { episode, step } = event;
    if let ProteinEpisodeStep::Started { target, sequence } = step {
        episodes.retain(|e| e.id != episode);
        episodes.insert(0, EpisodeView::new(episode, target, sequence));
        episodes.truncate(EPISODES_SHOWN);
        return;
    }
    let Some(view) = episodes.iter_mut().find(|e| e.id == episode) else {
        return;
    };
    view.revision += 1;
    match step {
        ProteinEpisodeStep::Started { .. } => {}
        ProteinEpisodeStep::Called { stage, arguments } => {
            let row = &mut view.stages[stage.index()];
            row.state = StageState::Waiting;
            row.arguments = Some(arguments);
            row.answer = None;
            row.attempts += 1;
        }
        ProteinEpisodeStep::Answered {
            stage,
            ok,
            summary,
            waited_ms,
            worked_ms,
            backend,
            structure,
        } => {
            let row = &mut view.stages[stage.index()];
            row.state = if ok {
                StageState::Done
            } else {
                StageState::Failed
            };
            row.attempts = row.attempts.max(1);
            row.answer = Some(Answer {
                ok,
                summary,
                waited_ms,
                worked_ms,
                backend,
            });
            if let Some(trace) = structure {
                view.structure = Some((stage, trace));
            }
            if ok
                && view.outcome.is_none()
                && let Some(next) = view.stages.get_mut(stage.index() + 1)
                && next.state == StageState::Pending
            {
                next.state = StageState::Calling;
            }
        }
        ProteinEpisodeStep::Refused { reason } => {
            let before = view.frontier();
            view.refused.push(Refusal { before, reason });
        }
        ProteinEpisodeStep::Finished(outcome) => {
            // Nobody is calling any more; a call left unanswered did not complete.
            for row in &mut view.stages {
                match row.state {
                    StageState::Calling => row.state = StageState::Pending,
                    StageState::Waiting => row.state = StageState::Failed,
                    _ => {}
                }
            }
            view.outcome = Some(outcome);
        }
    }
}

/// A duration for people: "340 ms", "1.2 s", "2 min 5 s".
pub fn duration(ms: u64) -> String {
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{:.1} s", ms as f64 / 1_000.0),
        _ => format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1_000),
    }
}

/// Who answered, said plainly: a stand-in is never passed off as a prediction.
pub fn backend_label(backend: ToolBackend) -> &'static str {
    match backend {
        ToolBackend::Nim => "NVIDIA NIM",
        ToolBackend::Local => "ProteinMPNN on this machine",
        ToolBackend::StandIn => "stand-in (geometric model, not a prediction)",
    }
}

/// Its `data-backend` (the wire's spelling).
pub fn backend_key(backend: ToolBackend) -> &'static str {
    match backend {
        ToolBackend::Nim => "nim",
        ToolBackend::Local => "local",
        ToolBackend::StandIn => "stand_in",
    }
}

/// A stage's `data-stage` (the wire's spelling).
pub fn stage_key(stage: DesignStage) -> &'static str {
    match stage {
        DesignStage::TargetStructure => "target_structure",
        DesignStage::BinderBackbone => "binder_backbone",
        DesignStage::BinderSequence => "binder_sequence",
        DesignStage::ComplexEvaluation => "complex_evaluation",
    }
}

/// The model's arguments as one line of JSON, cut after `max` characters.
pub fn compact(arguments: &Value, max: usize) -> String {
    let text = arguments.to_string();
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lachesis_shared::protein::{ChainTrace, TracedResidue};
    use serde_json::json;

    fn event(episode: u64, step: ProteinEpisodeStep) -> ProteinEpisodeEvent {
        ProteinEpisodeEvent { episode, step }
    }

    fn started(target: &str) -> ProteinEpisodeStep {
        ProteinEpisodeStep::Started {
            target: target.into(),
            sequence: "MKTAYIAK".into(),
        }
    }

    fn answered(stage: DesignStage, ok: bool, chains: usize) -> ProteinEpisodeStep {
        let structure = (chains > 0).then(|| StructureTrace {
            chains: (0..chains)
                .map(|c| ChainTrace {
                    id: ["A", "B"][c % 2].into(),
                    residues: vec![TracedResidue {
                        number: 1,
                        code: 'G',
                        ca: [0.0, 0.0, 0.0],
                        plddt: None,
                    }],
                })
                .collect(),
        });
        ProteinEpisodeStep::Answered {
            stage,
            ok,
            summary: format!("{stage:?}"),
            waited_ms: 1_200,
            worked_ms: 300,
            backend: ToolBackend::StandIn,
            structure,
        }
    }

    fn called(stage: DesignStage) -> ProteinEpisodeStep {
        ProteinEpisodeStep::Called {
            stage,
            arguments: json!({"contigs": "A1-50/0 40-60", "hotspots": ["A30"]}),
        }
    }

    fn states(e: &EpisodeView) -> Vec<&'static str> {
        e.stages.iter().map(|s| s.state.key()).collect()
    }

    #[test]
    fn stages_move_from_calling_to_waiting_to_done_and_keep_the_latest_structure() {
        use DesignStage::*;
        let mut episodes = Vec::new();
        apply(&mut episodes, event(1, started("PD-L1")));
        assert_eq!(
            states(&episodes[0]),
            ["calling", "pending", "pending", "pending"]
        );
        apply(&mut episodes, event(1, called(TargetStructure)));
        assert_eq!(
            states(&episodes[0]),
            ["waiting", "pending", "pending", "pending"]
        );
        apply(&mut episodes, event(1, answered(TargetStructure, true, 1)));
        assert_eq!(
            states(&episodes[0]),
            ["done", "calling", "pending", "pending"]
        );
        assert_eq!(
            episodes[0]
                .structure
                .as_ref()
                .map(|(s, t)| (*s, t.chains.len())),
            Some((TargetStructure, 1))
        );
        // A malformed turn sits before the stage the model was trying to reach.
        apply(
            &mut episodes,
            event(
                1,
                ProteinEpisodeStep::Refused {
                    reason: "evaluate_complex before design_binder_backbone".into(),
                },
            ),
        );
        assert_eq!(episodes[0].refused[0].before, 1);
        apply(&mut episodes, event(1, called(BinderBackbone)));
        apply(&mut episodes, event(1, answered(BinderBackbone, false, 0)));
        assert_eq!(
            states(&episodes[0]),
            ["done", "failed", "pending", "pending"]
        );
        apply(&mut episodes, event(1, called(BinderBackbone)));
        apply(&mut episodes, event(1, answered(BinderBackbone, true, 2)));
        let row = &episodes[0].stages[1];
        assert_eq!((row.attempts, row.state), (2, StageState::Done));
        assert_eq!(row.answer.as_ref().map(|a| a.waited_ms), Some(1_200));
        assert_eq!(
            episodes[0]
                .structure
                .as_ref()
                .map(|(s, t)| (*s, t.chains.len())),
            Some((BinderBackbone, 2))
        );
        apply(&mut episodes, event(1, called(BinderSequence)));
        apply(
            &mut episodes,
            event(
                1,
                ProteinEpisodeStep::Finished(DesignOutcome {
                    reward: 0.25,
                    stages: 2,
                    plddt: None,
                    iptm: None,
                }),
            ),
        );
        // The call left unanswered failed; the stage never called stays pending.
        assert_eq!(states(&episodes[0]), ["done", "done", "failed", "pending"]);
        assert_eq!(episodes[0].outcome.as_ref().map(|o| o.stages), Some(2));
    }

    #[test]
    fn new_episodes_go_on_top_and_strays_are_dropped() {
        let mut episodes = Vec::new();
        apply(&mut episodes, event(1, started("a")));
        apply(&mut episodes, event(2, started("b")));
        apply(
            &mut episodes,
            event(1, answered(DesignStage::TargetStructure, true, 1)),
        );
        // A step of an episode never started here is dropped.
        apply(
            &mut episodes,
            event(9, answered(DesignStage::TargetStructure, true, 1)),
        );
        assert_eq!(episodes.iter().map(|e| e.id).collect::<Vec<_>>(), [2, 1]);
        assert_eq!(episodes[1].done(), 1);
        assert_eq!(episodes[0].done(), 0);
        assert_eq!((episodes[1].revision, episodes[0].revision), (1, 0));
        for id in 10..20 {
            apply(&mut episodes, event(id, started("more")));
        }
        assert_eq!(episodes.len(), EPISODES_SHOWN);
        assert_eq!(episodes[0].id, 19);
    }

    #[test]
    fn people_read_durations_backends_and_arguments() {
        assert_eq!(duration(340), "340 ms");
        assert_eq!(duration(1_234), "1.2 s");
        assert_eq!(duration(125_000), "2 min 5 s");
        assert_eq!(
            backend_label(ToolBackend::StandIn),
            "stand-in (geometric model, not a prediction)"
        );
        assert_eq!(backend_key(ToolBackend::StandIn), "stand_in");
        for stage in DesignStage::ALL {
            assert_eq!(json!(stage), json!(stage_key(stage)));
        }
        assert_eq!(compact(&json!({"n": 4}), 40), r#"{"n":4}"#);
        assert_eq!(compact(&json!({"seq": "ééééé"}), 9), r#"{"seq":"é…"#);
    }
}
