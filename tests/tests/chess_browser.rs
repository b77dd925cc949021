//! The chess board end to end: a real Chromium, driven by `tests/browser/chess.mjs`
//! (playwright-core), reads the agent's recorded Elo in the lobby, plays the DeepSacrifice agent
//! on the real server by clicking and dragging pieces, resigns, reads the Stockfish-judged review
//! (evaluation graph, marks), rates a move and downloads the annotated PGN, then opens a game as
//! Black. The server's own record of the first
//! game is then checked against what the browser did.
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
    // Stockfish (Debian's, which `make test` installs) judges, so the review has its graph,
    // marks and evaluations.
    let stockfish = lachesis::chess::oracle_config::OracleSettings::resolve(
        &lachesis::chess::oracle_config::StockfishArgs {
            stockfish_depth: Some(8),
            ..Default::default()
        },
    )
    .unwrap()
    .expect("no Stockfish: apt-get install stockfish (make test installs it)");
    let database = fresh_database().await;
    let app = TestApp::spawn_with(lachesis::config::ServeConfig {
        stockfish: Some(stockfish),
        ..config_for(&database)
    })
    .await;
    // A yardstick result as `lachesis chess rate --record` stores it, for version 0 (which the
    // first answer of the agent endpoint creates).
    app.get("/api/chess/agent").await;
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&database)
        .await
        .unwrap();
    let rating = lachesis::chess::ratings::NewRating {
        policy_version: 0,
        elo: Some(811.6),
        elo_low: Some(704.9),
        elo_high: Some(903.2),
        games: 60,
        calibration_games: 50,
        sacrifice_rate: 0.042,
    };
    lachesis::chess::ratings::insert(&mut conn, &rating)
        .await
        .unwrap();

    let report = run_script("chess.mjs", &app.base, &[], Duration::from_secs(300))
        .await
        .passed();
    assert_eq!(
        report["agent_rating"], "Elo 812 (95% 705–903), sacrifice rate 0.04 — version 0",
        "the lobby shows the recorded Elo"
    );
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

    // The evaluation graph has a point per judged agent move, higher where White stands better,
    // and each row shows the move's mark and Stockfish's view.
    let points = report["eval_points"].as_array().expect("graph points");
    assert_eq!(points.len(), agent_moves.len(), "{report:#}");
    for (point, record) in points.iter().zip(&agent_moves) {
        let reward = record.reward.as_ref().unwrap();
        let engine = reward.engine.as_ref().expect("Stockfish's figures");
        assert_eq!(point["ply"], record.ply);
        // The agent has Black: White's view is the negation of the mover's.
        let white_pawns = (-f64::from(engine.played_cp) / 100.0).clamp(-5.0, 5.0);
        let y = point["y"].as_f64().unwrap();
        assert!(
            (y - (70.0 - white_pawns / 5.0 * 64.0)).abs() < 0.11,
            "{point} {engine:?}"
        );
        assert!(
            point["title"].as_str().unwrap().starts_with(&record.san),
            "{point}"
        );
    }
    for (row, record) in shown.iter().zip(&agent_moves) {
        let reward = record.reward.as_ref().unwrap();
        assert_eq!(
            row["mark"],
            reward.mark.map(|m| m.symbol()).unwrap_or(""),
            "{row}"
        );
        let engine = reward.engine.as_ref().unwrap();
        let better = row["better"].as_str().unwrap();
        match &engine.better_move {
            Some(best) => assert!(better.contains(&format!("best {best}")), "{better}"),
            None => assert!(better.ends_with("; best"), "{better}"),
        }
    }
    // The downloaded file is the annotated PGN: an evaluation per agent move, and a glyph per mark.
    let downloaded = report["downloaded_pgn"]
        .as_str()
        .expect("the downloaded PGN");
    assert_eq!(downloaded.trim_end(), pgn.trim_end());
    assert_eq!(
        downloaded.matches("[%eval ").count(),
        agent_moves.len(),
        "{downloaded}"
    );
    let marked = agent_moves
        .iter()
        .filter(|m| m.reward.as_ref().unwrap().mark.is_some())
        .count();
    assert_eq!(downloaded.matches(" $").count(), marked, "{downloaded}");

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

/// A spectator in Chromium (`tests/browser/spectate.mjs`): with accounts on, Ada opens her game to
/// spectators; a visitor who is not signed in follows the arena's link to it and watches her
/// moves, played here over HTTP every few seconds, and the agent's answers arrive live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spectator_watches_a_public_game_live_from_the_arena() {
    use std::sync::atomic::{AtomicBool, Ordering};

    use lachesis_shared::chess::rules;
    use lachesis_tests::{Caller, sign_up};
    use reqwest::{Method, StatusCode};

    check_prerequisites();
    let app = lachesis_tests::accounts_app().await;
    let ada = sign_up(&app, "/api/auth/setup", "ada", "lab").await;
    let id = lachesis_tests::start_chess_game(&app, &ada, "black")
        .await
        .id;
    let path = format!("/api/chess/games/{id}");
    let (status, _) = app
        .call(
            Caller::Session(&ada),
            Method::PUT,
            &format!("{path}/visibility"),
            Some(json!({"public": true})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);

    let watched = AtomicBool::new(false);
    let spectator = async {
        let run = run_script(
            "spectate.mjs",
            &app.base,
            &[("GAME", id.clone())],
            Duration::from_secs(240),
        )
        .await;
        watched.store(true, Ordering::SeqCst);
        run
    };
    // Ada plays a legal move every few seconds until the spectator has seen enough.
    let owner = async {
        let mut played = 0;
        while !watched.load(Ordering::SeqCst) && played < 30 {
            tokio::time::sleep(Duration::from_secs(3)).await;
            let (_, view) = app
                .call(Caller::Session(&ada), Method::GET, &path, None)
                .await;
            let view: GameView = serde_json::from_value(view).unwrap();
            if view.outcome.is_some() {
                break;
            }
            let position = rules::parse_fen(&view.fen).unwrap();
            let Some(legal) = rules::legal_moves(&position).first().cloned() else {
                break;
            };
            let (status, _) = app
                .call(
                    Caller::Session(&ada),
                    Method::POST,
                    &format!("{path}/moves"),
                    Some(json!({"uci": legal.uci})),
                )
                .await;
            assert_eq!(status, StatusCode::OK);
            played += 1;
        }
    };
    let (run, ()) = tokio::join!(spectator, owner);
    let report = run.passed();
    assert_eq!(report["owner_controls"], 0, "{report}");
    assert!(report["plies_watched"].as_i64().unwrap() >= 2, "{report}");
}
