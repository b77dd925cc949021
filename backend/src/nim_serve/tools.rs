//! What each local service computes, from a request body to an answer body. Inputs are checked
//! the way the hosted services check them (422 with the reason), before any work.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use axum::http::StatusCode;
use lachesis_protein::contigs::{Contigs, parse_hotspots, validate_hotspots};
use lachesis_protein::mpnn::{MpnnChain, MpnnInput, ProteinMpnn};
use lachesis_protein::standin;
use lachesis_protein::structure::{FastaRecord, Structure, validate_sequence, write_fasta};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::jobs::Outcome;
use super::problem;
use crate::envs::protein_binder::nim::client::NimTool;
use crate::envs::protein_binder::nim::shapes::{
    Alphafold2Request, MultimerRequest, ProteinmpnnRequest, ProteinmpnnResponse,
    RfdiffusionRequest, RfdiffusionResponse,
};

pub use crate::envs::protein_binder::nim::client::BACKEND_HEADER;
pub const STAND_IN: &str = "stand-in";
pub const LOCAL: &str = "local";

/// The first line of every PDB a stand-in writes, so the label travels with the file.
const STAND_IN_REMARK: &str = "REMARK 999 LACHESIS STAND-IN: GEOMETRIC MODEL, NOT A PREDICTION";

/// The longest sequence folded, the most chains in a complex, and the most residues in one (the
/// stand-in's error matrix grows with its square).
pub const MAX_SEQUENCE: usize = 1000;
pub const MAX_CHAINS: usize = 8;
pub const MAX_COMPLEX_RESIDUES: usize = 1500;
/// Designs per ProteinMPNN request (NVIDIA's service allows 1 to 100) and temperatures.
pub const MAX_DESIGNS: u32 = 100;
pub const MAX_TEMPERATURES: usize = 8;

pub fn backend_of(tool: NimTool) -> &'static str {
    match tool {
        NimTool::Proteinmpnn => LOCAL,
        _ => STAND_IN,
    }
}

/// Why a request was refused before any work.
pub type Refusal = (
    StatusCode,
    crate::envs::protein_binder::nim::shapes::Problem,
);

/// A checked request's work, run as a job.
pub type Work = Box<dyn FnOnce() -> Outcome + Send>;

/// The tools' shared state: ProteinMPNN's weights, loaded on first use.
pub struct LocalTools {
    weights: PathBuf,
    model: OnceLock<Result<Arc<ProteinMpnn>, String>>,
}

fn parse<T: DeserializeOwned>(
    value: Value,
) -> Result<
    T,
    (
        StatusCode,
        crate::envs::protein_binder::nim::shapes::Problem,
    ),
> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        problem(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("field {path}: {}", short(&e.into_inner().to_string())),
        )
    })
}

fn short(text: &str) -> String {
    text.chars().take(200).collect()
}

fn unprocessable(
    detail: impl std::fmt::Display,
) -> (
    StatusCode,
    crate::envs::protein_binder::nim::shapes::Problem,
) {
    problem(StatusCode::UNPROCESSABLE_ENTITY, short(&detail.to_string()))
}

fn labelled(pdb: String) -> String {
    format!("{STAND_IN_REMARK}\n{pdb}")
}

fn to_value<T: serde::Serialize>(body: &T) -> Outcome {
    serde_json::to_value(body)
        .map_err(|e| problem(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

/// Where ProteinMPNN's weights are when none are named: `LACHESIS_PROTEINMPNN_WEIGHTS`, else where
/// `scripts/ensure-proteinmpnn.sh` puts them.
pub fn default_weights() -> PathBuf {
    if let Some(path) = std::env::var_os("LACHESIS_PROTEINMPNN_WEIGHTS") {
        return PathBuf::from(path);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    home.join(".cache/lachesis/models/proteinmpnn/v_48_020.pt")
}

impl LocalTools {
    pub fn new(weights: Option<PathBuf>) -> Self {
        Self {
            weights: weights.unwrap_or_else(default_weights),
            model: OnceLock::new(),
        }
    }

    fn model(
        &self,
    ) -> Result<
        Arc<ProteinMpnn>,
        (
            StatusCode,
            crate::envs::protein_binder::nim::shapes::Problem,
        ),
    > {
        self.model
            .get_or_init(|| {
                ProteinMpnn::load(&self.weights).map(Arc::new).map_err(|e| {
                    format!(
                        "ProteinMPNN's weights could not be loaded from {} ({e}); scripts/ensure-proteinmpnn.sh installs them",
                        self.weights.display()
                    )
                })
            })
            .clone()
            .map_err(|detail| problem(StatusCode::SERVICE_UNAVAILABLE, detail))
    }

    /// AlphaFold2 stand-in: an ideal-geometry model of the sequence.
    pub fn alphafold2(self: &Arc<Self>, request: Value) -> Result<Work, Refusal> {
        let request: Alphafold2Request = parse(request)?;
        validate_sequence(&request.sequence, MAX_SEQUENCE).map_err(unprocessable)?;
        Ok(Box::new(move || {
            let structure = standin::fold_monomer(&request.sequence).map_err(unprocessable)?;
            to_value(&vec![labelled(structure.to_pdb())])
        }))
    }

    /// RFdiffusion stand-in: the kept target and an ideal binder backbone beside the hotspots.
    pub fn rfdiffusion(self: &Arc<Self>, request: Value) -> Result<Work, Refusal> {
        let request: RfdiffusionRequest = parse(request)?;
        if !(1..=200).contains(&request.diffusion_steps) {
            return Err(unprocessable("diffusion_steps must be between 1 and 200"));
        }
        let target = Structure::from_pdb(&request.input_pdb).map_err(unprocessable)?;
        let contigs = Contigs::parse(&request.contigs).map_err(unprocessable)?;
        contigs.validate(&target).map_err(unprocessable)?;
        let hotspots = parse_hotspots(&request.hotspot_res).map_err(unprocessable)?;
        validate_hotspots(&hotspots, &target, &contigs).map_err(unprocessable)?;
        let seed = request.random_seed.unwrap_or_else(rand::random);
        Ok(Box::new(move || {
            let started = std::time::Instant::now();
            let design = standin::diffuse_binder(&target, &contigs, &hotspots, seed)
                .map_err(unprocessable)?;
            to_value(&RfdiffusionResponse {
                output_pdb: labelled(design.to_pdb()),
                elapsed_ms: Some(started.elapsed().as_millis() as u64),
            })
        }))
    }

    /// ProteinMPNN, for real: designs for the chosen chains, the others held fixed.
    pub fn proteinmpnn(self: &Arc<Self>, request: Value) -> Result<Work, Refusal> {
        let request: ProteinmpnnRequest = parse(request)?;
        if let Some(option) = request.steering_options().first() {
            return Err(unprocessable(format!(
                "{option} is not supported by this local service"
            )));
        }
        if request.ca_only || request.use_soluble_model {
            return Err(unprocessable(
                "only the vanilla full-backbone model (v_48_020) is served here",
            ));
        }
        if !(1..=MAX_DESIGNS).contains(&request.num_seq_per_target) {
            return Err(unprocessable(format!(
                "num_seq_per_target must be between 1 and {MAX_DESIGNS}"
            )));
        }
        let total = request.num_seq_per_target as usize * request.sampling_temp.len();
        if total > MAX_DESIGNS as usize {
            return Err(unprocessable(format!(
                "{total} designs asked (num_seq_per_target times temperatures); at most {MAX_DESIGNS}"
            )));
        }
        if request.sampling_temp.is_empty()
            || request.sampling_temp.len() > MAX_TEMPERATURES
            || request
                .sampling_temp
                .iter()
                .any(|t| !t.is_finite() || *t <= 0.0 || *t > 1.0)
        {
            return Err(unprocessable(format!(
                "sampling_temp must hold 1 to {MAX_TEMPERATURES} temperatures in (0, 1]"
            )));
        }
        let structure = Structure::from_pdb(&request.input_pdb).map_err(unprocessable)?;
        let designed: Vec<String> = match &request.input_pdb_chains {
            Some(chains) => chains.clone(),
            None => structure.chains.iter().map(|c| c.id.clone()).collect(),
        };
        for id in &designed {
            if structure.chain(id).is_none() {
                return Err(unprocessable(format!("chain {id} is not in input_pdb")));
            }
        }
        let mut chains = Vec::new();
        for chain in &structure.chains {
            let backbone = chain.backbone().map_err(unprocessable)?;
            chains.push(MpnnChain {
                id: chain.id.clone(),
                sequence: chain.sequence(),
                backbone: backbone
                    .iter()
                    .map(|b| [b.n, b.ca, b.c, b.o].map(|p| p.map(|x| x as f32)))
                    .collect(),
                designed: designed.contains(&chain.id),
            });
        }
        let input = MpnnInput { chains };
        let tools = self.clone();
        Ok(Box::new(move || tools.design(&input, &request, &designed)))
    }

    fn design(
        &self,
        input: &MpnnInput,
        request: &ProteinmpnnRequest,
        designed: &[String],
    ) -> Outcome {
        let model = self.model()?;
        let seed = request.random_seed.unwrap_or_else(rand::random);
        let mut records = vec![FastaRecord {
            header: format!(
                "input, designed_chains={:?}, model_name=v_48_020, seed={seed}",
                designed
            ),
            sequence: input
                .chains
                .iter()
                .map(|c| c.sequence.as_str())
                .collect::<Vec<_>>()
                .join("/"),
        }];
        let mut scores = Vec::new();
        for (t, temperature) in request.sampling_temp.iter().enumerate() {
            let designs = model
                .design(
                    input,
                    request.num_seq_per_target as usize,
                    *temperature as f32,
                    seed.wrapping_add(t as u64),
                )
                .map_err(unprocessable)?;
            for (i, design) in designs.into_iter().enumerate() {
                records.push(FastaRecord {
                    header: format!(
                        "T={temperature}, sample={}, score={:.4}, global_score={:.4}",
                        i + 1,
                        design.score,
                        design.global_score
                    ),
                    sequence: design
                        .chains
                        .iter()
                        .map(|c| c.sequence.as_str())
                        .collect::<Vec<_>>()
                        .join("/"),
                });
                scores.push(f64::from(design.score));
            }
        }
        to_value(&ProteinmpnnResponse {
            mfasta: write_fasta(&records),
            scores,
            probs: Vec::new(),
        })
    }

    /// AlphaFold2-Multimer stand-in: the chains docked as ideal geometry, ranked by the
    /// stand-in's confidence model.
    pub fn multimer(self: &Arc<Self>, request: Value) -> Result<Work, Refusal> {
        let request: MultimerRequest = parse(request)?;
        if !(2..=MAX_CHAINS).contains(&request.sequences.len()) {
            return Err(unprocessable(format!(
                "sequences must hold 2 to {MAX_CHAINS} chains"
            )));
        }
        for sequence in &request.sequences {
            validate_sequence(sequence, MAX_SEQUENCE).map_err(unprocessable)?;
        }
        let residues: usize = request.sequences.iter().map(String::len).sum();
        if residues > MAX_COMPLEX_RESIDUES {
            return Err(unprocessable(format!(
                "the complex has {residues} residues, more than the {MAX_COMPLEX_RESIDUES} allowed"
            )));
        }
        let models = match &request.selected_models {
            Some(selected)
                if selected.is_empty()
                    || selected.len() > 5
                    || selected.iter().any(|m| !(1..=5).contains(m)) =>
            {
                return Err(unprocessable(
                    "selected_models must name 1 to 5 models, each 1 to 5",
                ));
            }
            Some(selected) => selected.len(),
            None => 5,
        };
        Ok(Box::new(move || {
            let predictions =
                standin::predict_complex(&request.sequences, models).map_err(unprocessable)?;
            let pdbs: Vec<String> = predictions
                .into_iter()
                .map(|p| labelled(p.structure.to_pdb()))
                .collect();
            to_value(&pdbs)
        }))
    }
}
