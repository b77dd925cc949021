//! The AlphaFold2 stand-in: ideal backbone geometry from a helix-propensity rule. Not a prediction.

use super::geometry::{Vec3, add, cross, place_atom, scale, sub};
use super::{MAX_SEQUENCE_LENGTH, StandInError};
use crate::structure::{Atom, Chain, Residue, Structure, three_letter, validate_sequence};

/// Ideal bond lengths, in ångströms (Engh & Huber).
pub(super) const N_CA: f64 = 1.458;
pub(super) const CA_C: f64 = 1.525;
pub(super) const C_N: f64 = 1.329;
pub(super) const C_O: f64 = 1.231;
/// Ideal bond angles, in degrees.
const N_CA_C: f64 = 111.2;
const CA_C_N: f64 = 116.2;
const C_N_CA: f64 = 121.7;
const CA_C_O: f64 = 120.5;
/// The peptide bond is planar and trans.
const OMEGA: f64 = 180.0;

/// Right-handed alpha helix (phi, psi), degrees.
pub(super) const HELIX: (f64, f64) = (-57.0, -47.0);
/// Extended (beta-region) backbone for everything not helical, degrees.
pub(super) const EXTENDED: (f64, f64) = (-120.0, 130.0);

/// Residues either side of a residue that its helix-propensity window averages over.
const WINDOW_HALF_WIDTH: usize = 3;
/// A window mean at or above this calls the residue helical (Chou-Fasman's neutral value is 1).
const HELIX_THRESHOLD: f64 = 1.0;
/// Helical runs shorter than this are too short to be a helix and are built extended.
const MIN_HELIX_RUN: usize = 5;

/// Chou-Fasman helix propensities P(α), by one-letter code.
fn helix_propensity(code: char) -> f64 {
    match code {
        'E' => 1.51,
        'M' => 1.45,
        'A' => 1.42,
        'L' => 1.21,
        'K' => 1.16,
        'F' => 1.13,
        'Q' => 1.11,
        'W' | 'I' => 1.08,
        'V' => 1.06,
        'D' => 1.01,
        'H' => 1.00,
        'R' => 0.98,
        'T' => 0.83,
        'S' => 0.77,
        'C' => 0.70,
        'Y' => 0.69,
        'N' => 0.67,
        _ => 0.57, // P and G, the helix breakers
    }
}

/// One residue's secondary structure call and confidence.
#[derive(Debug, Clone, Copy)]
pub(super) struct ResidueCall {
    pub(super) helical: bool,
    /// The stand-in's confidence score, 0 to 100.
    pub(super) confidence: f64,
}

/// Each residue's call. Residue i is helical when the mean Chou-Fasman P(α) over residues
/// i−3..=i+3 (clipped at the ends) is at least 1.0 and it is not a proline, and it sits in a run
/// of at least 5 such residues. Confidence (0–100) =
/// (80 if helical else 55) + clamp(20·(P̄ − 1), −10, 10) − 25·max(0, 1 − d/6), clamped to 20–95,
/// where P̄ is the window mean and d the residue's distance in residues from the nearer terminus:
/// helices score higher, ends fray.
pub(super) fn secondary_structure(sequence: &[char]) -> Vec<ResidueCall> {
    let length = sequence.len();
    let propensities: Vec<f64> = (0..length)
        .map(|i| {
            let window = &sequence
                [i.saturating_sub(WINDOW_HALF_WIDTH)..(i + WINDOW_HALF_WIDTH + 1).min(length)];
            window.iter().map(|c| helix_propensity(*c)).sum::<f64>() / window.len() as f64
        })
        .collect();
    let mut helical: Vec<bool> = (0..length)
        .map(|i| propensities[i] >= HELIX_THRESHOLD && sequence[i] != 'P')
        .collect();
    let mut start = 0;
    while start < length {
        let end = (start..length)
            .find(|&j| helical[j] != helical[start])
            .unwrap_or(length);
        if helical[start] && end - start < MIN_HELIX_RUN {
            helical[start..end].iter_mut().for_each(|h| *h = false);
        }
        start = end;
    }
    (0..length)
        .map(|i| {
            let base = if helical[i] { 80.0 } else { 55.0 };
            let from_end = i.min(length - 1 - i) as f64;
            let fraying = 25.0 * (1.0 - from_end / 6.0).max(0.0);
            let confidence = base + (20.0 * (propensities[i] - 1.0)).clamp(-10.0, 10.0) - fraying;
            ResidueCall {
                helical: helical[i],
                confidence: confidence.clamp(20.0, 95.0),
            }
        })
        .collect()
}

/// Backbone atoms of one built residue: N, CA, C, O.
pub(super) type BuiltBackbone = [Vec3; 4];

/// Builds a backbone from each residue's (phi, psi) by NeRF with ideal bond lengths and angles
/// and trans peptide bonds. The first residue starts at the origin; N_{i+1} follows psi_i,
/// CA_{i+1} omega = 180°, C_{i+1} phi_{i+1}, and O_i sits at dihedral N-CA-C-O = psi_i + 180°,
/// in the peptide plane opposite N_{i+1}.
pub(super) fn build_backbone(torsions: &[(f64, f64)]) -> Vec<BuiltBackbone> {
    let mut built: Vec<BuiltBackbone> = Vec::with_capacity(torsions.len());
    for (index, &(phi, psi)) in torsions.iter().enumerate() {
        let (n, ca, c) = match built.last() {
            None => {
                let n = [0.0, 0.0, 0.0];
                let ca = [N_CA, 0.0, 0.0];
                let angle = N_CA_C.to_radians();
                let c = add(ca, [-CA_C * angle.cos(), CA_C * angle.sin(), 0.0]);
                (n, ca, c)
            }
            Some(&[prev_n, prev_ca, prev_c, _]) => {
                let prev_psi = torsions[index - 1].1;
                let n = place_atom(prev_n, prev_ca, prev_c, C_N, CA_C_N, prev_psi);
                let ca = place_atom(prev_ca, prev_c, n, N_CA, C_N_CA, OMEGA);
                let c = place_atom(prev_c, n, ca, CA_C, N_CA_C, phi);
                (n, ca, c)
            }
        };
        let o = place_atom(n, ca, c, C_O, CA_C_O, psi + 180.0);
        built.push([n, ca, c, o]);
    }
    built
}

/// The beta carbon of an L-amino acid from its N, CA and C, with the ideal-geometry coefficients
/// ProteinMPNN and trRosetta use: with b = CA − N, c = C − CA, a = b × c,
/// CB = −0.58273431·a + 0.56802827·b − 0.54067466·c + CA.
pub(super) fn beta_carbon(n: Vec3, ca: Vec3, c: Vec3) -> Vec3 {
    let b = sub(ca, n);
    let cc = sub(c, ca);
    let a = cross(b, cc);
    add(
        add(
            add(scale(a, -0.582_734_31), scale(b, 0.568_028_27)),
            scale(cc, -0.540_674_66),
        ),
        ca,
    )
}

/// A residue from built backbone atoms, with a CB unless it is a glycine, every atom carrying
/// `b_factor`.
pub(super) fn residue_from_backbone(
    number: i32,
    code: char,
    backbone: &BuiltBackbone,
    b_factor: f64,
) -> Residue {
    let [n, ca, c, o] = *backbone;
    let atom = |name: &str, element: &str, position: Vec3| Atom {
        name: name.to_string(),
        element: element.to_string(),
        position,
        b_factor,
    };
    let mut atoms = vec![
        atom("N", "N", n),
        atom("CA", "C", ca),
        atom("C", "C", c),
        atom("O", "O", o),
    ];
    if code != 'G' {
        atoms.push(atom("CB", "C", beta_carbon(n, ca, c)));
    }
    Residue {
        number,
        insertion_code: None,
        name: three_letter(code).unwrap_or("UNK").to_string(),
        atoms,
    }
}

/// AlphaFold2 stand-in — NOT a prediction. Builds chain A for `sequence` as ideal geometry:
/// residues [`secondary_structure`] calls helical get (phi, psi) = (−57°, −47°), the rest the
/// extended (−120°, 130°); backbone N, CA, C, O by NeRF ([`build_backbone`]) with bond lengths
/// N-CA 1.458, CA-C 1.525, C-N 1.329, C=O 1.231 Å and angles N-CA-C 111.2°, CA-C-N 116.2°,
/// C-N-CA 121.7°, CA-C-O 120.5°, plus CB for non-glycines ([`beta_carbon`]). Every atom's
/// B-factor is its residue's documented confidence score (0–100), not a model's pLDDT.
/// Deterministic; sequences of 1 to 1000 standard residues.
pub fn fold_monomer(sequence: &str) -> Result<Structure, StandInError> {
    validate_sequence(sequence, MAX_SEQUENCE_LENGTH)
        .map_err(|source| StandInError::Sequence { index: 0, source })?;
    let codes: Vec<char> = sequence.chars().collect();
    let calls = secondary_structure(&codes);
    let torsions: Vec<(f64, f64)> = calls
        .iter()
        .map(|call| if call.helical { HELIX } else { EXTENDED })
        .collect();
    let backbone = build_backbone(&torsions);
    let residues = codes
        .iter()
        .zip(&backbone)
        .zip(&calls)
        .enumerate()
        .map(|(index, ((code, atoms), call))| {
            residue_from_backbone(index as i32 + 1, *code, atoms, call.confidence)
        })
        .collect();
    Ok(Structure {
        chains: vec![Chain {
            id: "A".to_string(),
            residues,
        }],
    })
}
