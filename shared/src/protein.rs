//! Protein binder design as the browser sees it: each episode's pipeline, call by call, and the
//! structures it produced, as traces of their alpha carbons.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The four stages of a binder design, in the order an episode must reach them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DesignStage {
    /// The target's structure from its sequence (AlphaFold2).
    TargetStructure,
    /// A binder backbone against the target (RFdiffusion).
    BinderBackbone,
    /// Sequences for that backbone (ProteinMPNN).
    BinderSequence,
    /// The target and binder folded together and scored (AlphaFold2-Multimer).
    ComplexEvaluation,
}

impl DesignStage {
    /// Every stage, in order.
    pub const ALL: [DesignStage; 4] = [
        DesignStage::TargetStructure,
        DesignStage::BinderBackbone,
        DesignStage::BinderSequence,
        DesignStage::ComplexEvaluation,
    ];

    /// The tool the model calls to complete this stage.
    pub fn tool(self) -> &'static str {
        match self {
            DesignStage::TargetStructure => "predict_target_structure",
            DesignStage::BinderBackbone => "design_binder_backbone",
            DesignStage::BinderSequence => "design_binder_sequence",
            DesignStage::ComplexEvaluation => "evaluate_complex",
        }
    }

    /// The stage a tool completes.
    pub fn of_tool(tool: &str) -> Option<DesignStage> {
        DesignStage::ALL.into_iter().find(|s| s.tool() == tool)
    }

    /// A short label for people.
    pub fn label(self) -> &'static str {
        match self {
            DesignStage::TargetStructure => "Target structure (AlphaFold2)",
            DesignStage::BinderBackbone => "Binder backbone (RFdiffusion)",
            DesignStage::BinderSequence => "Binder sequence (ProteinMPNN)",
            DesignStage::ComplexEvaluation => "Complex (AlphaFold2-Multimer)",
        }
    }

    /// Its position, from 0.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// A structure reduced to what the viewer draws.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StructureTrace {
    /// Its chains, in file order.
    pub chains: Vec<ChainTrace>,
}

/// One chain's alpha-carbon trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChainTrace {
    /// The chain's identifier (`A`, `B`, ...).
    pub id: String,
    /// Its residues, in order.
    pub residues: Vec<TracedResidue>,
}

/// One residue of a trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TracedResidue {
    /// The residue's number in the file.
    pub number: i32,
    /// Its one-letter code (`X` when unknown, `G` for a designed backbone's glycines).
    pub code: char,
    /// Its alpha carbon, in ångströms.
    pub ca: [f32; 3],
    /// The model's confidence for it (0 to 100), where the structure is a prediction.
    pub plddt: Option<f32>,
}

/// Who computed a tool's answer; stand-ins are never presented as predictions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolBackend {
    /// NVIDIA's hosted NIM, or a self-hosted NIM.
    Nim,
    /// The project's own ProteinMPNN, run on this machine.
    Local,
    /// A geometric stand-in that speaks the NIM protocol but predicts nothing.
    StandIn,
}

/// One step of a binder design episode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProteinEpisodeEvent {
    /// Which episode (they may interleave).
    pub episode: u64,
    /// What happened.
    pub step: ProteinEpisodeStep,
}

/// What happened in a binder design episode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ProteinEpisodeStep {
    /// The episode began on this target.
    Started {
        /// The target's name.
        target: String,
        /// Its sequence.
        sequence: String,
    },
    /// The model called a tool; its answer follows as `Answered`.
    Called {
        /// The stage the tool belongs to.
        stage: DesignStage,
        /// The arguments the model gave, as it wrote them.
        arguments: Value,
    },
    /// A tool answered, or failed.
    Answered {
        /// The stage.
        stage: DesignStage,
        /// It succeeded.
        ok: bool,
        /// What came back, or why it failed, for people.
        summary: String,
        /// Milliseconds spent waiting on the service (queued answers and polls).
        waited_ms: u64,
        /// Milliseconds the service reported working, or the call took when it did not say.
        worked_ms: u64,
        /// Who answered.
        backend: ToolBackend,
        /// The structure the stage produced, if it produced one.
        structure: Option<StructureTrace>,
    },
    /// A model turn that was not a well-formed call, or called a stage out of order.
    Refused {
        /// Why, as the model was told.
        reason: String,
    },
    /// The episode ended.
    Finished(DesignOutcome),
}

/// How a binder design episode ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DesignOutcome {
    /// Its reward.
    pub reward: f64,
    /// How many stages it completed.
    pub stages: usize,
    /// The complex's mean pLDDT, if it was evaluated.
    pub plddt: Option<f64>,
    /// The complex's ipTM, if the evaluation gave one.
    pub iptm: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_name_their_tools_both_ways_and_keep_their_order() {
        for (i, stage) in DesignStage::ALL.into_iter().enumerate() {
            assert_eq!(DesignStage::of_tool(stage.tool()), Some(stage));
            assert_eq!(stage.index(), i);
        }
        assert_eq!(DesignStage::of_tool("fold_everything"), None);
    }

    #[test]
    fn events_have_a_tagged_shape() {
        let event = ProteinEpisodeEvent {
            episode: 3,
            step: ProteinEpisodeStep::Finished(DesignOutcome {
                reward: 0.5,
                stages: 4,
                plddt: Some(71.0),
                iptm: None,
            }),
        };
        let value = serde_json::to_value(&event).unwrap();
        assert_eq!(value["step"]["kind"], "finished");
        assert_eq!(value["step"]["stages"], 4);
        let back: ProteinEpisodeEvent = serde_json::from_value(value).unwrap();
        assert_eq!(back, event);
    }
}
