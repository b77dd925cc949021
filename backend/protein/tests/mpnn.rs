//! ProteinMPNN against the reference implementation's recorded outputs, plus the sampler's
//! contract and input validation. Needs the v_48_020 checkpoint: `scripts/ensure-proteinmpnn.sh`.

use std::path::PathBuf;
use std::sync::OnceLock;

use lachesis_protein::mpnn::{
    ALPHABET_SIZE, MAX_RESIDUES, MpnnChain, MpnnError, MpnnInput, ProteinMpnn,
};
use proptest::prelude::*;
use serde::Deserialize;

const FIXTURE: &str = include_str!("fixtures/mpnn_reference.json");
const STANDARD: &str = "ACDEFGHIKLMNPQRSTVWY";

#[derive(Deserialize)]
struct Fixture {
    cases: Cases,
}

#[derive(Deserialize)]
struct Cases {
    one_chain: Case,
    two_chains: Case,
}

#[derive(Deserialize)]
struct Case {
    chains: Vec<MpnnChain>,
    decoding_order: Vec<usize>,
    log_probs: Vec<Vec<f32>>,
    score: f32,
    global_score: f32,
}

impl Case {
    fn input(&self) -> MpnnInput {
        MpnnInput {
            chains: self.chains.clone(),
        }
    }
}

fn fixture() -> &'static Fixture {
    static FIXTURE_DATA: OnceLock<Fixture> = OnceLock::new();
    FIXTURE_DATA.get_or_init(|| serde_json::from_str(FIXTURE).expect("fixture parses"))
}

/// The checkpoint's path; fails the test (never skips it) when the file is not there.
fn weights_path() -> PathBuf {
    let path = match std::env::var_os("LACHESIS_PROTEINMPNN_WEIGHTS") {
        Some(path) => PathBuf::from(path),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
            .join(".cache/lachesis/models/proteinmpnn/v_48_020.pt"),
    };
    assert!(
        path.is_file(),
        "ProteinMPNN weights missing at {}: run scripts/ensure-proteinmpnn.sh",
        path.display()
    );
    path
}

fn model() -> &'static ProteinMpnn {
    static MODEL: OnceLock<ProteinMpnn> = OnceLock::new();
    MODEL.get_or_init(|| ProteinMpnn::load(&weights_path()).expect("the v_48_020 checkpoint loads"))
}

fn max_abs_difference(ours: &[[f32; ALPHABET_SIZE]], reference: &[Vec<f32>]) -> f32 {
    assert_eq!(ours.len(), reference.len(), "one row per position");
    ours.iter()
        .zip(reference)
        .flat_map(|(a, b)| {
            assert_eq!(b.len(), ALPHABET_SIZE);
            a.iter().zip(b).map(|(x, y)| (x - y).abs())
        })
        .fold(0.0, f32::max)
}

fn check_against_reference(case: &Case) {
    let input = case.input();
    let log_probs = model()
        .log_probs(&input, &case.decoding_order)
        .expect("log_probs");
    let difference = max_abs_difference(&log_probs, &case.log_probs);
    assert!(difference < 1e-3, "max |Δ log p| = {difference}");
    let score = model().score(&input, &case.decoding_order).expect("score");
    assert!(
        (score.score - case.score).abs() < 1e-3,
        "{score:?} vs {}",
        case.score
    );
    assert!(
        (score.global_score - case.global_score).abs() < 1e-3,
        "{score:?} vs {}",
        case.global_score
    );
}

#[test]
fn log_probs_match_the_reference_for_one_chain() {
    check_against_reference(&fixture().cases.one_chain);
}

#[test]
fn log_probs_match_the_reference_for_two_chains_one_fixed() {
    check_against_reference(&fixture().cases.two_chains);
}

#[test]
fn designs_are_well_formed_and_keep_fixed_chains() {
    let input = fixture().cases.two_chains.input();
    let designs = model().design(&input, 5, 0.1, 7).expect("design");
    assert_eq!(designs.len(), 5);
    for design in &designs {
        assert_eq!(design.chains.len(), input.chains.len());
        for (designed, given) in design.chains.iter().zip(&input.chains) {
            assert_eq!(designed.id, given.id);
            assert_eq!(designed.designed, given.designed);
            assert_eq!(designed.sequence.len(), given.backbone.len());
            if given.designed {
                assert!(
                    designed.sequence.chars().all(|c| STANDARD.contains(c)),
                    "{}",
                    designed.sequence
                );
            } else {
                assert_eq!(designed.sequence, given.sequence, "fixed chains are kept");
            }
        }
        assert!(design.score.is_finite() && design.score > 0.0);
        assert!(design.global_score.is_finite() && design.global_score > 0.0);
    }
}

#[test]
fn design_scores_agree_with_scoring_the_designed_sequence() {
    let mut input = fixture().cases.two_chains.input();
    let design = model()
        .design(&input, 1, 1.0, 11)
        .expect("design")
        .remove(0);
    for (chain, designed) in input.chains.iter_mut().zip(&design.chains) {
        chain.sequence = designed.sequence.clone();
    }
    let rescored = model()
        .score(&input, &design.decoding_order)
        .expect("score");
    assert!(
        (rescored.score - design.score).abs() < 1e-4,
        "{rescored:?} vs {design:?}"
    );
    assert!((rescored.global_score - design.global_score).abs() < 1e-4);
    // The fixed chain A (after the designed chain B) is decoded first, so every designed residue
    // is conditioned on all of it.
    let (designed_len, fixed_len) = (
        input.chains[0].backbone.len(),
        input.chains[1].backbone.len(),
    );
    assert!(input.chains[0].designed && !input.chains[1].designed);
    assert!(
        design.decoding_order[..fixed_len]
            .iter()
            .all(|&p| p >= designed_len)
    );
}

#[test]
fn designs_are_reproducible_per_seed() {
    let input = fixture().cases.one_chain.input();
    let first = model().design(&input, 4, 0.5, 37).expect("design");
    let again = model().design(&input, 4, 0.5, 37).expect("design");
    let other = model().design(&input, 4, 0.5, 38).expect("design");
    assert_eq!(first, again);
    assert_ne!(first, other);
    // A design depends on its seed and index only, not on how many were requested (scores only up
    // to float rounding: a different batch size sums in a different order).
    let fewer = model().design(&input, 2, 0.5, 37).expect("design");
    for (few, many) in fewer.iter().zip(&first) {
        assert_eq!(few.chains, many.chains);
        assert_eq!(few.decoding_order, many.decoding_order);
        assert!((few.score - many.score).abs() < 1e-5);
    }
}

#[test]
fn low_temperature_designs_score_better_than_hot_ones() {
    let input = fixture().cases.one_chain.input();
    let mean_score = |temperature| {
        let designs = model().design(&input, 8, temperature, 5).expect("design");
        designs.iter().map(|d| d.score).sum::<f32>() / designs.len() as f32
    };
    let (cold, hot) = (mean_score(0.1), mean_score(2.0));
    assert!(
        cold < hot,
        "mean score at T=0.1 {cold} should be below T=2.0 {hot}"
    );
}

fn debug_input() -> MpnnInput {
    fixture().cases.one_chain.input()
}

#[test]
fn bad_inputs_are_typed_errors() {
    let model = model();
    let order: Vec<usize> = (0..29).collect();
    let check = |input: MpnnInput, expected: fn(&MpnnError) -> bool| {
        let error = model.log_probs(&input, &order).expect_err("invalid input");
        assert!(expected(&error), "unexpected {error:?}");
    };
    check(MpnnInput::default(), |e| matches!(e, MpnnError::EmptyInput));

    let mut input = debug_input();
    input.chains[0].sequence.pop();
    check(input, |e| {
        matches!(
            e,
            MpnnError::LengthMismatch {
                sequence: 28,
                backbone: 29,
                ..
            }
        )
    });

    let mut input = debug_input();
    input.chains[0].backbone[3][1][2] = f32::NAN;
    check(input, |e| {
        matches!(e, MpnnError::BadCoordinate { residue: 3, .. })
    });

    let mut input = debug_input();
    input.chains[0].backbone[0][0][0] = f32::INFINITY;
    check(input, |e| {
        matches!(e, MpnnError::BadCoordinate { residue: 0, .. })
    });

    let mut input = debug_input();
    input.chains[0].sequence.replace_range(5..6, "B");
    check(input, |e| {
        matches!(
            e,
            MpnnError::UnknownResidue {
                residue: 5,
                letter: 'B',
                ..
            }
        )
    });

    let mut input = debug_input();
    input.chains.push(MpnnChain {
        id: "B".into(),
        sequence: String::new(),
        backbone: vec![],
        designed: true,
    });
    check(
        input,
        |e| matches!(e, MpnnError::EmptyChain(id) if id == "B"),
    );

    let mut input = debug_input();
    input.chains.push(input.chains[0].clone());
    check(
        input,
        |e| matches!(e, MpnnError::DuplicateChain(id) if id == "A"),
    );

    let mut input = debug_input();
    let residue = input.chains[0].backbone[0];
    input.chains[0].backbone = vec![residue; MAX_RESIDUES + 1];
    input.chains[0].sequence = "G".repeat(MAX_RESIDUES + 1);
    check(
        input,
        |e| matches!(e, MpnnError::TooManyResidues { count, .. } if *count == MAX_RESIDUES + 1),
    );

    let input = debug_input();
    for order in [vec![0; 29], (0..28).collect(), (1..30).collect::<Vec<_>>()] {
        let error = model.log_probs(&input, &order).expect_err("bad order");
        assert!(
            matches!(error, MpnnError::InvalidDecodingOrder { len: 29 }),
            "{error:?}"
        );
    }

    for temperature in [0.0, -1.0, f32::NAN, f32::INFINITY] {
        let error = model
            .design(&input, 1, temperature, 0)
            .expect_err("bad temperature");
        assert!(
            matches!(error, MpnnError::InvalidTemperature(_)),
            "{error:?}"
        );
    }
    assert!(matches!(
        model.design(&input, 0, 0.1, 0),
        Err(MpnnError::ZeroCount)
    ));
    assert!(matches!(
        model.design(&input, usize::MAX, 0.1, 0),
        Err(MpnnError::TooManyDesigns { .. })
    ));
    let mut fixed = input.clone();
    fixed.chains[0].designed = false;
    assert!(matches!(
        model.design(&fixed, 1, 0.1, 0),
        Err(MpnnError::NothingToDesign)
    ));
}

#[test]
fn unreadable_checkpoints_are_typed_errors() {
    let directory = std::env::temp_dir().join(format!("lachesis-mpnn-test-{}", std::process::id()));
    std::fs::create_dir_all(&directory).expect("scratch directory");
    let missing = directory.join("absent.pt");
    assert!(matches!(
        ProteinMpnn::load(&missing),
        Err(MpnnError::WeightsNotFound(_))
    ));

    let garbage = directory.join("garbage.pt");
    std::fs::write(&garbage, b"not a pytorch checkpoint").expect("write");
    assert!(matches!(
        ProteinMpnn::load(&garbage),
        Err(MpnnError::Checkpoint { .. })
    ));

    let truncated = directory.join("truncated.pt");
    let bytes = std::fs::read(weights_path()).expect("weights readable");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).expect("write");
    let error = ProteinMpnn::load(&truncated)
        .err()
        .expect("a truncated checkpoint fails");
    assert!(
        matches!(
            error,
            MpnnError::Checkpoint { .. }
                | MpnnError::TensorData { .. }
                | MpnnError::MissingTensor(_)
        ),
        "{error:?}"
    );
    std::fs::remove_dir_all(&directory).expect("cleanup");
}

fn arbitrary_chain(id: &'static str) -> impl Strategy<Value = MpnnChain> {
    let coordinate = prop_oneof![
        8 => -60f32..60f32,
        1 => Just(0f32),
        1 => any::<f32>(),
    ];
    let residue = proptest::array::uniform4(proptest::array::uniform3(coordinate));
    (
        proptest::collection::vec(residue, 0..24),
        "[ACDEFGHIKLMNPQRSTVWYXZ]{0,24}",
        any::<bool>(),
    )
        .prop_map(move |(backbone, sequence, designed)| MpnnChain {
            id: id.to_owned(),
            sequence,
            backbone,
            designed,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Whatever the coordinates, lengths and letters, the model answers or names the problem.
    #[test]
    fn arbitrary_inputs_never_panic(
        chains in proptest::collection::vec(prop_oneof![arbitrary_chain("A"), arbitrary_chain("B")], 0..3),
        seed in any::<u64>(),
    ) {
        let input = MpnnInput { chains };
        let len: usize = input.chains.iter().map(|c| c.backbone.len()).sum();
        let order: Vec<usize> = (0..len).rev().collect();
        match model().log_probs(&input, &order) {
            Ok(log_probs) => prop_assert_eq!(log_probs.len(), len),
            Err(MpnnError::Candle(error)) => prop_assert!(false, "tensor failure {}", error),
            Err(_) => {}
        }
        match model().design(&input, 2, 0.3, seed) {
            Ok(designs) => {
                prop_assert_eq!(designs.len(), 2);
                for chain in designs.iter().flat_map(|d| &d.chains).filter(|c| c.designed) {
                    prop_assert!(chain.sequence.chars().all(|c| STANDARD.contains(c)));
                }
            }
            Err(MpnnError::Candle(error)) => prop_assert!(false, "tensor failure {}", error),
            Err(_) => {}
        }
    }

    /// A chain whose sequence and backbone disagree in length is always rejected as such.
    #[test]
    fn length_mismatches_are_reported(extra in 1usize..5, len in 1usize..10) {
        let mut input = debug_input();
        input.chains[0].backbone.truncate(len);
        input.chains[0].sequence = "G".repeat(len + extra);
        let order: Vec<usize> = (0..len).collect();
        let error = model().log_probs(&input, &order).expect_err("mismatch");
        let is_mismatch = matches!(error, MpnnError::LengthMismatch { sequence, backbone, .. }
            if sequence == len + extra && backbone == len);
        prop_assert!(is_mismatch, "{:?}", error);
    }
}
