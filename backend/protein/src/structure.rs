//! Protein structures as binder design handles them: chains of residues of atoms, read from and
//! written to PDB text with `pdbtbx`, reduced to alpha-carbon traces for the browser, plus the
//! amino-acid alphabet and FASTA.
//!
//! AlphaFold writes its per-residue confidence (pLDDT, 0 to 100) into the B-factor column, so a
//! predicted structure's confidence is read from there.

mod pdb_io;
mod sequence;

use lachesis_shared::protein::{ChainTrace, StructureTrace, TracedResidue};
use serde::{Deserialize, Serialize};

pub use sequence::{
    FastaRecord, STANDARD_AMINO_ACIDS, one_letter, parse_fasta, three_letter, validate_sequence,
    write_fasta,
};

/// The structure atropos's protein design environment returns in place of an AlphaFold2 call when
/// debugging: chain A, 29 residues, 257 atoms, pLDDT in the B-factor column (MIT, see
/// `data/SOURCE.md`).
pub const DEBUG_TARGET_PDB: &str = include_str!("../data/debug_target.pdb");

/// The most atoms a structure may have; larger inputs are refused before parsing.
pub const MAX_ATOMS: usize = 100_000;

/// The longest PDB text accepted, in bytes; larger inputs are refused before parsing.
pub const MAX_PDB_BYTES: usize = 10 * 1024 * 1024;

/// A structure: the first model of a PDB file, polymer residues only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Structure {
    /// Its chains, in file order.
    pub chains: Vec<Chain>,
}

/// One chain of a structure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chain {
    /// The chain's identifier (`A`, `B`, ...).
    pub id: String,
    /// Its residues, in file order.
    pub residues: Vec<Residue>,
}

/// One residue of a chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Residue {
    /// The residue's number in the file.
    pub number: i32,
    /// Its insertion code, where the file gives one.
    pub insertion_code: Option<String>,
    /// Its three-letter name (`ALA`, `GLY`, ...).
    pub name: String,
    /// Its atoms, in file order.
    pub atoms: Vec<Atom>,
}

/// One atom of a residue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Atom {
    /// The atom's name (`N`, `CA`, `C`, `O`, `CB`, ...).
    pub name: String,
    /// Its element symbol (`C`, `N`, ...), empty where unknown.
    pub element: String,
    /// Its position, in ångströms.
    pub position: [f64; 3],
    /// Its B-factor; a prediction's pLDDT.
    pub b_factor: f64,
}

/// The four backbone atoms of one residue.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backbone {
    /// The amide nitrogen.
    pub n: [f64; 3],
    /// The alpha carbon.
    pub ca: [f64; 3],
    /// The carbonyl carbon.
    pub c: [f64; 3],
    /// The carbonyl oxygen.
    pub o: [f64; 3],
}

/// Why a structure, sequence or FASTA text was refused.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum StructureError {
    /// The PDB text is longer than [`MAX_PDB_BYTES`].
    #[error("the PDB text is {bytes} bytes, more than the {limit} allowed")]
    TooLarge { bytes: usize, limit: usize },
    /// The PDB text has more atom records than [`MAX_ATOMS`].
    #[error("the PDB text has {atoms} atom records, more than the {limit} allowed")]
    TooManyAtoms { atoms: usize, limit: usize },
    /// The PDB text holds a character outside ASCII.
    #[error("PDB line {line} holds a non-ASCII character; PDB files are plain ASCII")]
    NotAscii { line: usize },
    /// An ATOM or HETATM record is malformed.
    #[error("PDB line {line} is not a valid atom record: {reason}")]
    BadAtomRecord { line: usize, reason: &'static str },
    /// The PDB parser refused the text.
    #[error("the PDB text could not be read: {0}")]
    Parse(String),
    /// The text holds no atoms at all.
    #[error("the PDB text holds no atoms")]
    Empty,
    /// No residue has an alpha carbon, so there is no protein chain to work with.
    #[error("no residue in the structure has a CA atom, so it holds no protein chain")]
    NoAlphaCarbon,
    /// A residue lacks one of the backbone atoms N, CA, C, O.
    #[error("residue {chain}{residue} has no {atom} atom; every residue needs N, CA, C and O")]
    MissingBackboneAtom {
        chain: String,
        residue: i32,
        atom: &'static str,
    },
    /// A sequence is empty.
    #[error("the sequence is empty")]
    EmptySequence,
    /// A sequence is longer than allowed.
    #[error("the sequence has {length} residues, more than the {max} allowed")]
    SequenceTooLong { length: usize, max: usize },
    /// A sequence holds a letter outside the 20 standard amino acids.
    #[error(
        "the sequence has {letter:?} at position {position}; only the uppercase letters ACDEFGHIKLMNPQRSTVWY are allowed"
    )]
    InvalidResidue { position: usize, letter: char },
    /// FASTA text has sequence before its first `>` header.
    #[error("FASTA line {line} has sequence before any '>' header")]
    FastaSequenceBeforeHeader { line: usize },
    /// A FASTA record has no sequence.
    #[error("FASTA record '{header}' has no sequence")]
    FastaEmptySequence { header: String },
    /// FASTA text holds no records.
    #[error("the FASTA text holds no records")]
    FastaEmpty,
}

impl Structure {
    /// Reads PDB text: the first model only, polymer residues (ligands and waters without a CA are
    /// dropped). Refuses text over [`MAX_PDB_BYTES`] or with over [`MAX_ATOMS`] atom records
    /// before parsing, text the parser finds broken, and structures with no alpha carbon.
    pub fn from_pdb(text: &str) -> Result<Self, StructureError> {
        pdb_io::read_pdb(text)
    }

    /// Writes PDB text: atoms renumbered from 1, occupancy 1.0, B-factors kept. It reads back
    /// with [`Structure::from_pdb`].
    pub fn to_pdb(&self) -> String {
        pdb_io::write_pdb(self)
    }

    /// The chain with this identifier.
    pub fn chain(&self, id: &str) -> Option<&Chain> {
        self.chains.iter().find(|chain| chain.id == id)
    }

    /// A chain's sequence in one-letter codes, `X` for residues outside the standard 20.
    pub fn sequence(&self, chain: &str) -> Option<String> {
        self.chain(chain).map(Chain::sequence)
    }

    /// The mean B-factor of the alpha carbons over all chains: a prediction's mean pLDDT.
    pub fn mean_plddt(&self) -> Option<f64> {
        mean(
            self.chains
                .iter()
                .flat_map(Chain::alpha_carbons)
                .map(|atom| atom.b_factor),
        )
    }

    /// The number of residues over all chains.
    pub fn residue_count(&self) -> usize {
        self.chains.iter().map(|chain| chain.residues.len()).sum()
    }

    /// The structure as the browser draws it: each residue's alpha carbon (residues without one
    /// are left out), with its pLDDT where `predicted` says the B-factors are a model's confidence.
    pub fn trace(&self, predicted: bool) -> StructureTrace {
        let chains = self
            .chains
            .iter()
            .map(|chain| ChainTrace {
                id: chain.id.clone(),
                residues: chain
                    .residues
                    .iter()
                    .filter_map(|residue| {
                        let ca = residue.atom("CA")?;
                        Some(TracedResidue {
                            number: residue.number,
                            code: one_letter(&residue.name),
                            ca: ca.position.map(|x| x as f32),
                            plddt: predicted.then_some(ca.b_factor as f32),
                        })
                    })
                    .collect(),
            })
            .collect();
        StructureTrace { chains }
    }
}

impl Chain {
    /// Each residue's N, CA, C and O, in order; an error names the first residue lacking one.
    pub fn backbone(&self) -> Result<Vec<Backbone>, StructureError> {
        self.residues
            .iter()
            .map(|residue| {
                let position = |atom: &'static str| {
                    residue.atom(atom).map(|a| a.position).ok_or_else(|| {
                        StructureError::MissingBackboneAtom {
                            chain: self.id.clone(),
                            residue: residue.number,
                            atom,
                        }
                    })
                };
                Ok(Backbone {
                    n: position("N")?,
                    ca: position("CA")?,
                    c: position("C")?,
                    o: position("O")?,
                })
            })
            .collect()
    }

    /// The mean B-factor of this chain's alpha carbons: a prediction's mean pLDDT.
    pub fn plddt(&self) -> Option<f64> {
        mean(self.alpha_carbons().map(|atom| atom.b_factor))
    }

    /// The chain's sequence in one-letter codes.
    pub fn sequence(&self) -> String {
        self.residues.iter().map(|r| one_letter(&r.name)).collect()
    }

    /// The chain's alpha carbons, in residue order.
    pub fn alpha_carbons(&self) -> impl Iterator<Item = &Atom> {
        self.residues
            .iter()
            .filter_map(|residue| residue.atom("CA"))
    }
}

impl Residue {
    /// The atom with this name.
    pub fn atom(&self, name: &str) -> Option<&Atom> {
        self.atoms.iter().find(|atom| atom.name == name)
    }
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, count) = values.fold((0.0, 0usize), |(sum, count), v| (sum + v, count + 1));
    (count > 0).then(|| sum / count as f64)
}
