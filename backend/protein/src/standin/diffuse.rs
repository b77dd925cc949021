//! The RFdiffusion stand-in: ideal poly-glycine helices laid beside the target. Not a design.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::StandInError;
use super::fold::{BuiltBackbone, EXTENDED, HELIX, build_backbone, residue_from_backbone};
use super::geometry::{
    Rotation, Vec3, add, any_perpendicular, centroid, closest_approach, cross, distance, dot, norm,
    normalize, principal_axis, reject, rotate_about, scale, sub,
};
use super::placement::{
    CONTACT_DISTANCE, Site, alpha_carbons, atom_positions, most_exposed_site, push_clear, site_at,
    surface_tangent, transform_residues,
};
use crate::contigs::{ContigSegment, Contigs, Hotspot, validate_hotspots};
use crate::structure::{Chain, Residue, Structure};

/// Designed segments longer than this are built as helix-loop-helix hairpins.
const SINGLE_HELIX_MAX: usize = 40;
/// Residues in a hairpin's loop.
const LOOP_LENGTH: usize = 4;
/// The (phi, psi) each loop residue may take: alpha-R, beta, polyproline II, alpha-L, bridge.
const LOOP_CHOICES: [(f64, f64); 5] = [HELIX, EXTENDED, (-70.0, 145.0), (60.0, 40.0), (-90.0, 0.0)];
/// The hairpin's helices should lie this far apart, axis to axis (packed helices), in ångströms.
const HAIRPIN_SEPARATION: f64 = 9.5;
/// Residues of the second helix built while scoring a loop.
const PROBE_LENGTH: usize = 8;
/// The most a seed turns a segment about the surface normal, in degrees.
const MAX_TWIST_DEGREES: f64 = 25.0;
/// The most a seed slides a segment along the surface, in ångströms.
const MAX_SLIDE: f64 = 2.0;

/// RFdiffusion stand-in — NOT a design. Output shaped like RFdiffusion's: the kept target
/// segments with their original atoms and coordinates, residues renumbered from 1 per chain, in
/// contig order; each designed segment a poly-glycine backbone (N, CA, C, O; B-factor 0) of a
/// length drawn from `min..=max` by a generator seeded with `seed`. Chains are lettered in contig
/// order, a new letter after each chain break (`A1-29/0 20-30`: A = target, B = binder).
///
/// A designed segment is an ideal α-helix (phi −57°, psi −47°), or above 40 residues a
/// helix-loop-helix hairpin whose 4-residue loop is chosen from five (phi, psi) states to make the
/// helices most antiparallel at 9.5 Å apart. It is laid with its long axis along the surface
/// (the target's long axis projected off the normal, turned by a seeded ±25°), both hairpin
/// helices at the same height, its CA centroid 10 Å out along the normal from the site (slid by a
/// seeded ±2 Å along the axis). The site is the hotspots' CA centroid, or the most exposed face
/// (fewest CA neighbours within 10 Å) without hotspots; its normal is the local outward direction
/// there, averaged with the hotspots' CA→CB directions. The segment is then pushed out along the normal until no atom of it lies
/// within 4 Å of a target atom or of an earlier designed segment.
pub fn diffuse_binder(
    target: &Structure,
    contigs: &Contigs,
    hotspots: &[Hotspot],
    seed: u64,
) -> Result<Structure, StandInError> {
    contigs.validate(target)?;
    validate_hotspots(hotspots, target, contigs)?;
    let mut rng = StdRng::seed_from_u64(seed);

    let kept: Vec<Residue> = contigs
        .segments
        .iter()
        .flat_map(|segment| kept_residues(target, segment))
        .collect();
    let kept_cas = alpha_carbons(&kept);
    let hotspot_residues: Vec<&Residue> = hotspots
        .iter()
        .filter_map(|h| {
            let chain = target.chain(&h.chain)?;
            chain.residues.iter().find(|r| r.number == h.residue)
        })
        .collect();
    let hotspot_cas: Vec<Vec3> = hotspot_residues
        .iter()
        .filter_map(|r| r.atom("CA").map(|a| a.position))
        .collect();
    // Where the hotspots' side chains point is where the binder should be.
    let side_chains = hotspot_residues
        .iter()
        .filter_map(|r| Some(sub(r.atom("CB")?.position, r.atom("CA")?.position)))
        .fold([0.0; 3], add);
    let kept_atoms = atom_positions(&kept);
    let site = if hotspot_cas.is_empty() || kept_cas.is_empty() {
        most_exposed_site(&kept_cas, &kept_atoms)
    } else {
        site_at(
            &kept_cas,
            &kept_atoms,
            centroid(&hotspot_cas),
            Some(side_chains),
        )
    };
    let tangent = surface_tangent(&kept_cas, site.normal);
    let mut obstacles = kept_atoms;

    let mut chains: Vec<Vec<Residue>> = vec![Vec::new()];
    for segment in &contigs.segments {
        match segment {
            ContigSegment::Target { .. } => {
                if let Some(current) = chains.last_mut() {
                    current.extend(kept_residues(target, segment));
                }
            }
            ContigSegment::Designed { min, max } => {
                let length = rng.random_range(*min..=*max) as usize;
                let twist = rng.random_range(-MAX_TWIST_DEGREES..=MAX_TWIST_DEGREES);
                let slide = rng.random_range(-MAX_SLIDE..=MAX_SLIDE);
                let axis = rotate_about(tangent, site.normal, twist.to_radians());
                let designed = designed_segment(length, &site, axis, slide, &obstacles);
                obstacles.extend(atom_positions(&designed));
                if let Some(current) = chains.last_mut() {
                    current.extend(designed);
                }
            }
            ContigSegment::ChainBreak => chains.push(Vec::new()),
        }
    }

    let chains = chains
        .into_iter()
        .filter(|residues| !residues.is_empty())
        .zip('A'..='Z')
        .map(|(mut residues, letter)| {
            for (index, residue) in residues.iter_mut().enumerate() {
                residue.number = index as i32 + 1;
                residue.insertion_code = None;
            }
            Chain {
                id: letter.to_string(),
                residues,
            }
        })
        .collect();
    Ok(Structure { chains })
}

/// The target residues a kept segment names, in file order; none for other segments.
fn kept_residues(target: &Structure, segment: &ContigSegment) -> Vec<Residue> {
    let ContigSegment::Target { chain, start, end } = segment else {
        return Vec::new();
    };
    target
        .chain(chain)
        .map(|c| {
            c.residues
                .iter()
                .filter(|r| (*start..=*end).contains(&r.number))
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// One designed segment, built and placed beside the site along `axis`.
fn designed_segment(
    length: usize,
    site: &Site,
    axis: Vec3,
    slide: f64,
    obstacles: &[Vec3],
) -> Vec<Residue> {
    let hairpin = (length > SINGLE_HELIX_MAX)
        .then(|| hairpin_torsions(length))
        .flatten();
    let helix_split = hairpin.as_ref().map(|(_, first)| *first);
    let torsions = hairpin.map_or_else(|| vec![HELIX; length], |(torsions, _)| torsions);
    let backbone: Vec<BuiltBackbone> = build_backbone(&torsions);
    let mut residues: Vec<Residue> = backbone
        .iter()
        .enumerate()
        .map(|(index, atoms)| {
            let mut residue = residue_from_backbone(index as i32 + 1, 'G', atoms, 0.0);
            residue.atoms.retain(|a| a.name != "CB");
            residue
        })
        .collect();
    let cas = alpha_carbons(&residues);
    let body_axis = principal_axis(&cas);
    // The side that must stay level with the surface: across the hairpin, from one helix to the
    // other, so both helices touch the target.
    let body_side = helix_split
        .and_then(|first| {
            let across = sub(
                centroid(&cas[first + LOOP_LENGTH..]),
                centroid(&cas[..first]),
            );
            normalize(reject(across, body_axis))
        })
        .unwrap_or_else(|| any_perpendicular(body_axis));
    let level = cross(site.normal, axis);
    let rotation = Rotation::aligning(body_axis, body_side, axis, level);
    let destination = add(
        add(site.point, scale(site.normal, CONTACT_DISTANCE)),
        scale(axis, slide),
    );
    transform_residues(&mut residues, &rotation, destination);
    push_clear(&mut residues, obstacles, site.normal);
    residues
}

/// Torsions for a helix-loop-helix of `length` residues and the first helix's length, or `None`
/// when no loop gives a clash-free hairpin. Every combination of [`LOOP_CHOICES`] over the loop's
/// residues is scored on the first helix plus the loop plus the start of the second helix:
/// score = cos(angle between the helix axes) + |separation − 9.5 Å| / 5; lowest wins, first on ties.
fn hairpin_torsions(length: usize) -> Option<(Vec<(f64, f64)>, usize)> {
    let first = (length - LOOP_LENGTH) / 2;
    let second = length - LOOP_LENGTH - first;
    let probe = second.min(PROBE_LENGTH);
    let second_start = first + LOOP_LENGTH;
    let combinations = LOOP_CHOICES.len().pow(LOOP_LENGTH as u32);
    let mut best: Option<(f64, Vec<(f64, f64)>)> = None;
    for combination in 0..combinations {
        let mut code = combination;
        let mut loop_torsions = Vec::with_capacity(LOOP_LENGTH);
        for _ in 0..LOOP_LENGTH {
            loop_torsions.push(LOOP_CHOICES[code % LOOP_CHOICES.len()]);
            code /= LOOP_CHOICES.len();
        }
        let torsions: Vec<(f64, f64)> = std::iter::repeat_n(HELIX, first)
            .chain(loop_torsions.iter().copied())
            .chain(std::iter::repeat_n(HELIX, probe))
            .collect();
        let cas: Vec<Vec3> = build_backbone(&torsions).iter().map(|b| b[1]).collect();
        let helix_one = &cas[..first];
        let helix_two = &cas[second_start..];
        if closest_approach(helix_two, &helix_one[..first - 2]) < 4.5 {
            continue;
        }
        let (Some(axis_one), Some(axis_two)) = (helix_axis(helix_one), helix_axis(helix_two))
        else {
            continue;
        };
        let separation = norm(reject(
            sub(centroid(helix_two), centroid(helix_one)),
            axis_one,
        ));
        let score = dot(axis_one, axis_two) + (separation - HAIRPIN_SEPARATION).abs() / 5.0;
        if best.as_ref().is_none_or(|(s, _)| score < *s) {
            best = Some((score, loop_torsions));
        }
    }
    let (_, loop_torsions) = best?;
    let torsions: Vec<(f64, f64)> = std::iter::repeat_n(HELIX, first)
        .chain(loop_torsions)
        .chain(std::iter::repeat_n(HELIX, second))
        .collect();
    let cas: Vec<Vec3> = build_backbone(&torsions).iter().map(|b| b[1]).collect();
    // The whole second helix may drift where the probe did not: refuse any non-local contact.
    let clash = cas.iter().enumerate().any(|(i, a)| {
        cas.iter()
            .enumerate()
            .skip(i + 3)
            .any(|(_, b)| distance(*a, *b) < 4.0)
    });
    (!clash).then_some((torsions, first))
}

/// A helix's axis direction from its first to its last turn (means over 4 CAs, about one turn,
/// lie near the axis); `None` for fewer than 8 residues.
fn helix_axis(cas: &[Vec3]) -> Option<Vec3> {
    if cas.len() < 8 {
        return None;
    }
    normalize(sub(centroid(&cas[cas.len() - 4..]), centroid(&cas[..4])))
}
