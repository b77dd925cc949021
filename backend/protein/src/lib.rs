//! Protein binder design's science, with no I/O beyond reading files it is handed: structures and
//! their validation, ProteinMPNN, and the stand-ins that take the place of the GPU-only models.

pub mod contigs;
pub mod mpnn;
pub mod standin;
pub mod structure;
