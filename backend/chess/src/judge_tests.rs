use lachesis_shared::chess::rules::{parse_fen, parse_uci};
use proptest::prelude::*;

use super::*;

fn verdict(fen: &str, uci: &str) -> MoveReward {
    let pos = parse_fen(fen).unwrap();
    engine_verdict(&pos, parse_uci(&pos, uci).unwrap(), JUDGE_DEPTH)
}

#[test]
fn a_sound_sacrifice_outscores_a_blunder_and_a_quiet_move() {
    // Qxh7+?? with nothing behind it: the queen is simply lost to the king.
    let blunder = verdict(
        "rnb1kbnr/pppp1ppp/8/4p3/8/3B1Q2/PPPP1PPP/RNB1K1NR w KQkq - 0 1",
        "f3f7",
    );
    // The queen (900) less the pawn it takes (100).
    assert_eq!(blunder.material_offered, 800, "{blunder:?}");
    // The search loses more than was offered: no soundness, so no brilliance.
    assert_eq!(blunder.soundness, 0.0, "{blunder:?}");
    assert_eq!(blunder.brilliance, 0.0, "{blunder:?}");
    // Check, capture, a capped sacrifice and king pressure overflow the aggression cap of 10.
    assert_eq!(blunder.aggression, 10.0, "{blunder:?}");
    // 0.45·10 / 10: aggression alone.
    assert!((blunder.total - 0.45).abs() < 1e-12, "{blunder:?}");
    // Smothered mate: Qg8+ Rxg8 Nf7#. The queen is offered and the mate repays it.
    let sound = verdict("5r1k/6pp/7N/3Q4/8/8/8/6K1 w - - 0 1", "d5g8");
    // Queen for rook by static exchange (the knight takes back on g8).
    assert_eq!(sound.material_offered, 400, "{sound:?}");
    assert_eq!(sound.brilliance, 10.0, "{sound:?}");
    // The mating move is the best move: nothing lost against it, fully sound.
    assert_eq!(sound.soundness, 10.0, "{sound:?}");
    // 1 + 3 (check) + 2·0.5 (king attack) + 1.5·0.5 (lines) + 3 (sacrifice, capped)
    // + 0.5·0.75 (advance) = 9.125, shown to one decimal.
    assert_eq!(sound.aggression, 9.1, "{sound:?}");
    // (0.45·9.125 + 0.25·10 + 0.3·10) / 10 = (4.10625 + 2.5 + 3) / 10.
    assert!((sound.total - 0.960625).abs() < 1e-12, "{sound:?}");
    assert!(sound.brilliance > blunder.brilliance);
    assert!(sound.total > blunder.total);
    let quiet = verdict(
        "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
        "b1c3",
    );
    assert_eq!(quiet.material_offered, 0);
    assert_eq!(quiet.soundness, 5.0);
    // No check or capture: brilliance 1; aggression 1 + 0.5·0.5 (advance) = 1.25, shown 1.3.
    assert_eq!(quiet.brilliance, 1.0, "{quiet:?}");
    assert_eq!(quiet.aggression, 1.3, "{quiet:?}");
    // (0.45·1.25 + 0.25·1 + 0.3·5) / 10 = (0.5625 + 0.25 + 1.5) / 10.
    assert!((quiet.total - 0.23125).abs() < 1e-12, "{quiet:?}");
    assert!(sound.aggression > quiet.aggression);
    for r in [&blunder, &sound, &quiet] {
        assert!((0.0..=1.0).contains(&r.total));
        assert!(!r.justification.is_empty());
        assert_eq!(r.judge, ENGINE_JUDGE);
    }
}

#[test]
fn verdicts_are_read_from_prose_and_fences() {
    let text = "Sure!\n```json\n{\"aggression\": 8, \"brilliance\": 6.5, \"soundness\": 3, \"justification\": \"Bold {but} risky.\"}\n```";
    let v = parse_verdict(text).unwrap();
    assert_eq!((v.aggression, v.brilliance, v.soundness), (8.0, 6.5, 3.0));
    assert_eq!(v.justification, "Bold {but} risky.");
    let engine = MoveReward {
        material_offered: 300,
        mark: Some(lachesis_shared::chess::MoveMark::Good),
        ..verdict(
            "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
            "e2e4",
        )
    };
    let reward = v.into_reward(&engine, "smollm2");
    // (0.45·8 + 0.25·6.5 + 0.3·3) / 10 = (3.6 + 1.625 + 0.9) / 10.
    assert!((reward.total - 0.6125).abs() < 1e-12, "{reward:?}");
    assert_eq!(reward.material_offered, 300);
    assert_eq!(reward.judge, "smollm2");
    // The annotation is the engine's: the LLM scores the move, it does not grade it.
    assert_eq!(reward.mark, Some(lachesis_shared::chess::MoveMark::Good));
}

#[test]
fn the_reward_weighs_aggression_45_brilliance_25_soundness_30() {
    let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
    // Each axis alone at its top score of 10 is worth its weight.
    assert!(close(combine(10.0, 0.0, 0.0), 0.45));
    assert!(close(combine(0.0, 10.0, 0.0), 0.25));
    assert!(close(combine(0.0, 0.0, 10.0), 0.3));
    // The weights add up to 1: top marks everywhere are a reward of exactly 1, none are 0.
    assert!(close(combine(10.0, 10.0, 10.0), 1.0));
    assert!(close(combine(0.0, 0.0, 0.0), 0.0));
    // (0.45·2 + 0.25·4 + 0.3·6) / 10 = (0.9 + 1 + 1.8) / 10.
    assert!(close(combine(2.0, 4.0, 6.0), 0.37));
    // Out-of-range axes are clamped to [0, 1] after weighing.
    assert!(close(combine(20.0, 20.0, 20.0), 1.0));
    assert!(close(combine(-5.0, 0.0, 0.0), 0.0));
}

#[test]
fn every_wrong_answer_has_its_own_error() {
    assert_eq!(parse_verdict("no idea"), Err(VerdictError::NoObject));
    assert_eq!(
        parse_verdict("{\"aggression\": 1"),
        Err(VerdictError::NoObject)
    );
    assert!(matches!(
        parse_verdict(
            "{\"aggression\": \"high\", \"brilliance\": 1, \"soundness\": 1, \"justification\": \"x\"}"
        ),
        Err(VerdictError::Malformed(_))
    ));
    assert!(matches!(
        parse_verdict(
            "{\"aggression\": 1, \"brilliance\": 1, \"soundness\": 1, \"justification\": \"x\", \"extra\": 1}"
        ),
        Err(VerdictError::Malformed(_))
    ));
    assert_eq!(
        parse_verdict(
            "{\"aggression\": 11, \"brilliance\": 1, \"soundness\": 1, \"justification\": \"x\"}"
        ),
        Err(VerdictError::OutOfRange {
            field: "aggression",
            value: 11.0
        })
    );
    assert_eq!(
        parse_verdict(
            "{\"aggression\": 1, \"brilliance\": 1, \"soundness\": 1, \"justification\": \"  \"}"
        ),
        Err(VerdictError::EmptyJustification)
    );
}

proptest! {
    #[test]
    fn the_parser_never_panics(text in ".{0,300}") {
        let _ = parse_verdict(&text);
    }

    #[test]
    fn in_range_verdicts_round_trip(
        a in 0.0f64..=10.0, b in 0.0f64..=10.0, s in 0.0f64..=10.0,
        words in "[a-zA-Z ,.{}\"]{1,400}", prefix in "[a-z \n]{0,40}",
    ) {
        let object = serde_json::json!({
            "aggression": a, "brilliance": b, "soundness": s, "justification": words,
        });
        let parsed = parse_verdict(&format!("{prefix}{object} trailing"));
        if words.trim().is_empty() {
            prop_assert_eq!(parsed, Err(VerdictError::EmptyJustification));
        } else {
            let v = parsed.unwrap();
            // serde_json reads floats to within an ulp, not bit for bit.
            for (got, sent) in [(v.aggression, a), (v.brilliance, b), (v.soundness, s)] {
                prop_assert!((got - sent).abs() < 1e-9, "{} vs {}", got, sent);
            }
            prop_assert!(v.justification.chars().count() <= MAX_JUSTIFICATION + 1);
        }
    }
}
