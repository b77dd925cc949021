//! The judges of finished games with Stockfish at hand: Stockfish itself, and the embedded LLM
//! shown Stockfish's figures.

use lachesis_shared::chess::GameView;
use lachesis_tests::{TestApp, config_for, fresh_database};
use reqwest::StatusCode;
use serde_json::json;

use super::{assert_replays, game, post, reviewed};

/// A server whose chess judge has Stockfish (Debian's, which `make test` installs) at depth 8.
fn stockfish_config(database_url: &str) -> lachesis::config::ServeConfig {
    let args = lachesis::chess::oracle_config::StockfishArgs {
        stockfish_depth: Some(8),
        ..Default::default()
    };
    let stockfish = lachesis::chess::oracle_config::OracleSettings::resolve(&args)
        .unwrap()
        .expect("no Stockfish: apt-get install stockfish (make test installs it)");
    lachesis::config::ServeConfig {
        stockfish: Some(stockfish),
        ..config_for(database_url)
    }
}

/// Plays `person` moves as White (each answered by the agent), then resigns; the reviewed game.
async fn play_and_resign(app: &TestApp, person: &[&str]) -> GameView {
    let (status, body) = post(app, "/api/chess/games", &json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let id = game(body).id;
    for uci in person {
        let (status, body) = post(
            app,
            &format!("/api/chess/games/{id}/moves"),
            &json!({ "uci": uci }),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{uci}: {body}");
    }
    let (status, body) = post(app, &format!("/api/chess/games/{id}/resign"), &json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let view = reviewed(app, &id).await;
    assert_replays(&view);
    view
}

#[tokio::test]
async fn stockfish_judges_the_agent_and_the_pgn_carries_its_marks_and_evaluations() {
    let app = TestApp::spawn_with(stockfish_config(&fresh_database().await)).await;
    // The person gives a pawn and then a knight away: the agent's replies are judged against
    // Stockfish's best line in each position.
    let view = play_and_resign(&app, &["e2e4", "g1f3", "f3g5"]).await;
    let agent_moves: Vec<_> = view.moves.iter().filter(|m| m.by_agent).collect();
    assert_eq!(agent_moves.len(), 3);
    let mut annotated = 0;
    for m in &agent_moves {
        let reward = m.reward.as_ref().expect("agent moves are judged");
        assert_eq!(reward.judge, "stockfish", "{reward:?}");
        let engine = reward.engine.as_ref().expect("Stockfish's figures");
        assert_eq!(engine.depth, 8);
        assert!(
            reward.justification.contains("Stockfish (depth 8)"),
            "{}",
            reward.justification
        );
        // A better move is named only when Stockfish rates it above the agent's (a move searched
        // alone may score above the whole position's search at the same depth: +1.66 against
        // +0.16 in one run).
        if let Some(better) = &engine.better_move {
            assert_ne!(better, &m.san);
            assert!(engine.best_cp > engine.played_cp, "{engine:?}");
        }
        annotated += usize::from(reward.mark.is_some());
    }
    let pgn = app
        .get_text(&format!("/api/chess/games/{}/pgn", view.id))
        .await;
    // One evaluation comment per agent move, in White's view (the agent has Black).
    assert_eq!(pgn.matches("[%eval ").count(), 3, "{pgn}");
    for m in &agent_moves {
        let reward = m.reward.as_ref().unwrap();
        let engine = reward.engine.as_ref().unwrap();
        let white = -engine.played_cp;
        if white.abs() < 20_000 {
            let shown = format!("[%eval {:.2}]", f64::from(white) / 100.0);
            assert!(pgn.contains(&shown), "{shown} in {pgn}");
        }
        if let Some(mark) = reward.mark {
            assert!(pgn.contains(&format!("{} ${}", m.san, mark.nag())), "{pgn}");
        }
    }
    assert_eq!(pgn.matches(" $").count(), annotated, "{pgn}");
    assert!(pgn.trim_end().ends_with("0-1"), "{pgn}");
}

#[tokio::test]
async fn the_llm_judge_runs_with_the_embedded_model_and_stockfish_s_figures() {
    let mut config = stockfish_config(&fresh_database().await);
    config.model = Some(lachesis_tests::model_path());
    config.chess_judge = lachesis::config::ChessJudgeMode::Embedded;
    let app = TestApp::spawn_with(config).await;
    let view = play_and_resign(&app, &["d2d4", "c2c4"]).await;
    let model = app.get("/api/chess/agent").await["judge"]
        .as_str()
        .expect("the judge's name")
        .to_string();
    assert!(model != "stockfish" && model != "engine", "{model}");
    for m in view.moves.iter().filter(|m| m.by_agent) {
        let reward = m.reward.as_ref().expect("agent moves are judged");
        // The model answered: either its verdict stands, or the answer was read, found unusable
        // (with the reason), and Stockfish's verdict stood in. Never a failed call.
        if reward.judge == model {
            assert!((0.0..=10.0).contains(&reward.aggression));
            assert!(!reward.justification.is_empty());
        } else {
            assert_eq!(reward.judge, "stockfish", "{reward:?}");
            assert!(
                reward
                    .justification
                    .contains("the LLM judge's answer was unusable"),
                "{}",
                reward.justification
            );
        }
        // Either way the annotation and the figures are Stockfish's.
        assert_eq!(
            reward.engine.as_ref().map(|e| e.depth),
            Some(8),
            "{reward:?}"
        );
    }
}
