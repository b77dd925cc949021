//! The request and response bodies of NVIDIA's hosted NIM APIs for the four tools, as their
//! documentation and the hosted service define them. The local services (`lachesis nim serve`)
//! read and write these very types, so the environment cannot tell which one it talks to.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where each tool lives under a NIM base URL (the hosted service prefixes them all with `/v1`).
pub const ALPHAFOLD2_PATH: &str = "/v1/biology/deepmind/alphafold2";
pub const RFDIFFUSION_PATH: &str = "/v1/biology/ipd/rfdiffusion/generate";
pub const PROTEINMPNN_PATH: &str = "/v1/biology/ipd/proteinmpnn/predict";
pub const MULTIMER_PATH: &str = "/v1/biology/deepmind/alphafold2-multimer";
/// `GET {base}/v1/status/{request id}`: a queued request's answer, or 202 while it runs.
pub const STATUS_PATH: &str = "/v1/status";
pub const READY_PATH: &str = "/v1/health/ready";

/// The header a queued (202) answer names its request by.
pub const REQUEST_ID_HEADER: &str = "nvcf-reqid";
/// The header a queued answer states its state in (`pending-evaluation`, `fulfilled`, ...).
pub const STATUS_HEADER: &str = "nvcf-status";
/// How long the caller lets the service hold a request before answering 202.
pub const POLL_SECONDS_HEADER: &str = "nvcf-poll-seconds";

/// AlphaFold2: one sequence in, its predicted structures out (a JSON array of PDB texts, best
/// first).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Alphafold2Request {
    pub sequence: String,
    #[serde(default = "default_msa_algorithm")]
    pub algorithm: String,
    #[serde(default = "default_e_value")]
    pub e_value: f64,
    #[serde(default = "default_iterations")]
    pub iterations: u32,
    #[serde(default = "default_monomer_databases")]
    pub databases: Vec<String>,
    #[serde(default)]
    pub relax_prediction: bool,
    #[serde(default)]
    pub skip_template_search: bool,
}

/// RFdiffusion: a target (`input_pdb`), what to keep and what to generate (`contigs`), and where
/// the binder should touch the target (`hotspot_res`, such as `A50`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RfdiffusionRequest {
    pub input_pdb: String,
    pub contigs: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hotspot_res: Vec<String>,
    #[serde(default = "default_diffusion_steps")]
    pub diffusion_steps: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub random_seed: Option<u64>,
}

/// RFdiffusion's answer: the designed backbone (with the kept target), as PDB text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RfdiffusionResponse {
    pub output_pdb: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_ms: Option<u64>,
}

/// ProteinMPNN: a backbone in, sequences for the chains named in `input_pdb_chains` (all when
/// absent) out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProteinmpnnRequest {
    pub input_pdb: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_pdb_chains: Option<Vec<String>>,
    #[serde(default)]
    pub ca_only: bool,
    #[serde(default)]
    pub use_soluble_model: bool,
    #[serde(default = "default_num_seq")]
    pub num_seq_per_target: u32,
    #[serde(default = "default_sampling_temp")]
    pub sampling_temp: Vec<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub random_seed: Option<u64>,
    /// The documented options that steer sampling (amino-acid omissions and biases, PSSMs, fixed
    /// and tied positions) and the asset upload; the client never sends them, and the local
    /// service refuses a request that sets one rather than ignore it.
    #[serde(default, rename = "omit_AAs", skip_serializing_if = "Option::is_none")]
    pub omit_aas: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_pdb_asset: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pssm_jsonl: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pssm_multi: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pssm_threshold: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pssm_bias_flag: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pssm_log_odds_flag: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_positions_jsonl: Option<Value>,
    #[serde(
        default,
        rename = "omit_AA_jsonl",
        skip_serializing_if = "Option::is_none"
    )]
    pub omit_aa_jsonl: Option<Value>,
    #[serde(
        default,
        rename = "bias_AA_jsonl",
        skip_serializing_if = "Option::is_none"
    )]
    pub bias_aa_jsonl: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bias_by_res_jsonl: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tied_positions_jsonl: Option<Value>,
}

impl ProteinmpnnRequest {
    /// A request for `designs` sequences of `chains` at `temperature`, steering nothing else.
    pub fn new(
        input_pdb: String,
        chains: Vec<String>,
        designs: u32,
        temperature: f64,
        seed: u64,
    ) -> Self {
        Self {
            input_pdb,
            input_pdb_chains: Some(chains),
            ca_only: false,
            use_soluble_model: false,
            num_seq_per_target: designs,
            sampling_temp: vec![temperature],
            random_seed: Some(seed),
            omit_aas: None,
            input_pdb_asset: None,
            pssm_jsonl: None,
            pssm_multi: None,
            pssm_threshold: None,
            pssm_bias_flag: None,
            pssm_log_odds_flag: None,
            fixed_positions_jsonl: None,
            omit_aa_jsonl: None,
            bias_aa_jsonl: None,
            bias_by_res_jsonl: None,
            tied_positions_jsonl: None,
        }
    }

    /// The steering options set in this request (null and false count as unset).
    pub fn steering_options(&self) -> Vec<&'static str> {
        let set = |v: &Option<Value>| {
            v.as_ref().is_some_and(|v| {
                !matches!(v, Value::Null | Value::Bool(false))
                    && v != &Value::from(0.0)
                    && v != &Value::from(0)
            })
        };
        [
            ("omit_AAs", &self.omit_aas),
            ("input_pdb_asset", &self.input_pdb_asset),
            ("pssm_jsonl", &self.pssm_jsonl),
            ("pssm_multi", &self.pssm_multi),
            ("pssm_threshold", &self.pssm_threshold),
            ("pssm_bias_flag", &self.pssm_bias_flag),
            ("pssm_log_odds_flag", &self.pssm_log_odds_flag),
            ("fixed_positions_jsonl", &self.fixed_positions_jsonl),
            ("omit_AA_jsonl", &self.omit_aa_jsonl),
            ("bias_AA_jsonl", &self.bias_aa_jsonl),
            ("bias_by_res_jsonl", &self.bias_by_res_jsonl),
            ("tied_positions_jsonl", &self.tied_positions_jsonl),
        ]
        .into_iter()
        .filter(|(_, v)| set(v))
        .map(|(name, _)| name)
        .collect()
    }
}

/// ProteinMPNN's answer: the designs as multi-FASTA (the input's own sequence first, as the
/// original program writes it), one score per design, and per-position probabilities.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProteinmpnnResponse {
    pub mfasta: String,
    #[serde(default)]
    pub scores: Vec<f64>,
    #[serde(default)]
    pub probs: Vec<Vec<Vec<f32>>>,
}

/// AlphaFold2-Multimer: several sequences folded together; the answer is a JSON array of PDB
/// texts, one per model, with pLDDT in the B-factor column.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MultimerRequest {
    pub sequences: Vec<String>,
    #[serde(default = "default_multimer_algorithm")]
    pub algorithm: String,
    #[serde(default = "default_e_value")]
    pub e_value: f64,
    #[serde(default = "default_iterations")]
    pub iterations: u32,
    #[serde(default = "default_multimer_databases")]
    pub databases: Vec<String>,
    #[serde(default)]
    pub relax_prediction: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selected_models: Option<Vec<u32>>,
}

/// The problem-details body NVCF answers errors with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Problem {
    #[serde(default, rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub status: u16,
    #[serde(default)]
    pub detail: String,
    #[serde(default, rename = "requestId", skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

fn default_msa_algorithm() -> String {
    "mmseqs2".into()
}

fn default_multimer_algorithm() -> String {
    "jackhmmer".into()
}

fn default_e_value() -> f64 {
    1e-4
}

fn default_iterations() -> u32 {
    1
}

fn default_monomer_databases() -> Vec<String> {
    vec!["small_bfd".into()]
}

fn default_multimer_databases() -> Vec<String> {
    vec!["uniref90".into(), "small_bfd".into(), "mgnify".into()]
}

fn default_diffusion_steps() -> u32 {
    15
}

fn default_num_seq() -> u32 {
    1
}

fn default_sampling_temp() -> Vec<f64> {
    vec![0.1]
}

impl Alphafold2Request {
    /// The request the environment sends for a target sequence: a fast MSA, no relaxation.
    pub fn for_sequence(sequence: &str) -> Self {
        Self {
            sequence: sequence.to_string(),
            algorithm: default_msa_algorithm(),
            e_value: default_e_value(),
            iterations: default_iterations(),
            databases: default_monomer_databases(),
            relax_prediction: false,
            skip_template_search: true,
        }
    }
}

impl MultimerRequest {
    /// The request the environment sends for a target and its binder chains.
    pub fn for_sequences(sequences: Vec<String>, relax_prediction: bool) -> Self {
        Self {
            sequences,
            algorithm: default_multimer_algorithm(),
            e_value: default_e_value(),
            iterations: default_iterations(),
            databases: default_multimer_databases(),
            relax_prediction,
            selected_models: None,
        }
    }
}
