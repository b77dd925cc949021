//! Where a rigid body goes beside a target: exposed faces, their outward normals, and pushing a
//! placed body out of contact.

use super::geometry::{
    Rotation, Vec3, add, any_perpendicular, centroid, closest_approach, distance, normalize,
    principal_axis, reject, scale, sub,
};
use crate::structure::Residue;

/// Two alpha carbons this close count as neighbours when judging how buried a residue is.
pub(super) const NEIGHBOUR_RADIUS: f64 = 10.0;
/// A body's axis sits this far out from the surface point it is placed over, in ångströms: the
/// CA-CA distance across a packed helix-protein interface.
pub(super) const CONTACT_DISTANCE: f64 = 10.0;
/// After placement no atom of a body may come closer than this to an obstacle atom; above the
/// 3.5 Å the stand-ins promise so that rounding in a written PDB cannot break it.
const CLEARANCE: f64 = 4.0;
/// Atoms within this distance of a site set its local outward direction.
const LOCAL_RADIUS: f64 = 12.0;
/// Residues within this distance of a face's central residue make up the face.
const PATCH_RADIUS: f64 = 6.0;

/// A point on a target's surface and the outward direction there.
#[derive(Debug, Clone, Copy)]
pub(super) struct Site {
    pub(super) point: Vec3,
    pub(super) normal: Vec3,
}

/// For each alpha carbon, how many others lie within [`NEIGHBOUR_RADIUS`]: fewer is more exposed.
pub(super) fn neighbour_counts(cas: &[Vec3]) -> Vec<usize> {
    cas.iter()
        .map(|a| {
            cas.iter()
                .filter(|b| distance(*a, **b) <= NEIGHBOUR_RADIUS)
                .count()
                .saturating_sub(1)
        })
        .collect()
}

/// The site over `point`. Its normal is the local outward direction, from the centroid of the
/// target atoms within [`LOCAL_RADIUS`] of the point out through it (the whole target's CA
/// centroid when none are near), averaged with `hint` (the hotspots' CA→CB directions, where the
/// side chains a binder should meet point) when given; +z when all of that vanishes. Local, not
/// global: on an elongated target the global centroid lies along the long axis, not under the face.
pub(super) fn site_at(cas: &[Vec3], atoms: &[Vec3], point: Vec3, hint: Option<Vec3>) -> Site {
    let near: Vec<Vec3> = atoms
        .iter()
        .copied()
        .filter(|a| distance(*a, point) <= LOCAL_RADIUS)
        .collect();
    let below = if near.is_empty() {
        centroid(cas)
    } else {
        centroid(&near)
    };
    let outward = normalize(sub(point, below)).unwrap_or([0.0; 3]);
    let hinted = hint.and_then(normalize).unwrap_or([0.0; 3]);
    let normal = normalize(add(outward, hinted))
        .or_else(|| normalize(sub(point, centroid(cas))))
        .unwrap_or([0.0, 0.0, 1.0]);
    Site { point, normal }
}

/// The site over the face centred on residue `centre`: the centroid of the CAs within
/// [`PATCH_RADIUS`] of it.
pub(super) fn face_site(cas: &[Vec3], atoms: &[Vec3], centre: usize) -> Site {
    let patch: Vec<Vec3> = cas
        .iter()
        .copied()
        .filter(|ca| distance(*ca, cas[centre]) <= PATCH_RADIUS)
        .collect();
    site_at(cas, atoms, centroid(&patch), None)
}

/// The most exposed face: centred on the residue with the fewest neighbours (ties: the one
/// farthest from the centroid, then the earlier). The origin facing +z for an empty target.
pub(super) fn most_exposed_site(cas: &[Vec3], atoms: &[Vec3]) -> Site {
    if cas.is_empty() {
        return Site {
            point: [0.0; 3],
            normal: [0.0, 0.0, 1.0],
        };
    }
    let counts = neighbour_counts(cas);
    let centre_of_mass = centroid(cas);
    let centre = (0..cas.len())
        .min_by(|&a, &b| {
            counts[a]
                .cmp(&counts[b])
                .then(distance(cas[b], centre_of_mass).total_cmp(&distance(cas[a], centre_of_mass)))
        })
        .unwrap_or(0);
    face_site(cas, atoms, centre)
}

/// A direction along the surface at `normal`: the target's long axis with its normal component
/// removed, so a body laid along it follows the target; any perpendicular when the long axis is
/// the normal itself.
pub(super) fn surface_tangent(cas: &[Vec3], normal: Vec3) -> Vec3 {
    if cas.len() < 2 {
        return any_perpendicular(normal);
    }
    normalize(reject(principal_axis(cas), normal)).unwrap_or_else(|| any_perpendicular(normal))
}

/// The alpha carbons of `residues`, in order.
pub(super) fn alpha_carbons(residues: &[Residue]) -> Vec<Vec3> {
    residues
        .iter()
        .filter_map(|r| r.atom("CA").map(|a| a.position))
        .collect()
}

/// Every atom position of `residues`.
pub(super) fn atom_positions(residues: &[Residue]) -> Vec<Vec3> {
    residues
        .iter()
        .flat_map(|r| r.atoms.iter().map(|a| a.position))
        .collect()
}

/// Moves `residues` rigidly: rotated about their CA centroid, which then lands on `destination`.
pub(super) fn transform_residues(residues: &mut [Residue], rotation: &Rotation, destination: Vec3) {
    let centre = centroid(&alpha_carbons(residues));
    for atom in residues.iter_mut().flat_map(|r| r.atoms.iter_mut()) {
        atom.position = add(destination, rotation.apply(sub(atom.position, centre)));
    }
}

/// Translates `residues` along the unit vector `direction` until none of their atoms lies within
/// [`CLEARANCE`] of an obstacle atom. Each step moves by the shortfall (at least 0.5 Å), so it
/// ends within a few steps; a body that can never clear (direction parallel to a wall of atoms)
/// stops after 1000 Å.
pub(super) fn push_clear(residues: &mut [Residue], obstacles: &[Vec3], direction: Vec3) {
    let mut travelled = 0.0;
    while travelled < 1000.0 {
        let closest = closest_approach(&atom_positions(residues), obstacles);
        if closest >= CLEARANCE {
            return;
        }
        let step = (CLEARANCE - closest).max(0.5);
        for atom in residues.iter_mut().flat_map(|r| r.atoms.iter_mut()) {
            atom.position = add(atom.position, scale(direction, step));
        }
        travelled += step;
    }
}
