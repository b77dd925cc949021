use super::*;

#[test]
fn an_even_score_against_one_opponent_is_its_rating() {
    let e = estimate(&[MatchResult {
        opponent: 1500.0,
        games: 20,
        points: 10.0,
    }]);
    assert!((e.point.unwrap() - 1500.0).abs() < 1e-6, "{e:?}");
    let (low, high) = (e.low.unwrap(), e.high.unwrap());
    assert!(low < 1500.0 && high > 1500.0);
    // Symmetric for an even score; about ±160 for 20 games (SE = 400/(ln10·√(20/4)) ≈ 78).
    assert!(((1500.0 - low) - (high - 1500.0)).abs() < 1.0, "{e:?}");
    assert!((150.0..175.0).contains(&(high - 1500.0)), "{e:?}");
}

#[test]
fn three_quarters_is_191_above_the_opponent() {
    // E = 0.75 ⇔ 10^(-d/400) = 1/3 ⇔ d = 400·log10(3) = 190.85.
    let e = estimate(&[MatchResult {
        opponent: 1400.0,
        games: 40,
        points: 30.0,
    }]);
    assert!((e.point.unwrap() - 1590.85).abs() < 0.1, "{e:?}");
    assert!(e.shown().starts_with("1591 (95% "), "{}", e.shown());
}

#[test]
fn all_lost_bounds_from_above_and_all_won_from_below() {
    let lost = estimate(&[MatchResult {
        opponent: 1350.0,
        games: 10,
        points: 0.0,
    }]);
    assert_eq!((lost.point, lost.low), (None, None));
    // 10 losses: E(h)^0 (1-E(h))^10 = e^-1.92 ⇒ E(h) = 1 − e^-0.192 = 0.1747 ⇒ h = 1350 − 270.
    let h = lost.high.unwrap();
    assert!(
        (h - (1350.0 - 400.0 * ((1.0 - 0.1747) / 0.1747f64).log10())).abs() < 1.0,
        "{h}"
    );
    assert!(lost.shown().starts_with("below "));
    let won = estimate(&[MatchResult {
        opponent: 1350.0,
        games: 10,
        points: 10.0,
    }]);
    assert_eq!((won.point, won.high), (None, None));
    assert!(
        (won.low.unwrap() - (1350.0 + (1350.0 - h))).abs() < 1.0,
        "{won:?}"
    );
    assert_eq!(estimate(&[]).shown(), "no games");
}

#[test]
fn results_against_several_opponents_combine() {
    // Half against 1400 and half against 1600 with equal records: 1500 by symmetry.
    let e = estimate(&[
        MatchResult {
            opponent: 1400.0,
            games: 10,
            points: 6.4,
        },
        MatchResult {
            opponent: 1600.0,
            games: 10,
            points: 3.6,
        },
    ]);
    assert!((e.point.unwrap() - 1500.0).abs() < 1e-6, "{e:?}");
}

fn engine() -> EnginePool {
    let path = crate::stockfish::locate()
        .expect("no Stockfish: apt-get install stockfish (make test installs it)");
    EnginePool::start(crate::stockfish::EngineConfig {
        limit: crate::stockfish::SearchLimit::MoveTime(10),
        strength: Some(crate::stockfish::Strength::Elo(1350)),
        processes: 1,
        ..crate::stockfish::EngineConfig::new(path)
    })
    .unwrap()
}

#[test]
fn a_blend_plays_its_base_or_the_other_player_by_its_share() {
    use rand::SeedableRng;
    // White to move can take an undefended queen: the greedy search always does, a random
    // mover seldom (1 of the 26 legal moves).
    let pos: Chess = lachesis_shared::chess::rules::parse_fen(
        "rnb1kbnr/pppp1ppp/8/4p3/4P2q/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3",
    )
    .unwrap();
    let greedy = || Player::Search {
        depth: 1,
        temperature: 0.01,
    };
    let engine = engine();
    let mut rng = StdRng::seed_from_u64(3);
    let takes = |player: &Player, rng: &mut StdRng| {
        (0..40)
            .filter(|_| {
                let (m, _) = player.choose(&pos, &engine, rng).unwrap();
                crate::shakmaty::uci::UciMove::from_standard(m).to_string() == "f3h4"
            })
            .count()
    };
    assert_eq!(takes(&greedy(), &mut rng), 40);
    assert_eq!(
        takes(&Player::blend(greedy(), 0.0, Player::Random), &mut rng),
        40
    );
    let half = takes(&Player::blend(greedy(), 0.5, Player::Random), &mut rng);
    // About 20 + 20/26; anything from 10 to 32 passes, 40 or under 5 would not.
    assert!((10..=32).contains(&half), "{half}");
    assert!(takes(&Player::blend(greedy(), 1.0, Player::Random), &mut rng) < 10);
    assert_eq!(
        ladder()[2].name(),
        "Stockfish UCI_Elo 1350, 50% of moves by search depth 2, temperature 0.4"
    );
}

#[test]
fn a_small_ladder_is_played_and_rated_from_the_anchor() {
    use rand::SeedableRng;
    // Two cheap rungs (no Stockfish moves): the search at depth 1, and random moves.
    let rungs = [
        Player::Search {
            depth: 1,
            temperature: 0.4,
        },
        Player::Random,
    ];
    let schedule = Schedule {
        calibration_games: 2,
        agent_games: 2,
    };
    let mut seen = Vec::new();
    let report = rate(
        &rungs,
        &PolicyParams::default(),
        schedule,
        &engine(),
        &mut StdRng::seed_from_u64(1),
        |a, b, r| seen.push((a, b, r.games())),
    )
    .unwrap();
    assert_eq!(seen, [(0, 1, 2), (2, 0, 2), (2, 1, 2)]);
    assert_eq!(report.agent_games(), 4);
    assert_eq!(report.ratings.len(), 3);
    assert_eq!(report.ratings[0].point, Some(ANCHOR_ELO));
    assert!(report.agent_moves >= 4, "{report:?}");
    assert!(report.agent_sacrifices <= report.agent_moves);
    let no_rungs = rate(
        &[],
        &PolicyParams::default(),
        schedule,
        &engine(),
        &mut StdRng::seed_from_u64(1),
        |_, _, _| {},
    );
    assert!(matches!(no_rungs, Err(LadderError::NoRungs)));
}

#[test]
fn records_count_points_from_the_first_player_s_side() {
    let mut r = Record::default();
    for points in [1.0, 0.5, 0.0, 1.0] {
        r.add(points);
    }
    assert_eq!((r.wins, r.draws, r.losses, r.games()), (2, 1, 1, 4));
    assert_eq!(r.points(), 2.5);
    let white_won = GameOutcome::new(
        lachesis_shared::chess::GameEnd::Checkmate,
        Some(Side::White),
    );
    assert_eq!(points_for(&white_won, Side::White), 1.0);
    assert_eq!(points_for(&white_won, Side::Black), 0.0);
}
