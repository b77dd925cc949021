//! Against the real engine: Debian's `stockfish`, which `make test` installs.

use std::time::Duration;

use lachesis_shared::chess::rules::{parse_fen, parse_uci};

use super::*;
use crate::stockfish::{EngineConfig, SearchLimit};

fn engine_path() -> std::path::PathBuf {
    crate::stockfish::locate()
        .expect("no Stockfish: apt-get install stockfish (make test installs it), or set LACHESIS_STOCKFISH")
}

fn pool(limit: SearchLimit, deadline: Duration) -> EnginePool {
    EnginePool::start(EngineConfig {
        limit,
        deadline,
        processes: 1,
        ..EngineConfig::new(engine_path())
    })
    .unwrap()
}

fn judged(pool: &EnginePool, fen: &str, uci: &str) -> MoveReward {
    let pos = parse_fen(fen).unwrap();
    let m = parse_uci(&pos, uci).unwrap();
    let assessment = assess(pool, &pos, m).unwrap();
    verdict(&pos, m, &assessment, &OracleSettings::default())
}

#[test]
fn no_better_move_is_named_when_the_played_move_scored_above_the_best_line() {
    // Seen in a review at depth 8: the whole position searched to +0.16 with ...d5, the agent's
    // own move searched alone to +1.66.
    let pos = parse_fen("rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1").unwrap();
    let m = parse_uci(&pos, "e7e5").unwrap();
    let mut assessment = Assessment {
        best_cp: 16,
        played_cp: 166,
        best_uci: Some("d7d5".into()),
        depth: 8,
    };
    let reward = verdict(&pos, m, &assessment, &OracleSettings::default());
    assert_eq!(reward.engine.as_ref().unwrap().better_move, None);
    assert!(
        reward.justification.contains("agrees it is the best move"),
        "{}",
        reward.justification
    );
    // Rated below the best line, the same move is told the better one.
    assessment.played_cp = -40;
    let reward = verdict(&pos, m, &assessment, &OracleSettings::default());
    assert_eq!(
        reward.engine.as_ref().unwrap().better_move.as_deref(),
        Some("d5")
    );
    assert!(
        reward
            .justification
            .contains("rates it -0.4 against +0.2 for d5"),
        "{}",
        reward.justification
    );
}

#[test]
fn a_mating_sacrifice_is_sound_and_brilliant_and_a_hung_queen_is_a_blunder() {
    let pool = pool(SearchLimit::Depth(14), Duration::from_secs(20));
    // Philidor's smothered mate: Qg8+ Rxg8 Nf7#. The queen is given for nothing but the mate.
    let smothered = judged(&pool, "5r1k/6pp/7N/3Q4/8/8/8/6K1 w - - 0 1", "d5g8");
    assert!(smothered.material_offered > 0, "{smothered:?}");
    assert_eq!(smothered.mark, Some(MoveMark::Brilliant), "{smothered:?}");
    let engine = smothered.engine.as_ref().unwrap();
    // Mate in two for the mover, and nothing better exists.
    assert_eq!(shown_eval(engine.played_cp), "#2", "{smothered:?}");
    assert_eq!(engine.better_move, None);
    assert_eq!(smothered.soundness, 10.0);
    assert_eq!(smothered.brilliance, 10.0);
    assert!(
        smothered.justification.contains("sound"),
        "{}",
        smothered.justification
    );

    // Qxf7+?? into the king's reach with no follow-up: the queen is simply lost.
    let blunder = judged(
        &pool,
        "rnb1kbnr/pppp1ppp/8/4p3/8/3B1Q2/PPPP1PPP/RNB1K1NR w KQkq - 0 1",
        "f3f7",
    );
    assert_eq!(blunder.material_offered, 800, "{blunder:?}");
    assert_eq!(blunder.mark, Some(MoveMark::Blunder), "{blunder:?}");
    assert_eq!(blunder.soundness, 0.0, "{blunder:?}");
    assert_eq!(blunder.brilliance, 0.0, "{blunder:?}");
    let engine = blunder.engine.as_ref().unwrap();
    assert!(engine.best_cp - engine.played_cp > 500, "{engine:?}");
    assert!(engine.better_move.is_some());
    assert!(
        blunder.justification.contains("does not pay"),
        "{}",
        blunder.justification
    );
    assert!(smothered.total > blunder.total);

    // A quiet opening move offers nothing and earns no mark.
    let quiet = judged(
        &pool,
        "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
        "e2e4",
    );
    assert_eq!(quiet.material_offered, 0);
    assert_eq!(quiet.mark, None, "{quiet:?}");
    assert_eq!(quiet.soundness, 5.0);
    assert_eq!(quiet.judge, STOCKFISH_JUDGE);
}

#[test]
fn an_engine_killed_mid_search_is_replaced_and_every_move_is_still_judged() {
    // Deep enough that every search runs into its deadline and is stopped there.
    let pool = std::sync::Arc::new(pool(SearchLimit::Depth(60), Duration::from_millis(800)));
    let first = pool.pids();
    assert_eq!(first.len(), 1);
    let moves = [
        (
            "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
            "e2e4",
        ),
        (
            "rnbqkbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - 0 2",
            "g1f3",
        ),
        (
            "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3",
            "f1b5",
        ),
    ];
    let judging = {
        let pool = pool.clone();
        std::thread::spawn(move || {
            moves
                .iter()
                .map(|(fen, uci)| {
                    let pos = parse_fen(fen).unwrap();
                    assess(&pool, &pos, parse_uci(&pos, uci).unwrap())
                })
                .collect::<Vec<_>>()
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let killed = std::process::Command::new("kill")
        .args(["-9", &first[0].to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let results = judging.join().unwrap();
    for (result, (fen, _)) in results.iter().zip(moves) {
        let assessment = result.as_ref().unwrap_or_else(|e| panic!("{fen}: {e}"));
        assert!(assessment.best_uci.is_some(), "{assessment:?}");
        // Opening moves: the engine calls none of them a disaster.
        assert!(assessment.loss_cp() < 100, "{fen}: {assessment:?}");
    }
    assert_eq!(pool.restarts(), 1);
    let now = pool.pids();
    assert_eq!(now.len(), 1);
    assert_ne!(now, first, "the killed process was replaced");
}

#[test]
fn a_missing_engine_is_a_typed_error() {
    let missing = EnginePool::start(EngineConfig::new("/nonexistent/stockfish"));
    assert!(matches!(missing, Err(EngineError::Spawn { .. })));
}

#[test]
fn annotations_follow_the_fall_in_winning_chances() {
    let settings = OracleSettings::default();
    let at = |best_cp: i32, played_cp: i32| Assessment {
        best_cp,
        played_cp,
        best_uci: Some("e2e4".into()),
        depth: 12,
    };
    // Chances 2/(1+e^(-0.00368208·cp)) − 1: +0.5 is 0.0918; drops of 0.1, 0.2 and 0.3 mark.
    assert!((winning_chances(50) - 0.0918).abs() < 1e-3);
    assert_eq!(mark(0, &at(50, 0), &settings), None);
    // 0.1820 − 0.0552 = 0.127.
    assert_eq!(mark(0, &at(100, 30), &settings), Some(MoveMark::Inaccuracy));
    // 0.1820 − (−0.0368) = 0.219.
    assert_eq!(mark(0, &at(100, -20), &settings), Some(MoveMark::Mistake));
    // 0.1820 − (−0.1820) = 0.364.
    assert_eq!(mark(0, &at(100, -100), &settings), Some(MoveMark::Blunder));
    // Sacrifices: near-best is brilliant, within the margin good, past it never unmarked.
    assert_eq!(mark(300, &at(80, 60), &settings), Some(MoveMark::Brilliant));
    assert_eq!(mark(300, &at(80, 40), &settings), Some(MoveMark::Good));
    // Sound by the margin, but the chances fall by 0.109: the fall decides the mark.
    assert_eq!(
        mark(300, &at(80, 20), &settings),
        Some(MoveMark::Inaccuracy)
    );
    // Both past a decided game: nothing lost.
    assert_eq!(
        mark(300, &at(2_000, 1_500), &settings),
        Some(MoveMark::Brilliant)
    );
    // A sacrifice that leaves the mover lost holds nothing, though the capped loss is nil.
    assert_eq!(at(-900, -1_100).loss_cp(), 100);
    assert_eq!(
        soundness(300, &at(-1_200, -1_500), &settings),
        Soundness::Unsound
    );
    assert_eq!(
        mark(300, &at(-1_200, -1_500), &settings),
        Some(MoveMark::Inaccuracy)
    );
    // Behind, but not by the three pawns that decide a game: a sacrifice can still be sound.
    assert_eq!(soundness(300, &at(-250, -290), &settings), Soundness::Sound);
    assert_eq!(
        soundness(300, &at(-250, -300), &settings),
        Soundness::Unsound
    );
    assert_eq!(soundness(300, &at(300, 150), &settings), Soundness::Unsound);
    assert_eq!(
        soundness(0, &at(300, 150), &settings),
        Soundness::NoSacrifice
    );
    // Unsound, though the chances barely move (0.9294 − 0.8807): still marked dubious.
    assert_eq!(
        mark(300, &at(900, 750), &settings),
        Some(MoveMark::Inaccuracy)
    );
    // A mate in three that becomes a won ending loses nothing that matters.
    assert_eq!(at(MATE_CP - 3, 1_200).loss_cp(), 0);
    assert_eq!(shown_eval(MATE_CP - 3), "#3");
    assert_eq!(shown_eval(-MATE_CP + 2), "#-2");
    assert_eq!(shown_eval(-40), "-0.4");
    assert_eq!(shown_eval(130), "+1.3");
}

#[test]
fn a_move_is_judged_the_same_whatever_the_engine_searched_before() {
    let fresh = pool(SearchLimit::Depth(10), Duration::from_secs(20));
    let used = pool(SearchLimit::Depth(10), Duration::from_secs(20));
    let fen = "r2q1rk1/ppp2ppp/2n1bn2/3pp3/1b1PP3/2NB1N2/PPP2PPP/R1BQ1RK1 w - - 0 8";
    let pos = parse_fen(fen).unwrap();
    let m = parse_uci(&pos, "d4e5").unwrap();
    // The used engine first searches other positions, and this one beside other moves.
    for other in [
        "r1bqkb1r/pppp1ppp/2n2n2/4p2Q/2B1P3/8/PPPP1PPP/RNB1K1NR w KQkq - 4 4",
        "rnbqkbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - 0 2",
    ] {
        used.analyse(other, None).unwrap();
    }
    let beside: Vec<_> = ["d4e5", "c3d5", "a2a3"]
        .iter()
        .map(|u| parse_uci(&pos, u).unwrap())
        .collect();
    assess_each(&used, &pos, &beside).unwrap();
    assert_eq!(
        assess(&used, &pos, m).unwrap(),
        assess(&fresh, &pos, m).unwrap()
    );
}
