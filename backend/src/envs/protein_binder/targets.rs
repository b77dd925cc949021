//! Binder targets: the shipped debug target and any PDB file the user names, read once at
//! start-up (nothing is downloaded).

use std::path::Path;

use lachesis_protein::structure::{DEBUG_TARGET_PDB, Structure, validate_sequence};

use crate::envs::EnvError;

/// The longest target sequence accepted.
pub const MAX_TARGET_RESIDUES: usize = 1000;
/// The largest target file read.
pub const MAX_TARGET_BYTES: u64 = 10 << 20;

/// A target: its name and the sequence the model is given (its first chain's).
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub name: String,
    pub sequence: String,
}

impl Target {
    /// The target from PDB text: its first protein chain's sequence.
    pub fn from_pdb(name: &str, text: &str) -> Result<Self, EnvError> {
        let structure = Structure::from_pdb(text)
            .map_err(|e| EnvError::InvalidOption(format!("target {name}: {e}")))?;
        let chain = structure
            .chains
            .first()
            .ok_or_else(|| EnvError::InvalidOption(format!("target {name} has no chain")))?;
        let sequence: String = chain.sequence().chars().filter(|c| *c != 'X').collect();
        validate_sequence(&sequence, MAX_TARGET_RESIDUES)
            .map_err(|e| EnvError::InvalidOption(format!("target {name}: {e}")))?;
        Ok(Self {
            name: name.to_string(),
            sequence,
        })
    }

    /// The target shipped with the project (chain A of the seed's debug structure, 29 residues).
    pub fn debug() -> Self {
        Self::from_pdb("debug_target", DEBUG_TARGET_PDB)
            .unwrap_or_else(|e| unreachable!("the shipped target parses: {e}"))
    }

    /// A target from a PDB file, named after the file.
    pub fn from_file(path: &Path) -> Result<Self, EnvError> {
        let size = std::fs::metadata(path)?.len();
        if size > MAX_TARGET_BYTES {
            return Err(EnvError::InvalidOption(format!(
                "{} is {size} bytes, more than the {MAX_TARGET_BYTES} allowed",
                path.display()
            )));
        }
        let text = std::fs::read_to_string(path)?;
        let name = path
            .file_stem()
            .map_or_else(|| "target".into(), |s| s.to_string_lossy().into_owned());
        Self::from_pdb(&name, &text)
    }
}
