//! Vector arithmetic, NeRF chain building and rigid placement for the stand-ins.

pub(super) type Vec3 = [f64; 3];

pub(super) fn add(a: Vec3, b: Vec3) -> Vec3 {
    [a[0] + b[0], a[1] + b[1], a[2] + b[2]]
}

pub(super) fn sub(a: Vec3, b: Vec3) -> Vec3 {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

pub(super) fn scale(a: Vec3, k: f64) -> Vec3 {
    a.map(|x| x * k)
}

pub(super) fn dot(a: Vec3, b: Vec3) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

pub(super) fn cross(a: Vec3, b: Vec3) -> Vec3 {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

pub(super) fn norm(a: Vec3) -> f64 {
    dot(a, a).sqrt()
}

pub(super) fn distance(a: Vec3, b: Vec3) -> f64 {
    norm(sub(a, b))
}

/// The unit vector along `a`, or `None` when `a` is too short to have a direction.
pub(super) fn normalize(a: Vec3) -> Option<Vec3> {
    let length = norm(a);
    (length > 1e-9).then(|| scale(a, 1.0 / length))
}

/// The component of `a` perpendicular to the unit vector `axis`.
pub(super) fn reject(a: Vec3, axis: Vec3) -> Vec3 {
    sub(a, scale(axis, dot(a, axis)))
}

pub(super) fn centroid(points: &[Vec3]) -> Vec3 {
    let sum = points.iter().fold([0.0; 3], |s, p| add(s, *p));
    scale(sum, 1.0 / points.len().max(1) as f64)
}

/// A unit vector perpendicular to the unit vector `v`, chosen deterministically.
pub(super) fn any_perpendicular(v: Vec3) -> Vec3 {
    let helper = if v[0].abs() < 0.9 {
        [1.0, 0.0, 0.0]
    } else {
        [0.0, 1.0, 0.0]
    };
    normalize(cross(v, helper)).unwrap_or([0.0, 0.0, 1.0])
}

/// Rotates `v` by `angle` radians about the unit vector `axis` (Rodrigues' formula).
pub(super) fn rotate_about(v: Vec3, axis: Vec3, angle: f64) -> Vec3 {
    let (sin, cos) = angle.sin_cos();
    add(
        add(scale(v, cos), scale(cross(axis, v), sin)),
        scale(axis, dot(axis, v) * (1.0 - cos)),
    )
}

/// NeRF (natural extension reference frame, Parsons et al. 2005): the position of atom `d`
/// bonded to `c` with |cd| = `bond` Å, angle b-c-d = `angle` degrees and dihedral a-b-c-d =
/// `torsion` degrees. With bc the unit vector b→c, n the unit normal of the plane abc and
/// m = n × bc: d = c + bond·(−cos θ·bc + sin θ·cos φ·m + sin θ·sin φ·n).
pub(super) fn place_atom(a: Vec3, b: Vec3, c: Vec3, bond: f64, angle: f64, torsion: f64) -> Vec3 {
    let bc = normalize(sub(c, b)).unwrap_or([1.0, 0.0, 0.0]);
    let n = normalize(cross(sub(b, a), bc)).unwrap_or_else(|| any_perpendicular(bc));
    let m = cross(n, bc);
    let (theta, phi) = (angle.to_radians(), torsion.to_radians());
    let local = [
        -bond * theta.cos(),
        bond * theta.sin() * phi.cos(),
        bond * theta.sin() * phi.sin(),
    ];
    add(
        c,
        add(
            add(scale(bc, local[0]), scale(m, local[1])),
            scale(n, local[2]),
        ),
    )
}

/// The direction of greatest spread of `points` (the covariance matrix's leading eigenvector, by
/// power iteration from three fixed starts), as a unit vector; x when the points do not spread.
pub(super) fn principal_axis(points: &[Vec3]) -> Vec3 {
    let centre = centroid(points);
    let mut covariance = [[0.0; 3]; 3];
    for p in points {
        let d = sub(*p, centre);
        for (row, cov_row) in covariance.iter_mut().enumerate() {
            for (col, cell) in cov_row.iter_mut().enumerate() {
                *cell += d[row] * d[col];
            }
        }
    }
    let apply = |v: Vec3| -> Vec3 {
        [
            dot(covariance[0], v),
            dot(covariance[1], v),
            dot(covariance[2], v),
        ]
    };
    let mut best = ([1.0, 0.0, 0.0], 0.0);
    for start in [[1.0, 0.3, 0.1], [0.1, 1.0, 0.3], [0.3, 0.1, 1.0]] {
        let mut v = normalize(start).unwrap_or([1.0, 0.0, 0.0]);
        for _ in 0..100 {
            match normalize(apply(v)) {
                Some(next) => v = next,
                None => break,
            }
        }
        let spread = dot(v, apply(v));
        if spread > best.1 {
            best = (v, spread);
        }
    }
    // A sign convention, so the same points always give the same axis.
    let (axis, _) = best;
    let largest = axis
        .iter()
        .copied()
        .fold(0.0_f64, |m, x| if x.abs() > m.abs() { x } else { m });
    if largest < 0.0 {
        scale(axis, -1.0)
    } else {
        axis
    }
}

/// A proper rotation taking the orthonormal frame (`from_axis`, `from_side`) onto
/// (`to_axis`, `to_side`); each side is first made perpendicular to its axis.
#[derive(Debug, Clone, Copy)]
pub(super) struct Rotation {
    rows: [Vec3; 3],
}

impl Rotation {
    pub(super) fn aligning(from_axis: Vec3, from_side: Vec3, to_axis: Vec3, to_side: Vec3) -> Self {
        let frame = |axis: Vec3, side: Vec3| {
            let e1 = normalize(axis).unwrap_or([1.0, 0.0, 0.0]);
            let e2 = normalize(reject(side, e1)).unwrap_or_else(|| any_perpendicular(e1));
            [e1, e2, cross(e1, e2)]
        };
        let from = frame(from_axis, from_side);
        let to = frame(to_axis, to_side);
        // R = Σ_k to_k ⊗ from_k: it maps each from_k onto to_k.
        let mut rows = [[0.0; 3]; 3];
        for (row, out) in rows.iter_mut().enumerate() {
            for (col, cell) in out.iter_mut().enumerate() {
                *cell = (0..3).map(|k| to[k][row] * from[k][col]).sum();
            }
        }
        Rotation { rows }
    }

    pub(super) fn apply(&self, v: Vec3) -> Vec3 {
        [
            dot(self.rows[0], v),
            dot(self.rows[1], v),
            dot(self.rows[2], v),
        ]
    }
}

/// The shortest distance from any of `movers` to any of `obstacles`; infinite when either is empty.
pub(super) fn closest_approach(movers: &[Vec3], obstacles: &[Vec3]) -> f64 {
    let mut closest = f64::INFINITY;
    for m in movers {
        for o in obstacles {
            let d = sub(*m, *o);
            let squared = dot(d, d);
            if squared < closest {
                closest = squared;
            }
        }
    }
    closest.sqrt()
}
