//! Geometric stand-ins for the GPU-only models — AlphaFold2, RFdiffusion and
//! AlphaFold2-Multimer — for machines without GPUs or weights.
//!
//! **Nothing here is a prediction.** Each stand-in returns a structurally valid result from a
//! simple, documented geometric model (ideal helices and strands built by NeRF, rigid placement
//! beside the target, hand-written confidence formulas) so the rest of a binder design pipeline
//! can run end to end. Their structures are not what the real models would produce, and their
//! confidence numbers (pLDDT, ipTM, pTM, PAE) are scores from the formulas documented on each
//! function, not model outputs: they must never be shown or stored as predictions. Callers label
//! them with `ToolBackend::StandIn`.
//!
//! Every stand-in is deterministic given its inputs (and its seed where it takes one).

mod complex;
mod diffuse;
mod fold;
mod geometry;
mod placement;

pub use complex::{ComplexPrediction, predict_complex};
pub use diffuse::diffuse_binder;
pub use fold::fold_monomer;

use crate::contigs::ContigError;
use crate::structure::StructureError;

/// The longest sequence a stand-in accepts, in residues.
pub const MAX_SEQUENCE_LENGTH: usize = 1000;
/// The most chains (target and binders together) [`predict_complex`] accepts.
pub const MAX_CHAINS: usize = 8;
/// The most residues over all chains of a complex: its PAE matrix grows with the square.
pub const MAX_COMPLEX_RESIDUES: usize = 2000;
/// The most ranked results [`predict_complex`] returns.
pub const MAX_MODELS: usize = 5;

/// Why a stand-in refused its input.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum StandInError {
    /// A sequence is empty, too long, or holds a non-standard letter.
    #[error("sequence {index}: {source}")]
    Sequence {
        /// Which sequence, from 0 (the target).
        index: usize,
        source: StructureError,
    },
    /// The contig or hotspots do not fit the target.
    #[error(transparent)]
    Contig(#[from] ContigError),
    /// Too few or too many chains for a complex.
    #[error("a complex needs a target and 1 to {} binders: 2 to {max} sequences, not {count}", max - 1)]
    ChainCount { count: usize, max: usize },
    /// The chains together are too long for one complex.
    #[error("the complex has {residues} residues over all chains; at most {max} are allowed")]
    ComplexTooLong { residues: usize, max: usize },
    /// The number of ranked models asked for is out of range.
    #[error("models must be 1 to {max}, not {models}")]
    ModelCount { models: usize, max: usize },
}
