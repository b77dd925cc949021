//! What the viewer draws for a structure, computed without the browser: a sphere at each alpha
//! carbon and half a stick from it towards each chain neighbour, centred and scaled to fit, each
//! coloured by its chain or by the model's confidence (AlphaFold's pLDDT bands).

use lachesis_shared::protein::StructureTrace;

/// The fitted structure's farthest alpha carbon lies this far from the origin (world units).
pub const FIT_RADIUS: f32 = 4.0;
/// Sphere and stick radii, in ångströms (scaled with the structure).
const BALL_RADIUS: f32 = 1.0;
const STICK_RADIUS: f32 = 0.4;
/// Alpha carbons further apart than this are a chain break, not a bond (3.8 Å is the norm).
const MAX_BOND: f32 = 8.0;

/// How residues are coloured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Colouring {
    Chain,
    Plddt,
}

/// A chain's part in the design.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Target,
    Binder,
}

/// A legend entry: a colour and what it means.
#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    pub color: [u8; 3],
    pub text: String,
}

/// Everything the renderer needs, in world units.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Layout {
    pub balls: Vec<([f32; 3], [u8; 3])>,
    /// Half-sticks: from a residue to the midpoint with its neighbour, in the residue's colour.
    pub sticks: Vec<([f32; 3], [f32; 3], [u8; 3])>,
    pub ball_radius: f32,
    pub stick_radius: f32,
    /// Chains with at least one residue drawn.
    pub chains: usize,
    pub residues: usize,
    pub legend: Vec<Key>,
}

/// AlphaFold's colours for very high, confident, low and very low confidence.
pub const PLDDT_BANDS: [([u8; 3], &str); 4] = [
    ([0, 83, 214], "very high (≥ 90)"),
    ([101, 203, 243], "confident (70–90)"),
    ([255, 219, 19], "low (50–70)"),
    ([255, 125, 69], "very low (< 50)"),
];
const NO_SCORE: [u8; 3] = [150, 150, 150];
const TARGET_COLOR: [u8; 3] = [32, 178, 170];
const BINDER_COLORS: [[u8; 3]; 4] = [
    [224, 49, 140],
    [250, 176, 5],
    [132, 94, 247],
    [130, 201, 30],
];

/// The colour of a pLDDT (0 to 100).
pub fn plddt_color(plddt: f32) -> [u8; 3] {
    let band = match plddt {
        p if p >= 90.0 => 0,
        p if p >= 70.0 => 1,
        p if p >= 50.0 => 2,
        _ => 3,
    };
    PLDDT_BANDS[band].0
}

/// Whether any residue has a pLDDT.
pub fn has_plddt(trace: &StructureTrace) -> bool {
    trace
        .chains
        .iter()
        .flat_map(|c| &c.residues)
        .any(|r| r.plddt.is_some_and(f32::is_finite))
}

/// Which chain is the target: the one whose sequence is the target's (or lies in it, when long
/// enough to tell), else the first; every other chain is a binder.
pub fn roles(trace: &StructureTrace, target_sequence: &str) -> Vec<Role> {
    let matches = |codes: &str| {
        !codes.is_empty()
            && (codes == target_sequence || (codes.len() >= 20 && target_sequence.contains(codes)))
    };
    let sequences: Vec<String> = trace
        .chains
        .iter()
        .map(|c| c.residues.iter().map(|r| r.code).collect())
        .collect();
    let target = sequences.iter().position(|s| matches(s)).unwrap_or(0);
    (0..trace.chains.len())
        .map(|i| {
            if i == target {
                Role::Target
            } else {
                Role::Binder
            }
        })
        .collect()
}

fn finite(p: [f32; 3]) -> bool {
    p.iter().all(|v| v.is_finite())
}

/// Lays a structure out for drawing (residues with a non-finite coordinate are left out, and so
/// are their bonds).
pub fn layout(trace: &StructureTrace, target_sequence: &str, colouring: Colouring) -> Layout {
    let points: Vec<[f32; 3]> = trace
        .chains
        .iter()
        .flat_map(|c| &c.residues)
        .map(|r| r.ca)
        .filter(|p| finite(*p))
        .collect();
    if points.is_empty() {
        return Layout::default();
    }
    let n = points.len() as f64;
    let mut center = [0.0f64; 3];
    for p in &points {
        for k in 0..3 {
            center[k] += f64::from(p[k]) / n;
        }
    }
    let center = center.map(|v| v as f32);
    let distance = |p: [f32; 3]| {
        ((p[0] - center[0]).powi(2) + (p[1] - center[1]).powi(2) + (p[2] - center[2]).powi(2))
            .sqrt()
    };
    let extent = points
        .iter()
        .map(|p| distance(*p))
        .fold(0.0f32, f32::max)
        .max(5.0);
    let scale = FIT_RADIUS / extent;
    let fit = |p: [f32; 3]| {
        [
            (p[0] - center[0]) * scale,
            (p[1] - center[1]) * scale,
            (p[2] - center[2]) * scale,
        ]
    };

    let roles = roles(trace, target_sequence);
    let mut out = Layout {
        ball_radius: BALL_RADIUS * scale,
        stick_radius: STICK_RADIUS * scale,
        ..Layout::default()
    };
    let mut binders = 0;
    let mut missing_score = false;
    for (chain, role) in trace.chains.iter().zip(roles) {
        let chain_color = match role {
            Role::Target => TARGET_COLOR,
            Role::Binder => {
                binders += 1;
                BINDER_COLORS[(binders - 1) % BINDER_COLORS.len()]
            }
        };
        let mut drawn = 0;
        let mut previous: Option<([f32; 3], [f32; 3], [u8; 3])> = None;
        for residue in &chain.residues {
            if !finite(residue.ca) {
                previous = None;
                continue;
            }
            let color = match (colouring, residue.plddt.filter(|p| p.is_finite())) {
                (Colouring::Chain, _) => chain_color,
                (Colouring::Plddt, Some(p)) => plddt_color(p),
                (Colouring::Plddt, None) => {
                    missing_score = true;
                    NO_SCORE
                }
            };
            let at = fit(residue.ca);
            out.balls.push((at, color));
            if let Some((raw, before, before_color)) = previous
                && (0.01..=MAX_BOND).contains(&distance_between(raw, residue.ca))
            {
                let mid = [
                    (before[0] + at[0]) / 2.0,
                    (before[1] + at[1]) / 2.0,
                    (before[2] + at[2]) / 2.0,
                ];
                out.sticks.push((before, mid, before_color));
                out.sticks.push((mid, at, color));
            }
            previous = Some((residue.ca, at, color));
            drawn += 1;
        }
        if drawn > 0 {
            out.chains += 1;
            out.residues += drawn;
            if colouring == Colouring::Chain {
                let part = match role {
                    Role::Target => "target",
                    Role::Binder => "binder",
                };
                let id = if chain.id.is_empty() { "?" } else { &chain.id };
                out.legend.push(Key {
                    color: chain_color,
                    text: format!("chain {id}: {part} ({drawn} residues)"),
                });
            }
        }
    }
    if colouring == Colouring::Plddt {
        out.legend = PLDDT_BANDS
            .iter()
            .map(|(color, text)| Key {
                color: *color,
                text: format!("pLDDT {text}"),
            })
            .collect();
        if missing_score {
            out.legend.push(Key {
                color: NO_SCORE,
                text: "no pLDDT".into(),
            });
        }
    }
    out
}

fn distance_between(a: [f32; 3], b: [f32; 3]) -> f32 {
    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use lachesis_shared::protein::{ChainTrace, TracedResidue};

    fn chain(id: &str, codes: &str, x0: f32, plddt: Option<f32>) -> ChainTrace {
        ChainTrace {
            id: id.into(),
            residues: codes
                .chars()
                .enumerate()
                .map(|(i, code)| TracedResidue {
                    number: i as i32 + 1,
                    code,
                    ca: [x0 + 3.8 * i as f32, 0.0, 0.0],
                    plddt,
                })
                .collect(),
        }
    }

    #[test]
    fn a_complex_is_centred_fitted_and_coloured_by_chain() {
        let trace = StructureTrace {
            chains: vec![
                chain("B", "GGGG", 0.0, None),
                chain("A", "MKTAY", 40.0, None),
            ],
        };
        let l = layout(&trace, "MKTAY", Colouring::Chain);
        assert_eq!((l.chains, l.residues, l.balls.len()), (2, 9, 9));
        // Three bonds in the first chain, four in the second, each in two halves.
        assert_eq!(l.sticks.len(), 14);
        let farthest = l
            .balls
            .iter()
            .map(|(p, _)| (p[0] * p[0] + p[1] * p[1] + p[2] * p[2]).sqrt())
            .fold(0.0, f32::max);
        assert!((farthest - FIT_RADIUS).abs() < 1e-3);
        let mean_x: f32 = l.balls.iter().map(|(p, _)| p[0]).sum::<f32>() / 9.0;
        assert!(mean_x.abs() < 1e-3);
        // The chain whose sequence is the target's is the target, wherever it comes.
        assert_eq!(l.balls[0].1, BINDER_COLORS[0]);
        assert_eq!(l.balls[8].1, TARGET_COLOR);
        assert!(l.legend[1].text.contains("chain A: target"));
    }

    #[test]
    fn plddt_bands_and_odd_data() {
        assert_eq!(plddt_color(95.0), PLDDT_BANDS[0].0);
        assert_eq!(plddt_color(70.0), PLDDT_BANDS[1].0);
        assert_eq!(plddt_color(55.0), PLDDT_BANDS[2].0);
        assert_eq!(plddt_color(10.0), PLDDT_BANDS[3].0);
        let mut broken = chain("A", "MKTAY", 0.0, Some(80.0));
        broken.residues[2].ca = [f32::NAN, 0.0, 0.0];
        let trace = StructureTrace {
            chains: vec![
                broken,
                chain("B", "", 0.0, None),
                chain("C", "GG", 100.0, None),
            ],
        };
        assert!(has_plddt(&trace));
        let l = layout(&trace, "", Colouring::Plddt);
        // The NaN residue and the empty chain are left out, and no bond crosses the gap.
        assert_eq!((l.chains, l.residues), (2, 6));
        assert_eq!(l.sticks.len(), 6);
        assert!(l.balls.iter().all(|(p, _)| p.iter().all(|v| v.is_finite())));
        assert_eq!(l.balls[0].1, PLDDT_BANDS[1].0);
        assert_eq!(l.balls[5].1, NO_SCORE);
        assert_eq!(l.legend.len(), 5);
        assert_eq!(
            layout(&StructureTrace::default(), "", Colouring::Chain),
            Layout::default()
        );
    }
}
