//! The AlphaFold2-Multimer stand-in: monomers docked rigidly on the target's most hydrophobic
//! exposed face, scored by a documented interface rule. Not a prediction.

use super::fold::fold_monomer;
use super::geometry::{
    Rotation, Vec3, add, any_perpendicular, centroid, distance, normalize, principal_axis, reject,
    rotate_about, scale, sub,
};
use super::placement::{
    CONTACT_DISTANCE, NEIGHBOUR_RADIUS, alpha_carbons, atom_positions, face_site, neighbour_counts,
    push_clear, surface_tangent, transform_residues,
};
use super::{MAX_CHAINS, MAX_COMPLEX_RESIDUES, MAX_MODELS, MAX_SEQUENCE_LENGTH, StandInError};
use crate::structure::{Chain, Residue, Structure, validate_sequence};

/// Binder residues with a CA this close to a target CA are at the interface, in ångströms.
const INTERFACE_RADIUS: f64 = 10.0;
/// Sites for different binders are centred at least this far apart, in ångströms.
const SITE_SEPARATION: f64 = 15.0;
/// Each model turns the binders about their long axes by this much from the best orientation.
const MODEL_TURNS_DEGREES: [f64; MAX_MODELS] = [0.0, 25.0, -25.0, 50.0, -50.0];
/// The largest PAE AlphaFold reports, in ångströms.
const MAX_PAE: f64 = 31.75;

/// One ranked result of [`predict_complex`]; every number comes from the documented stand-in
/// model, not from a network.
#[derive(Debug, Clone, PartialEq)]
pub struct ComplexPrediction {
    /// Chain A the target, B onwards the binders, B-factors the per-residue confidence.
    pub structure: Structure,
    /// Mean per-residue confidence, 0 to 100.
    pub plddt: f64,
    /// Interface confidence, 0 to 1.
    pub iptm: f64,
    /// Whole-complex confidence, 0 to 1.
    pub ptm: f64,
    /// Expected position error between residues, L×L over all chains in order, ångströms
    /// (0 to 31.75).
    pub pae: Vec<Vec<f32>>,
}

/// Kyte-Doolittle hydropathy.
fn hydropathy(code: char) -> f64 {
    match code {
        'I' => 4.5,
        'V' => 4.2,
        'L' => 3.8,
        'F' => 2.8,
        'C' => 2.5,
        'M' => 1.9,
        'A' => 1.8,
        'G' => -0.4,
        'T' => -0.7,
        'S' => -0.8,
        'W' => -0.9,
        'Y' => -1.3,
        'P' => -1.6,
        'H' => -3.2,
        'E' | 'Q' | 'D' | 'N' => -3.5,
        'K' => -3.9,
        _ => -4.5, // R
    }
}

/// Residues binders bury at interfaces: aliphatic and aromatic.
fn is_hydrophobic(code: char) -> bool {
    "AILMFVWY".contains(code)
}

fn charge(code: char) -> i32 {
    match code {
        'K' | 'R' => 1,
        'D' | 'E' => -1,
        _ => 0,
    }
}

/// AlphaFold2-Multimer stand-in — NOT a prediction. `sequences[0]` is the target, the rest (1 to
/// 7) binders, each of 1 to 1000 standard residues and 2000 over all; each is built by
/// [`fold_monomer`]. Each binder is docked rigidly on the target's
/// most hydrophobic exposed face not taken by an earlier binder (face score of residue i: the
/// sum over residues j within 10 Å of it of exposure_j · (hydropathy_j + 4.5) / 9, exposure_j =
/// 1 − neighbours_j / most neighbours), its long axis along the surface, the side its hydropathy
/// moment points to facing the target, its CA centroid 10 Å out along the normal, then pushed out
/// until no atom is within 4 Å of an earlier chain. Model k turns each binder about its axis by
/// 0°, 25°, −25°, 50°, −50°; `models` (1 to 5) results come back ranked by 0.8·ipTM + 0.2·pTM.
///
/// Confidence, per binder b with interface residues I (CA within 10 Å of a target CA):
/// z = −1.5 + 3·f_hydrophobic(I) + 0.8·q + 1.2·min(1, |I|/12) − 2.5·max(0, 1 − H/2)
///     + (mean monomer confidence / 100 − 0.6),
/// ipTM_b = 0.05 + 0.85·σ(z), with q the charge complementarity of interface pairs (+1 opposite,
/// −1 like charges, averaged) and H the Shannon entropy (bits) of b's composition, so poly-G or
/// poly-A is penalised. ipTM is the mean over binders. Per-residue confidence: target residues
/// get monomer + 4·min(1, contacts/4); binder residues monomer·(0.7 + 0.3·ipTM_b/0.9) +
/// 6·min(1, contacts/4)·(1 if hydrophobic else 0.5); clamped to 0–100; pLDDT is their mean.
/// pTM = clamp(0.2 + 0.45·pLDDT/100 + 0.35·ipTM, 0, 1). PAE within a chain =
/// 1 + 0.2·(100 − min confidence) + 0.08·|i − j| (0.25 on the diagonal); across chains =
/// 4 + 27.75·(1 − ipTM of the pair) + 0.05·(100 − min confidence); all capped at 31.75.
pub fn predict_complex(
    sequences: &[String],
    models: usize,
) -> Result<Vec<ComplexPrediction>, StandInError> {
    if !(1..=MAX_MODELS).contains(&models) {
        return Err(StandInError::ModelCount {
            models,
            max: MAX_MODELS,
        });
    }
    if sequences.len() < 2 || sequences.len() > MAX_CHAINS {
        return Err(StandInError::ChainCount {
            count: sequences.len(),
            max: MAX_CHAINS,
        });
    }
    for (index, sequence) in sequences.iter().enumerate() {
        validate_sequence(sequence, MAX_SEQUENCE_LENGTH)
            .map_err(|source| StandInError::Sequence { index, source })?;
    }
    let residues: usize = sequences.iter().map(String::len).sum();
    if residues > MAX_COMPLEX_RESIDUES {
        return Err(StandInError::ComplexTooLong {
            residues,
            max: MAX_COMPLEX_RESIDUES,
        });
    }
    let monomers: Vec<Vec<Residue>> = sequences
        .iter()
        .map(|s| {
            fold_monomer(s).map(|structure| {
                structure
                    .chains
                    .into_iter()
                    .flat_map(|c| c.residues)
                    .collect()
            })
        })
        .collect::<Result<_, _>>()?;
    let codes: Vec<Vec<char>> = sequences.iter().map(|s| s.chars().collect()).collect();
    let target = &monomers[0];
    let target_cas = alpha_carbons(target);
    let sites = hydrophobic_sites(
        &target_cas,
        &atom_positions(target),
        &codes[0],
        monomers.len() - 1,
    );
    let tangents: Vec<Vec3> = sites
        .iter()
        .map(|site| surface_tangent(&target_cas, site.normal))
        .collect();

    let mut predictions: Vec<ComplexPrediction> = MODEL_TURNS_DEGREES[..models]
        .iter()
        .map(|turn| {
            let mut chains = vec![target.clone()];
            let mut obstacles = atom_positions(target);
            for (binder_index, binder) in monomers[1..].iter().enumerate() {
                let mut placed = binder.clone();
                let site = sites[binder_index];
                let cas = alpha_carbons(&placed);
                let axis = principal_axis(&cas);
                let facing = rotate_about(
                    hydropathy_moment(&cas, &codes[binder_index + 1], axis),
                    axis,
                    turn.to_radians(),
                );
                let rotation = Rotation::aligning(
                    axis,
                    facing,
                    tangents[binder_index],
                    scale(site.normal, -1.0),
                );
                let destination = add(site.point, scale(site.normal, CONTACT_DISTANCE));
                transform_residues(&mut placed, &rotation, destination);
                push_clear(&mut placed, &obstacles, site.normal);
                obstacles.extend(atom_positions(&placed));
                chains.push(placed);
            }
            score(chains, &codes)
        })
        .collect();
    let ranking = |p: &ComplexPrediction| 0.8 * p.iptm + 0.2 * p.ptm;
    predictions.sort_by(|a, b| ranking(b).total_cmp(&ranking(a)));
    Ok(predictions)
}

/// One site per binder, on the best-scoring faces at least [`SITE_SEPARATION`] apart (the best
/// face again when the target runs out of separate ones).
fn hydrophobic_sites(
    cas: &[Vec3],
    atoms: &[Vec3],
    codes: &[char],
    binders: usize,
) -> Vec<super::placement::Site> {
    let counts = neighbour_counts(cas);
    let most = counts.iter().copied().max().unwrap_or(0).max(1) as f64;
    let appeal: Vec<f64> = codes
        .iter()
        .zip(&counts)
        .map(|(code, n)| (1.0 - *n as f64 / most) * (hydropathy(*code) + 4.5) / 9.0)
        .collect();
    let face_score = |i: usize| -> f64 {
        (0..cas.len())
            .filter(|&j| distance(cas[i], cas[j]) <= NEIGHBOUR_RADIUS)
            .map(|j| appeal[j])
            .sum()
    };
    let mut order: Vec<(usize, f64)> = (0..cas.len()).map(|i| (i, face_score(i))).collect();
    order.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut centres: Vec<usize> = Vec::new();
    for (index, _) in &order {
        if centres.len() == binders {
            break;
        }
        if centres
            .iter()
            .all(|&c| distance(cas[c], cas[*index]) >= SITE_SEPARATION)
        {
            centres.push(*index);
        }
    }
    let best = order.first().map_or(0, |(i, _)| *i);
    centres.resize(binders, best);
    centres
        .into_iter()
        .map(|c| face_site(cas, atoms, c))
        .collect()
}

/// The direction, perpendicular to `axis`, in which a chain's hydrophobic residues point:
/// Σ hydropathy_i · (CA_i − centroid, axis component removed).
fn hydropathy_moment(cas: &[Vec3], codes: &[char], axis: Vec3) -> Vec3 {
    let centre = centroid(cas);
    let moment = cas.iter().zip(codes).fold([0.0; 3], |sum, (ca, code)| {
        add(
            sum,
            scale(reject(sub(*ca, centre), axis), hydropathy(*code)),
        )
    });
    normalize(moment).unwrap_or_else(|| any_perpendicular(axis))
}

/// Confidence for one docked arrangement (the model in [`predict_complex`]'s documentation).
fn score(chains: Vec<Vec<Residue>>, codes: &[Vec<char>]) -> ComplexPrediction {
    let cas: Vec<Vec<Vec3>> = chains.iter().map(|c| alpha_carbons(c)).collect();
    let monomer: Vec<Vec<f64>> = chains
        .iter()
        .map(|c| {
            c.iter()
                .map(|r| r.atoms.first().map_or(50.0, |a| a.b_factor))
                .collect()
        })
        .collect();
    let contacts = |chain: usize, residue: usize, other: usize| -> usize {
        cas[other]
            .iter()
            .filter(|ca| distance(**ca, cas[chain][residue]) <= INTERFACE_RADIUS)
            .count()
    };
    let mut binder_iptms = Vec::new();
    let mut target_contacts = vec![0usize; cas[0].len()];
    for b in 1..chains.len() {
        binder_iptms.push(binder_iptm(
            &cas[0],
            &cas[b],
            &codes[0],
            &codes[b],
            &monomer[b],
        ));
        for (t, count) in target_contacts.iter_mut().enumerate() {
            *count += contacts(0, t, b);
        }
    }
    let iptm = binder_iptms.iter().sum::<f64>() / binder_iptms.len().max(1) as f64;
    let mut confidence: Vec<Vec<f64>> = Vec::with_capacity(chains.len());
    confidence.push(
        monomer[0]
            .iter()
            .zip(&target_contacts)
            .map(|(p, n)| (p + 4.0 * (*n as f64 / 4.0).min(1.0)).clamp(0.0, 100.0))
            .collect(),
    );
    for b in 1..chains.len() {
        let chain_iptm = binder_iptms[b - 1];
        confidence.push(
            (0..cas[b].len())
                .map(|i| {
                    let packing = (contacts(b, i, 0) as f64 / 4.0).min(1.0);
                    let weight = if is_hydrophobic(codes[b][i]) {
                        1.0
                    } else {
                        0.5
                    };
                    (monomer[b][i] * (0.7 + 0.3 * chain_iptm / 0.9) + 6.0 * packing * weight)
                        .clamp(0.0, 100.0)
                })
                .collect(),
        );
    }
    let all: Vec<f64> = confidence.iter().flatten().copied().collect();
    let plddt = all.iter().sum::<f64>() / all.len().max(1) as f64;
    let ptm = (0.2 + 0.45 * plddt / 100.0 + 0.35 * iptm).clamp(0.0, 1.0);
    let pair_iptm = |a: usize, b: usize| match (a, b) {
        (0, b) | (b, 0) => binder_iptms[b - 1],
        (a, b) => binder_iptms[a - 1].min(binder_iptms[b - 1]),
    };
    let residues: Vec<(usize, usize, f64)> = confidence
        .iter()
        .enumerate()
        .flat_map(|(c, values)| values.iter().enumerate().map(move |(i, p)| (c, i, *p)))
        .collect();
    let pae = residues
        .iter()
        .map(|&(ca, ia, pa)| {
            residues
                .iter()
                .map(|&(cb, ib, pb)| {
                    let uncertainty = 100.0 - pa.min(pb);
                    let error = if ca != cb {
                        4.0 + 27.75 * (1.0 - pair_iptm(ca, cb)) + 0.05 * uncertainty
                    } else if ia == ib {
                        0.25
                    } else {
                        1.0 + 0.2 * uncertainty + 0.08 * ia.abs_diff(ib) as f64
                    };
                    error.clamp(0.0, MAX_PAE) as f32
                })
                .collect()
        })
        .collect();
    let structure = Structure {
        chains: chains
            .into_iter()
            .zip(&confidence)
            .zip('A'..='Z')
            .map(|((mut residues, values), letter)| {
                for (residue, value) in residues.iter_mut().zip(values) {
                    residue.atoms.iter_mut().for_each(|a| a.b_factor = *value);
                }
                Chain {
                    id: letter.to_string(),
                    residues,
                }
            })
            .collect(),
    };
    ComplexPrediction {
        structure,
        plddt,
        iptm,
        ptm,
        pae,
    }
}

/// One binder's ipTM from its interface with the target (the formula in [`predict_complex`]).
fn binder_iptm(
    target_cas: &[Vec3],
    binder_cas: &[Vec3],
    target_codes: &[char],
    binder_codes: &[char],
    binder_monomer: &[f64],
) -> f64 {
    let mut interface = 0usize;
    let mut hydrophobic = 0usize;
    let (mut complementarity, mut charged_pairs) = (0i32, 0usize);
    for (ca, code) in binder_cas.iter().zip(binder_codes) {
        let partners: Vec<usize> = (0..target_cas.len())
            .filter(|&t| distance(*ca, target_cas[t]) <= INTERFACE_RADIUS)
            .collect();
        if partners.is_empty() {
            continue;
        }
        interface += 1;
        hydrophobic += usize::from(is_hydrophobic(*code));
        for t in partners {
            let product = charge(*code) * charge(target_codes[t]);
            if product != 0 {
                complementarity -= product;
                charged_pairs += 1;
            }
        }
    }
    let hydrophobic_fraction = hydrophobic as f64 / interface.max(1) as f64;
    let charge_match = f64::from(complementarity) / charged_pairs.max(1) as f64;
    let coverage = (interface as f64 / 12.0).min(1.0);
    let low_complexity = (1.0 - shannon_entropy(binder_codes) / 2.0).max(0.0);
    let structured =
        binder_monomer.iter().sum::<f64>() / binder_monomer.len().max(1) as f64 / 100.0 - 0.6;
    let z = -1.5 + 3.0 * hydrophobic_fraction + 0.8 * charge_match + 1.2 * coverage
        - 2.5 * low_complexity
        + structured;
    0.05 + 0.85 / (1.0 + (-z).exp())
}

/// The Shannon entropy of a sequence's composition, in bits (0 for a homopolymer).
fn shannon_entropy(codes: &[char]) -> f64 {
    let mut counts = [0usize; 26];
    for code in codes {
        if code.is_ascii_uppercase() {
            counts[(*code as u8 - b'A') as usize] += 1;
        }
    }
    let total = codes.len().max(1) as f64;
    counts
        .iter()
        .filter(|&&n| n > 0)
        .map(|&n| {
            let p = n as f64 / total;
            -p * p.log2()
        })
        .sum()
}
