//! The chess board end to end: a real Chromium, driven by `tests/browser/chess.mjs`
//! (playwright-core), plays the DeepSacrifice agent on the real server by clicking and dragging
//! pieces, resigns, rates a reviewed move and exports the PGN, then opens a game as Black. The
//! server's own record of the first game is then checked against what the browser did.
//!
//! Needs what `make test` provides: the built frontend (`LACHESIS_STATIC_DIR`), Node with the
//! repo's `node_modules` and `/usr/bin/chromium` (or `CHROMIUM`).

use std::time::Duration;

use lachesis_shared::chess::{GameEnd, GameView, Side};
use lachesis_tests::browser::{check_prerequisites, run_script};
use lachesis_tests::{TestApp, config_for, fresh_database};
use serde_json::json;

#[tokio::test]
async fn a_person_plays_resigns_rates_and_exports_a_game_in_the_browser() {
    check_prerequisites();
    let app = TestApp::spawn_with(config_for(&fresh_database().await)).await;

    let report = run_script("chess.mjs", &app.base, &[], Duration::from_secs(300))
        .await
        .passed();
    assert_eq!(report["dots_for_e2"], json!(["e3", "e4"]));
    assert_eq!(report["dragged"], true, "one move is made by dragging");
    assert_eq!(
        report["last_move_squares"], 2,
        "the agent's reply is highlighted"
    );
    assert_eq!(report["replay_shows_e4"], true);
    assert_eq!(report["flipped_corner"], "h1");
    assert_eq!(
        report["reloaded"], false,
        "the game must update without a reload"
    );

    // The server's record agrees with what the browser did and showed.
    let id = report["game"].as_str().expect("the game's id");
    let game: GameView = serde_json::from_value(app.get(&format!("/api/chess/games/{id}")).await)
        .expect("a GameView");
    assert_eq!(game.agent_side, Side::Black);
    let played: Vec<&str> = report["moves_played"]
        .as_array()
        .expect("moves played")
        .iter()
        .map(|m| m.as_str().expect("UCI text"))
        .collect();
    let person: Vec<&str> = game
        .moves
        .iter()
        .filter(|m| !m.by_agent)
        .map(|m| m.uci.as_str())
        .collect();
    assert_eq!(
        person, played,
        "every move the browser made, and only those"
    );
    assert!(played.len() >= 3, "{report:#}");
    assert!(
        report["socket_moves_sent"].as_u64() >= Some(played.len() as u64),
        "moves go over the live socket: {report:#}"
    );
    let sans: Vec<&str> = game.moves.iter().map(|m| m.san.as_str()).collect();
    assert_eq!(report["sans"], json!(sans), "the move list shows the game");

    let outcome = game.outcome.as_ref().expect("the game is over");
    assert_eq!(outcome.end, GameEnd::Resignation);
    assert_eq!(outcome.winner, Some(Side::Black));
    assert!(game.game_return.is_some(), "the game was reviewed");
    let pgn = report["pgn"].as_str().expect("the PGN text");
    assert!(pgn.contains("[Result \"0-1\"]"), "{pgn}");
    assert!(pgn.trim_end().ends_with("0-1"), "{pgn}");
    assert!(
        pgn.contains(&format!("1. e4 {}", game.moves[1].san)),
        "{pgn}"
    );
    assert_eq!(report["fen"], game.fen.as_str());

    // Every agent move has a reward, and the review showed exactly those numbers.
    let agent_moves: Vec<_> = game.moves.iter().filter(|m| m.by_agent).collect();
    let shown = report["rewards"].as_array().expect("review rows");
    assert_eq!(shown.len(), agent_moves.len(), "{report:#}");
    for (row, record) in shown.iter().zip(&agent_moves) {
        let reward = record.reward.as_ref().expect("a reviewed agent move");
        assert_eq!(row["ply"], record.ply);
        let close = |key: &str, value: f64, places: i32| {
            let got = row[key].as_f64().expect("a number");
            assert!(
                (got - value).abs() <= 0.5 * 10f64.powi(-places) + 1e-9,
                "{key} shown as {got}, stored {value}"
            );
        };
        close("aggression", reward.aggression, 1);
        close("brilliance", reward.brilliance, 1);
        close("soundness", reward.soundness, 1);
        close("total", reward.total, 2);
        assert!((0.0..=1.0).contains(&reward.total));
        assert!(
            row["justification"]
                .as_str()
                .is_some_and(|j| j.contains(reward.justification.trim())),
            "{row}"
        );
    }

    // The rating clicked in the browser is stored on that move.
    let rated_ply = report["rated"]["ply"].as_u64().expect("a rated ply");
    let rated = game
        .moves
        .iter()
        .find(|m| u64::from(m.ply) == rated_ply)
        .expect("the rated move");
    assert!(rated.by_agent);
    assert_eq!(rated.rating, Some(4));
    assert_eq!(report["listed_in_lobby"], true);
    assert_eq!(
        report["as_black"],
        json!({"corner": "h1", "plies": 1, "agent_opened": true}),
        "as Black the board is turned and the agent has opened"
    );
}
