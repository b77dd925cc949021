//! The four stages as tools a model calls: their schemas, the checks their arguments pass
//! before any service is called (contigs and hotspots against the target), the calls, and what
//! each answer means (structures, designs, confidence).

use lachesis_protein::contigs::{Contigs, Hotspot, parse_hotspots, validate_hotspots};
use lachesis_protein::structure::{Structure, parse_fasta};
use lachesis_shared::protein::{DesignStage, ToolBackend};
use lachesis_shared::tools::{ToolCall, ToolSpec};
use serde_json::{Map, Value, json};

use super::nim::client::{EpisodeBudget, NimClient, NimError, NimTool};
use super::nim::shapes::{
    Alphafold2Request, MultimerRequest, ProteinmpnnRequest, ProteinmpnnResponse,
    RfdiffusionRequest, RfdiffusionResponse,
};

/// Designs one ProteinMPNN call may ask for, and its temperature range.
pub const MAX_DESIGNS: u32 = 16;
pub const MIN_TEMPERATURE: f64 = 0.05;
pub const MAX_TEMPERATURE: f64 = 1.0;
/// Hotspots one backbone call may name.
pub const MAX_HOTSPOTS: usize = 12;

/// The tools offered, one per stage.
pub fn tool_specs() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: DesignStage::TargetStructure.tool().into(),
            description: Some("Predict the target's 3D structure from its sequence (AlphaFold2). Call this first.".into()),
            parameters: json!({"type": "object", "properties": {
                "sequence": {"type": "string", "description": "the target's amino-acid sequence, as given"}
            }, "required": ["sequence"]}),
        },
        ToolSpec {
            name: DesignStage::BinderBackbone.tool().into(),
            description: Some("Generate a binder backbone against the predicted target (RFdiffusion). contigs keeps target residues (A1-29) and asks for a new chain after /0 (e.g. 'A1-29/0 40-60'); hotspot_res names target residues the binder should touch (e.g. ['A5','A9']).".into()),
            parameters: json!({"type": "object", "properties": {
                "contigs": {"type": "string"},
                "hotspot_res": {"type": "array", "items": {"type": "string"}},
                "diffusion_steps": {"type": "integer", "minimum": 1, "maximum": 50}
            }, "required": ["contigs"]}),
        },
        ToolSpec {
            name: DesignStage::BinderSequence.tool().into(),
            description: Some("Design sequences for the binder backbone (ProteinMPNN); the best-scoring design is kept.".into()),
            parameters: json!({"type": "object", "properties": {
                "num_designs": {"type": "integer", "minimum": 1, "maximum": MAX_DESIGNS},
                "sampling_temp": {"type": "number", "minimum": MIN_TEMPERATURE, "maximum": MAX_TEMPERATURE}
            }}),
        },
        ToolSpec {
            name: DesignStage::ComplexEvaluation.tool().into(),
            description: Some("Fold the target and the designed binder together and score the complex (AlphaFold2-Multimer).".into()),
            parameters: json!({"type": "object", "properties": {
                "relax_prediction": {"type": "boolean"}
            }}),
        },
    ]
}

/// What the pipeline holds between stages.
#[derive(Debug, Clone, Default)]
pub struct PipelineState {
    pub target_sequence: String,
    /// Seeds the services' sampling, so an episode can be replayed.
    pub seed: u64,
    pub target: Option<Structure>,
    pub backbone: Option<Structure>,
    /// The designed binder's chains (ProteinMPNN's best design, split at `/`).
    pub binder: Option<Vec<String>>,
    pub binder_score: Option<f64>,
    pub complex: Option<Structure>,
    pub plddt: Option<f64>,
    pub iptm: Option<f64>,
}

/// What one successful call produced.
#[derive(Debug, Clone)]
pub struct StageResult {
    pub stage: DesignStage,
    /// For the model and the timeline.
    pub summary: String,
    pub structure: Option<Structure>,
    pub waited_ms: u64,
    pub worked_ms: u64,
    pub backend: ToolBackend,
}

/// Why a call did not complete its stage; the text is what the model is told.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    /// The arguments failed their checks; no service was called.
    #[error("{0}")]
    Invalid(String),
    /// The call was for a stage that is not next.
    #[error("{called} is not the next step; call {expected} now")]
    OutOfOrder {
        called: &'static str,
        expected: &'static str,
    },
    /// The service failed.
    #[error("{0}")]
    Service(#[from] NimError),
}

impl CallError {
    /// The model's fault (it costs a penalty), not the service's.
    pub fn is_invalid_call(&self) -> bool {
        !matches!(self, CallError::Service(_))
    }
}

fn invalid(text: impl std::fmt::Display) -> CallError {
    CallError::Invalid(text.to_string())
}

fn backend(answer_backend: Option<&str>) -> ToolBackend {
    match answer_backend {
        Some("stand-in") => ToolBackend::StandIn,
        Some("local") => ToolBackend::Local,
        _ => ToolBackend::Nim,
    }
}

fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn integer(
    arguments: &Map<String, Value>,
    key: &str,
    default: u64,
    range: (u64, u64),
) -> Result<u64, CallError> {
    match arguments.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(value) => value
            .as_u64()
            .filter(|n| (range.0..=range.1).contains(n))
            .ok_or_else(|| {
                invalid(format!(
                    "{key} must be an integer from {} to {}",
                    range.0, range.1
                ))
            }),
    }
}

/// The exposed residues of a chain, for the model to pick hotspots from.
fn candidate_hotspots(target: &Structure) -> Vec<Hotspot> {
    let Some(chain) = target.chains.first() else {
        return Vec::new();
    };
    lachesis_protein::contigs::surface_hotspots(target, &chain.id, 6)
}

fn describe_chains(structure: &Structure) -> String {
    structure
        .chains
        .iter()
        .map(|c| {
            let first = c.residues.first().map_or(0, |r| r.number);
            let last = c.residues.last().map_or(0, |r| r.number);
            format!(
                "chain {} residues {first}-{last} ({} aa)",
                c.id,
                c.residues.len()
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The best model of a multimer answer: the highest mean pLDDT.
fn best_model(pdbs: &[String]) -> Result<(Structure, f64), CallError> {
    let mut best: Option<(Structure, f64)> = None;
    for pdb in pdbs {
        let structure = Structure::from_pdb(pdb).map_err(|e| {
            CallError::Service(NimError::Malformed {
                tool: NimTool::Multimer.label(),
                reason: e.to_string(),
            })
        })?;
        let plddt = structure.mean_plddt().unwrap_or(0.0);
        if best.as_ref().is_none_or(|(_, b)| plddt > *b) {
            best = Some((structure, plddt));
        }
    }
    best.ok_or_else(|| {
        CallError::Service(NimError::Malformed {
            tool: NimTool::Multimer.label(),
            reason: "no models in the answer".into(),
        })
    })
}

fn malformed(tool: NimTool, reason: impl std::fmt::Display) -> CallError {
    CallError::Service(NimError::Malformed {
        tool: tool.label(),
        reason: reason.to_string(),
    })
}

/// The design with the lowest score (ProteinMPNN's score is a negative log-likelihood).
fn best_design(answer: &ProteinmpnnResponse) -> Result<(Vec<String>, f64), CallError> {
    let records = parse_fasta(&answer.mfasta).map_err(|e| malformed(NimTool::Proteinmpnn, e))?;
    let mut best: Option<(Vec<String>, f64)> = None;
    // Designs are the records whose header names their temperature (`T=0.1, score=...`); the
    // original program also writes the input's own sequence first, without one.
    for record in &records {
        let parts: Vec<&str> = record.header.split(',').map(str::trim).collect();
        if !parts.iter().any(|p| p.starts_with("T=")) {
            continue;
        }
        let score = parts
            .iter()
            .filter_map(|part| part.strip_prefix("score="))
            .find_map(|v| v.trim().parse::<f64>().ok());
        let Some(score) = score else { continue };
        if best.as_ref().is_none_or(|(_, b)| score < *b) {
            best = Some((
                record.sequence.split('/').map(str::to_string).collect(),
                score,
            ));
        }
    }
    best.ok_or_else(|| malformed(NimTool::Proteinmpnn, "no scored designs in mfasta"))
}

/// Runs `call` if it is the next stage's and its arguments pass their checks.
pub async fn run_call(
    call: &ToolCall,
    state: &mut PipelineState,
    nim: &NimClient,
    budget: &mut EpisodeBudget,
) -> Result<StageResult, CallError> {
    let expected = next_stage(state);
    let stage = DesignStage::of_tool(&call.name)
        .ok_or_else(|| invalid(format!("there is no tool {:?}", call.name)))?;
    let Some(expected) = expected else {
        return Err(invalid(
            "the design is complete; answer without a tool call",
        ));
    };
    if stage != expected {
        return Err(CallError::OutOfOrder {
            called: stage.tool(),
            expected: expected.tool(),
        });
    }
    let args = &call.arguments;
    match stage {
        DesignStage::TargetStructure => {
            if let Some(given) = args.get("sequence") {
                let given = given
                    .as_str()
                    .unwrap_or_default()
                    .trim()
                    .to_ascii_uppercase();
                if given != state.target_sequence {
                    return Err(invalid(
                        "sequence differs from the target's sequence; pass it exactly as given",
                    ));
                }
            }
            let request = Alphafold2Request::for_sequence(&state.target_sequence);
            let answer = nim
                .call::<_, Vec<String>>(NimTool::Alphafold2, &request, budget)
                .await?;
            let pdb = answer
                .body
                .first()
                .ok_or_else(|| malformed(NimTool::Alphafold2, "no structures in the answer"))?;
            let target = Structure::from_pdb(pdb).map_err(|e| malformed(NimTool::Alphafold2, e))?;
            let hotspots: Vec<String> = candidate_hotspots(&target)
                .iter()
                .map(|h| format!("{}{}", h.chain, h.residue))
                .collect();
            let summary = format!(
                "Target structure predicted: {}; mean pLDDT {:.1}. Exposed residues (candidate hotspots): {}.",
                describe_chains(&target),
                target.mean_plddt().unwrap_or(0.0),
                hotspots.join(", ")
            );
            state.target = Some(target.clone());
            Ok(StageResult {
                stage,
                summary,
                structure: Some(target),
                waited_ms: millis(answer.waited),
                worked_ms: millis(answer.worked),
                backend: backend(answer.backend.as_deref()),
            })
        }
        DesignStage::BinderBackbone => {
            let target = state
                .target
                .as_ref()
                .ok_or_else(|| invalid("predict the target structure first"))?;
            let contigs_text = args
                .get("contigs")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid("contigs must be a string such as 'A1-29/0 40-60'"))?;
            let contigs = Contigs::parse(contigs_text).map_err(invalid)?;
            contigs.validate(target).map_err(invalid)?;
            let hotspot_texts: Vec<String> = match args.get("hotspot_res") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(items)) if items.len() <= MAX_HOTSPOTS => items
                    .iter()
                    .map(|v| {
                        v.as_str().map(str::to_string).ok_or_else(|| {
                            invalid("hotspot_res items must be strings such as 'A5'")
                        })
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => {
                    return Err(invalid(format!(
                        "hotspot_res must be a list of at most {MAX_HOTSPOTS} residues such as ['A5', 'A9']"
                    )));
                }
            };
            let hotspots = parse_hotspots(&hotspot_texts).map_err(invalid)?;
            validate_hotspots(&hotspots, target, &contigs).map_err(invalid)?;
            let steps = integer(args, "diffusion_steps", 15, (1, 50))?;
            let request = RfdiffusionRequest {
                input_pdb: target.to_pdb(),
                contigs: contigs.to_string(),
                hotspot_res: hotspot_texts,
                diffusion_steps: steps as u32,
                random_seed: Some(state.seed),
            };
            let answer = nim
                .call::<_, RfdiffusionResponse>(NimTool::Rfdiffusion, &request, budget)
                .await?;
            let backbone = Structure::from_pdb(&answer.body.output_pdb)
                .map_err(|e| malformed(NimTool::Rfdiffusion, e))?;
            let summary = format!("Binder backbone generated: {}.", describe_chains(&backbone));
            state.backbone = Some(backbone.clone());
            Ok(StageResult {
                stage,
                summary,
                structure: Some(backbone),
                waited_ms: millis(answer.waited),
                worked_ms: millis(answer.worked),
                backend: backend(answer.backend.as_deref()),
            })
        }
        DesignStage::BinderSequence => {
            let backbone = state
                .backbone
                .as_ref()
                .ok_or_else(|| invalid("generate a binder backbone first"))?;
            let designs = integer(args, "num_designs", 4, (1, u64::from(MAX_DESIGNS)))?;
            let temperature = match args.get("sampling_temp") {
                None | Some(Value::Null) => 0.1,
                Some(v) => v
                    .as_f64()
                    .filter(|t| (MIN_TEMPERATURE..=MAX_TEMPERATURE).contains(t))
                    .ok_or_else(|| invalid(format!("sampling_temp must be a number from {MIN_TEMPERATURE} to {MAX_TEMPERATURE}")))?,
            };
            // The designed chains are those after the target's: every chain but the first.
            let binder_chains: Vec<String> = backbone
                .chains
                .iter()
                .skip(1)
                .map(|c| c.id.clone())
                .collect();
            if binder_chains.is_empty() {
                return Err(malformed(
                    NimTool::Rfdiffusion,
                    "the backbone has no binder chain",
                ));
            }
            let request = ProteinmpnnRequest::new(
                backbone.to_pdb(),
                binder_chains,
                designs as u32,
                temperature,
                state.seed,
            );
            let answer = nim
                .call::<_, ProteinmpnnResponse>(NimTool::Proteinmpnn, &request, budget)
                .await?;
            let (chains, score) = best_design(&answer.body)?;
            // The answer's chains are every chain of the backbone; the binder's follow the target's.
            let binder: Vec<String> = chains
                .into_iter()
                .skip(1)
                .filter(|c| !c.is_empty())
                .collect();
            if binder.is_empty() {
                return Err(malformed(
                    NimTool::Proteinmpnn,
                    "the best design has no binder chain",
                ));
            }
            let summary = format!(
                "{designs} designs at temperature {temperature}; best score {score:.3}: {}.",
                binder.join("/")
            );
            state.binder = Some(binder);
            state.binder_score = Some(score);
            Ok(StageResult {
                stage,
                summary,
                structure: None,
                waited_ms: millis(answer.waited),
                worked_ms: millis(answer.worked),
                backend: backend(answer.backend.as_deref()),
            })
        }
        DesignStage::ComplexEvaluation => {
            let binder = state
                .binder
                .clone()
                .ok_or_else(|| invalid("design the binder's sequence first"))?;
            let relax = args
                .get("relax_prediction")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let mut sequences = vec![state.target_sequence.clone()];
            sequences.extend(binder);
            let request = MultimerRequest::for_sequences(sequences, relax);
            let answer = nim
                .call::<_, Vec<String>>(NimTool::Multimer, &request, budget)
                .await?;
            let (complex, plddt) = best_model(&answer.body)?;
            let summary = format!(
                "Complex folded: {}; mean pLDDT {plddt:.1}.",
                describe_chains(&complex)
            );
            state.complex = Some(complex.clone());
            state.plddt = Some(plddt);
            Ok(StageResult {
                stage,
                summary,
                structure: Some(complex),
                waited_ms: millis(answer.waited),
                worked_ms: millis(answer.worked),
                backend: backend(answer.backend.as_deref()),
            })
        }
    }
}

/// The stage the next call must complete; `None` once all four are done.
pub fn next_stage(state: &PipelineState) -> Option<DesignStage> {
    if state.target.is_none() {
        Some(DesignStage::TargetStructure)
    } else if state.backbone.is_none() {
        Some(DesignStage::BinderBackbone)
    } else if state.binder.is_none() {
        Some(DesignStage::BinderSequence)
    } else if state.complex.is_none() {
        Some(DesignStage::ComplexEvaluation)
    } else {
        None
    }
}

/// How many stages are done.
pub fn stages_done(state: &PipelineState) -> usize {
    next_stage(state).map_or(4, DesignStage::index)
}
