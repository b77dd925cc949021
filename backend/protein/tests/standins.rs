//! The geometric stand-ins: valid geometry, the target kept exactly, no clashes, and confidence
//! that tells a poly-glycine binder from a designed helix.

use lachesis_protein::contigs::{Contigs, parse_hotspots};
use lachesis_protein::standin::{StandInError, diffuse_binder, fold_monomer, predict_complex};
use lachesis_protein::structure::{Backbone, DEBUG_TARGET_PDB, Structure, StructureError};

type V = [f64; 3];

fn sub(a: V, b: V) -> V {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}
fn dot(a: V, b: V) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}
fn cross(a: V, b: V) -> V {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}
fn dist(a: V, b: V) -> f64 {
    dot(sub(a, b), sub(a, b)).sqrt()
}
fn centroid(points: &[V]) -> V {
    let n = points.len() as f64;
    let s = points
        .iter()
        .fold([0.0; 3], |s, p| [s[0] + p[0], s[1] + p[1], s[2] + p[2]]);
    s.map(|x| x / n)
}
/// The dihedral a-b-c-d in degrees (IUPAC sign).
fn dihedral(a: V, b: V, c: V, d: V) -> f64 {
    let (b0, b1, b2) = (sub(a, b), sub(c, b), sub(d, c));
    let b1n = b1.map(|x| x / dot(b1, b1).sqrt());
    let v = sub(b0, b1n.map(|x| x * dot(b0, b1n)));
    let w = sub(b2, b1n.map(|x| x * dot(b2, b1n)));
    dot(cross(b1n, v), w).atan2(dot(v, w)).to_degrees()
}

fn debug_target() -> Structure {
    Structure::from_pdb(DEBUG_TARGET_PDB).expect("the debug target parses")
}

fn backbone(structure: &Structure, chain: &str) -> Vec<Backbone> {
    structure
        .chain(chain)
        .expect("chain")
        .backbone()
        .expect("full backbone")
}

fn cas(structure: &Structure, chain: &str) -> Vec<V> {
    structure
        .chain(chain)
        .expect("chain")
        .alpha_carbons()
        .map(|a| a.position)
        .collect()
}

fn all_atoms(structure: &Structure, chain: &str) -> Vec<V> {
    let chain = structure.chain(chain).expect("chain");
    chain
        .residues
        .iter()
        .flat_map(|r| r.atoms.iter().map(|a| a.position))
        .collect()
}

const DESIGNED_HELIX: &str = "EELLKKAEELLKRAEELLKKG";

#[test]
fn fold_monomer_has_ideal_bonds_and_helices() {
    let sequence = "MSTEELLKKAEELLKRAEELLKKGSPGTVKVEVNG";
    let folded = fold_monomer(sequence).expect("folds");
    assert_eq!(folded.sequence("A").as_deref(), Some(sequence));
    let bb = backbone(&folded, "A");
    for (i, r) in bb.iter().enumerate() {
        assert!((dist(r.n, r.ca) - 1.458).abs() < 0.02);
        assert!((dist(r.ca, r.c) - 1.525).abs() < 0.02);
        assert!((dist(r.c, r.o) - 1.231).abs() < 0.02);
        if let Some(next) = bb.get(i + 1) {
            assert!((dist(r.c, next.n) - 1.329).abs() < 0.02);
            assert!(
                (dist(r.ca, next.ca) - 3.8).abs() < 0.05,
                "{}",
                dist(r.ca, next.ca)
            );
        }
    }
    // Glycines have no CB, others do; B-factors are confidence scores in 0..100.
    let chain = folded.chain("A").expect("A");
    for residue in &chain.residues {
        assert_eq!(residue.atom("CB").is_some(), residue.name != "GLY");
        assert!(
            residue
                .atoms
                .iter()
                .all(|a| (0.0..=100.0).contains(&a.b_factor))
        );
    }
    // The designed helix in the middle is a right-handed alpha helix.
    let helix = fold_monomer(DESIGNED_HELIX).expect("folds");
    let hb = backbone(&helix, "A");
    for i in 4..12 {
        let i4 = dist(hb[i].ca, hb[i + 4].ca);
        assert!((i4 - 6.2).abs() < 0.3, "CA {i} to {}: {i4}", i + 4);
        let phi = dihedral(hb[i - 1].c, hb[i].n, hb[i].ca, hb[i].c);
        let psi = dihedral(hb[i].n, hb[i].ca, hb[i].c, hb[i + 1].n);
        assert!(
            (phi + 57.0).abs() < 0.5 && (psi + 47.0).abs() < 0.5,
            "{phi} {psi}"
        );
    }
    // Helical residues score higher than the frayed ends, and the rule is deterministic.
    let plddt: Vec<f64> = helix
        .chain("A")
        .expect("A")
        .alpha_carbons()
        .map(|a| a.b_factor)
        .collect();
    assert!(plddt[10] > plddt[0]);
    assert_eq!(fold_monomer(DESIGNED_HELIX).expect("folds"), helix);
    // It writes a PDB that reads back.
    let again = Structure::from_pdb(&helix.to_pdb()).expect("parses");
    assert_eq!(again.residue_count(), DESIGNED_HELIX.len());
}

#[test]
fn fold_monomer_refuses_bad_sequences() {
    assert!(matches!(
        fold_monomer("ACDZ"),
        Err(StandInError::Sequence {
            index: 0,
            source: StructureError::InvalidResidue { .. }
        })
    ));
    assert!(matches!(
        fold_monomer(""),
        Err(StandInError::Sequence { .. })
    ));
    assert!(matches!(
        fold_monomer(&"A".repeat(1001)),
        Err(StandInError::Sequence { .. })
    ));
    assert!(fold_monomer(&"A".repeat(1000)).is_ok());
}

#[test]
fn diffuse_binder_keeps_the_target_and_places_a_clear_binder() {
    let target = debug_target();
    let contigs = Contigs::parse("A1-29/0 20-30").expect("parses");
    let hotspots = parse_hotspots(&["A10".into(), "A14".into()]).expect("parses");
    let design = diffuse_binder(&target, &contigs, &hotspots, 7).expect("designs");
    assert_eq!(design.chains.len(), 2);
    let kept = design.chain("A").expect("target chain");
    let original = target.chain("A").expect("A");
    assert_eq!(kept.residues.len(), 29);
    for (a, b) in kept.residues.iter().zip(&original.residues) {
        assert_eq!(a.atoms, b.atoms, "target atoms are kept exactly");
        assert_eq!(a.name, b.name);
    }
    let binder = design.chain("B").expect("binder chain");
    assert!((20..=30).contains(&binder.residues.len()));
    assert!(
        binder
            .residues
            .iter()
            .all(|r| r.name == "GLY" && r.atoms.len() == 4)
    );
    assert_eq!(binder.residues[0].number, 1);
    assert_eq!(
        binder.backbone().expect("backbone").len(),
        binder.residues.len()
    );

    let target_atoms = all_atoms(&target, "A");
    let binder_cas = cas(&design, "B");
    let closest = binder_cas
        .iter()
        .flat_map(|b| target_atoms.iter().map(move |t| dist(*b, *t)))
        .fold(f64::INFINITY, f64::min);
    assert!(closest >= 3.5, "binder CA {closest} Å from the target");
    let hotspot_centroid = centroid(&[
        original.residues[9].atom("CA").expect("CA").position,
        original.residues[13].atom("CA").expect("CA").position,
    ]);
    let offset = dist(centroid(&binder_cas), hotspot_centroid);
    assert!(
        offset <= 15.0,
        "binder centroid {offset} Å from the hotspots"
    );
    // And it is in contact, not drifted away.
    assert!(closest <= 8.0, "binder {closest} Å away is not touching");

    // Deterministic per seed; seeds change length or placement.
    assert_eq!(
        diffuse_binder(&target, &contigs, &hotspots, 7).expect("designs"),
        design
    );
    let variants: Vec<Vec<V>> = (0..6)
        .map(|seed| {
            cas(
                &diffuse_binder(&target, &contigs, &hotspots, seed).expect("designs"),
                "B",
            )
        })
        .collect();
    assert!(variants.iter().any(|v| v != &variants[0]));
    let lengths: std::collections::BTreeSet<usize> = variants.iter().map(Vec::len).collect();
    assert!(
        lengths.len() > 1,
        "seeds should draw different lengths: {lengths:?}"
    );

    let text = design.to_pdb();
    let again = Structure::from_pdb(&text).expect("output parses");
    assert_eq!(again.chains.len(), 2);
}

#[test]
fn diffuse_binder_handles_long_segments_partial_targets_and_bad_input() {
    let target = debug_target();
    let contigs = Contigs::parse("A5-25/0 60-70").expect("parses");
    let design = diffuse_binder(&target, &contigs, &[], 3).expect("designs");
    assert_eq!(design.chain("A").expect("A").residues.len(), 21);
    assert_eq!(design.chain("A").expect("A").residues[0].number, 1);
    let binder = backbone(&design, "B");
    assert!((60..=70).contains(&binder.len()));
    for pair in binder.windows(2) {
        assert!((dist(pair[0].c, pair[1].n) - 1.329).abs() < 0.02);
    }
    let binder_cas = cas(&design, "B");
    for (i, a) in binder_cas.iter().enumerate() {
        for b in binder_cas.iter().skip(i + 3) {
            assert!(dist(*a, *b) >= 3.8, "hairpin clashes with itself");
        }
    }
    let target_atoms = all_atoms(&design, "A");
    assert!(
        binder_cas
            .iter()
            .all(|b| target_atoms.iter().all(|t| dist(*b, *t) >= 3.5))
    );

    let two = Contigs::parse("A1-29/0 15/0 15").expect("parses");
    let design = diffuse_binder(&target, &two, &[], 1).expect("designs");
    assert_eq!(design.chains.len(), 3);
    let (b, c) = (cas(&design, "B"), cas(&design, "C"));
    assert!(b.iter().all(|x| c.iter().all(|y| dist(*x, *y) >= 3.5)));

    let outside = Contigs::parse("A1-30/0 20").expect("parses");
    assert!(matches!(
        diffuse_binder(&target, &outside, &[], 0),
        Err(StandInError::Contig(_))
    ));
    let hot = parse_hotspots(&["A28".into()]).expect("parses");
    assert!(matches!(
        diffuse_binder(&target, &contigs, &hot, 0),
        Err(StandInError::Contig(_))
    ));
}

#[test]
fn predict_complex_scores_a_designed_helix_above_poly_glycine() {
    let target = debug_target().sequence("A").expect("sequence");
    let designed = predict_complex(&[target.clone(), DESIGNED_HELIX.to_string()], 5).expect("ok");
    let poly_g = predict_complex(&[target.clone(), "G".repeat(21)], 5).expect("ok");
    assert_eq!(designed.len(), 5);
    let (best, worst) = (&designed[0], &poly_g[0]);
    assert!(
        best.iptm > worst.iptm + 0.2,
        "designed {} vs poly-G {}",
        best.iptm,
        worst.iptm
    );
    let total = target.len() + DESIGNED_HELIX.len();
    for prediction in designed.iter().chain(&poly_g) {
        assert!((0.0..=1.0).contains(&prediction.iptm));
        assert!((0.0..=1.0).contains(&prediction.ptm));
        assert!((0.0..=100.0).contains(&prediction.plddt));
        assert_eq!(prediction.pae.len(), total);
        assert!(prediction.pae.iter().all(|row| row.len() == total));
        assert!(
            prediction
                .pae
                .iter()
                .flatten()
                .all(|e| (0.0..=31.75).contains(e))
        );
        let again = Structure::from_pdb(&prediction.structure.to_pdb()).expect("parses");
        assert_eq!(again.chains.len(), 2);
        assert_eq!(again.residue_count(), total);
    }
    // Ranked by 0.8·ipTM + 0.2·pTM, best first, and deterministic.
    let rank = |p: &lachesis_protein::standin::ComplexPrediction| 0.8 * p.iptm + 0.2 * p.ptm;
    assert!(designed.windows(2).all(|w| rank(&w[0]) >= rank(&w[1])));
    assert_eq!(
        predict_complex(&[target.clone(), DESIGNED_HELIX.into()], 5).expect("ok"),
        designed
    );
    // The binder does not overlap the target.
    let structure = &best.structure;
    let target_atoms = all_atoms(structure, "A");
    assert!(
        cas(structure, "B")
            .iter()
            .all(|b| target_atoms.iter().all(|t| dist(*b, *t) >= 3.5))
    );

    // A second binder gets its own chain; limits are typed errors.
    let three = predict_complex(
        &[
            target.clone(),
            DESIGNED_HELIX.into(),
            "KLVFFAEDVGSNK".into(),
        ],
        1,
    )
    .expect("ok");
    assert_eq!(three[0].structure.chains.len(), 3);
    assert!(matches!(
        predict_complex(std::slice::from_ref(&target), 1),
        Err(StandInError::ChainCount { count: 1, .. })
    ));
    assert!(matches!(
        predict_complex(&vec![target.clone(); 9], 1),
        Err(StandInError::ChainCount { count: 9, .. })
    ));
    assert!(matches!(
        predict_complex(&vec!["A".repeat(1000); 3], 1),
        Err(StandInError::ComplexTooLong {
            residues: 3000,
            max: 2000
        })
    ));
    assert!(matches!(
        predict_complex(&[target.clone(), DESIGNED_HELIX.into()], 6),
        Err(StandInError::ModelCount { models: 6, .. })
    ));
    assert!(matches!(
        predict_complex(&[target, "AC1".into()], 1),
        Err(StandInError::Sequence { index: 1, .. })
    ));
}
