//! From chains to the model's inputs: validation, the concatenated residue layout, and the
//! k-nearest-neighbour graph with its geometric (RBF) and positional edge features. The geometry is
//! plain arithmetic on the coordinates, done here in f32 in the same order as the reference so
//! that neighbour choice and RBF values agree with it.

use super::{ALPHABET, MAX_RESIDUES, MpnnError, MpnnInput, NEIGHBOURS};

/// Coordinates beyond this (Å) are rejected: PDB files cannot hold them, and squaring them would
/// overflow f32 and turn every feature into NaN.
const MAX_COORDINATE: f32 = 1e5;
/// Offsets between residues of one chain are clipped to ±32 before their one-hot class.
const MAX_RELATIVE_OFFSET: i64 = 32;
/// The positional class for a pair of residues on different chains.
const OTHER_CHAIN_CLASS: u32 = 2 * MAX_RELATIVE_OFFSET as u32 + 1;
/// The reference numbers residues across chains with a gap of 100 per chain.
const CHAIN_INDEX_GAP: i64 = 100;
const RBF_COUNT: usize = 16;
const RBF_MIN: f32 = 2.0;
const RBF_MAX: f32 = 22.0;
/// Added under the square root of every distance, as in training.
const DISTANCE_EPS: f32 = 1e-6;

/// Atom slots: the four backbone atoms as given, then the virtual Cβ.
const N: usize = 0;
const CA: usize = 1;
const C: usize = 2;
const O: usize = 3;
const CB: usize = 4;
/// The 25 atom pairs (atom of residue i, atom of neighbour j) whose distances feed the RBFs, in
/// the order the checkpoint's edge embedding expects.
const RBF_PAIRS: [(usize, usize); 25] = [
    (CA, CA),
    (N, N),
    (C, C),
    (O, O),
    (CB, CB),
    (CA, N),
    (CA, C),
    (CA, O),
    (CA, CB),
    (N, C),
    (N, O),
    (N, CB),
    (CB, C),
    (CB, O),
    (O, C),
    (N, CA),
    (C, CA),
    (O, CA),
    (CB, CA),
    (C, N),
    (O, N),
    (CB, N),
    (C, CB),
    (O, CB),
    (C, O),
];

/// The input's chains concatenated in the order given, one entry per residue.
pub(crate) struct Residues {
    pub backbone: Vec<[[f32; 3]; 4]>,
    pub tokens: Vec<u32>,
    pub chain: Vec<usize>,
    pub residue_index: Vec<i64>,
    pub designed: Vec<bool>,
}

impl Residues {
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Checks the input and lays it out; every failure names the chain (and residue) at fault.
    pub fn from_input(input: &MpnnInput) -> Result<Self, MpnnError> {
        if input.chains.is_empty() {
            return Err(MpnnError::EmptyInput);
        }
        let total: usize = input.chains.iter().map(|chain| chain.backbone.len()).sum();
        if total > MAX_RESIDUES {
            return Err(MpnnError::TooManyResidues {
                count: total,
                limit: MAX_RESIDUES,
            });
        }
        let mut residues = Self {
            backbone: Vec::with_capacity(total),
            tokens: Vec::with_capacity(total),
            chain: Vec::with_capacity(total),
            residue_index: Vec::with_capacity(total),
            designed: Vec::with_capacity(total),
        };
        for (chain_number, chain) in input.chains.iter().enumerate() {
            if input.chains[..chain_number]
                .iter()
                .any(|c| c.id == chain.id)
            {
                return Err(MpnnError::DuplicateChain(chain.id.clone()));
            }
            if chain.backbone.is_empty() {
                return Err(MpnnError::EmptyChain(chain.id.clone()));
            }
            let sequence_length = chain.sequence.chars().count();
            if sequence_length != chain.backbone.len() {
                return Err(MpnnError::LengthMismatch {
                    chain: chain.id.clone(),
                    sequence: sequence_length,
                    backbone: chain.backbone.len(),
                });
            }
            for (residue, (letter, atoms)) in
                chain.sequence.chars().zip(&chain.backbone).enumerate()
            {
                let token = ALPHABET
                    .find(letter)
                    .ok_or_else(|| MpnnError::UnknownResidue {
                        chain: chain.id.clone(),
                        residue,
                        letter,
                    })?;
                if let Some(&value) = atoms
                    .iter()
                    .flatten()
                    .find(|v| !v.is_finite() || v.abs() > MAX_COORDINATE)
                {
                    return Err(MpnnError::BadCoordinate {
                        chain: chain.id.clone(),
                        residue,
                        value,
                    });
                }
                let position = residues.tokens.len() as i64;
                residues.backbone.push(*atoms);
                residues.tokens.push(token as u32);
                residues.chain.push(chain_number);
                residues
                    .residue_index
                    .push(CHAIN_INDEX_GAP * chain_number as i64 + position);
                residues.designed.push(chain.designed);
            }
        }
        Ok(residues)
    }
}

/// The k-nearest-neighbour graph over Cα with each edge's raw features, row-major [L, K, ..].
pub(crate) struct Graph {
    pub neighbours: usize,
    pub neighbour_index: Vec<u32>,
    pub position_class: Vec<u32>,
    pub rbf: Vec<f32>,
}

fn sub(a: [f32; 3], b: [f32; 3]) -> [f32; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

fn distance(a: [f32; 3], b: [f32; 3]) -> f32 {
    let d = sub(a, b);
    (d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + DISTANCE_EPS).sqrt()
}

/// N, Cα, C, O and the virtual Cβ placed from the backbone with the model's fixed coefficients.
fn with_virtual_cb(backbone: &[[f32; 3]; 4]) -> [[f32; 3]; 5] {
    let b = sub(backbone[CA], backbone[N]);
    let c = sub(backbone[C], backbone[CA]);
    let a = [
        b[1] * c[2] - b[2] * c[1],
        b[2] * c[0] - b[0] * c[2],
        b[0] * c[1] - b[1] * c[0],
    ];
    let cb: [f32; 3] = std::array::from_fn(|axis| {
        -0.582_734_3 * a[axis] + 0.568_028_3 * b[axis] - 0.540_674_7 * c[axis] + backbone[CA][axis]
    });
    [backbone[N], backbone[CA], backbone[C], backbone[O], cb]
}

impl Graph {
    pub fn build(residues: &Residues) -> Self {
        let len = residues.len();
        let neighbours = NEIGHBOURS.min(len);
        let atoms: Vec<[[f32; 3]; 5]> = residues.backbone.iter().map(with_virtual_cb).collect();
        let rbf_centres: [f32; RBF_COUNT] = std::array::from_fn(|m| {
            RBF_MIN + (RBF_MAX - RBF_MIN) * m as f32 / (RBF_COUNT - 1) as f32
        });
        let rbf_width = (RBF_MAX - RBF_MIN) / RBF_COUNT as f32;

        let mut graph = Self {
            neighbours,
            neighbour_index: Vec::with_capacity(len * neighbours),
            position_class: Vec::with_capacity(len * neighbours),
            rbf: Vec::with_capacity(len * neighbours * RBF_PAIRS.len() * RBF_COUNT),
        };
        let mut by_distance: Vec<(f32, usize)> = Vec::with_capacity(len);
        for i in 0..len {
            by_distance.clear();
            by_distance.extend((0..len).map(|j| (distance(atoms[i][CA], atoms[j][CA]), j)));
            // Nearest first; ties broken by index so the graph never depends on sort stability.
            let nearest =
                |x: &(f32, usize), y: &(f32, usize)| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1));
            if neighbours < len {
                by_distance.select_nth_unstable_by(neighbours - 1, nearest);
            }
            by_distance.truncate(neighbours);
            by_distance.sort_unstable_by(nearest);
            for &(_, j) in &by_distance {
                graph.neighbour_index.push(j as u32);
                graph
                    .position_class
                    .push(if residues.chain[i] == residues.chain[j] {
                        let offset = residues.residue_index[i] - residues.residue_index[j];
                        (offset + MAX_RELATIVE_OFFSET).clamp(0, 2 * MAX_RELATIVE_OFFSET) as u32
                    } else {
                        OTHER_CHAIN_CLASS
                    });
                for &(from, to) in &RBF_PAIRS {
                    let d = distance(atoms[i][from], atoms[j][to]);
                    graph.rbf.extend(rbf_centres.iter().map(|&mu| {
                        let z = (d - mu) / rbf_width;
                        (-(z * z)).exp()
                    }));
                }
            }
        }
        graph
    }
}
