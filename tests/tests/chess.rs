//! DeepSacrifice end to end against the real server and Postgres: a person plays the agent over
//! HTTP and over the live socket, every move checked by the server; a finished game is reviewed
//! move by move (by the shallow search, by Stockfish, by the embedded LLM shown Stockfish's
//! figures), exported as PGN, rated, and the next game is played by a policy that learned.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use lachesis_shared::chess::rules::{self, START_FEN};
use lachesis_shared::chess::{GameView, Side};
use lachesis_shared::live::{ClientMsg, LiveErrorCode, LiveEvent, ServerMsg, Topic};
use lachesis_tests::{Caller, TestApp, config_for, fresh_database, sign_up};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

const WAIT: Duration = Duration::from_secs(30);

#[path = "chess/spectators.rs"]
mod spectators;

async fn post(app: &TestApp, path: &str, body: &Value) -> (StatusCode, Value) {
    let response = app
        .client
        .post(app.url(path))
        .json(body)
        .send()
        .await
        .expect("POST");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn game(value: Value) -> GameView {
    serde_json::from_value(value).expect("a GameView")
}

/// The first legal move in the game's position, for the person's side.
fn some_legal_move(view: &GameView) -> String {
    let pos = rules::parse_fen(&view.fen).unwrap();
    rules::legal_moves(&pos)
        .first()
        .expect("a legal move")
        .uci
        .clone()
}

/// Replays the moves from the start: every one legal, and the stored position is where they lead.
fn assert_replays(view: &GameView) {
    let mut fen = view.start_fen.clone();
    for (ply, m) in view.moves.iter().enumerate() {
        assert_eq!(m.ply as usize, ply);
        let played = rules::play_uci(&fen, &m.uci, ply).expect("every stored move is legal");
        assert_eq!(played.san, m.san);
        assert_eq!(played.fen, m.fen_after);
        fen = played.fen;
    }
    assert_eq!(fen, view.fen);
}

#[tokio::test]
async fn a_game_is_played_checked_reviewed_exported_and_learned_from() {
    let app = TestApp::spawn_with(config_for(&fresh_database().await)).await;

    // The person has white: the game starts at the standard position with no moves.
    let (status, body) = post(&app, "/api/chess/games", &json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let view = game(body);
    assert_eq!(
        (view.agent_side, view.moves.len(), view.fen.as_str()),
        (Side::Black, 0, START_FEN)
    );
    assert_eq!(view.policy_version, 0);
    let id = view.id.clone();

    // e4: the answer holds the person's move and the agent's legal reply.
    let (status, body) = post(
        &app,
        &format!("/api/chess/games/{id}/moves"),
        &json!({"uci": "e2e4"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let view = game(body);
    assert_eq!(view.moves.len(), 2);
    assert_eq!(view.moves[0].san, "e4");
    assert!(!view.moves[0].by_agent && view.moves[1].by_agent);
    assert_replays(&view);

    // Illegal, malformed and unknown-field moves are refused and change nothing.
    for (body, expected) in [
        (json!({"uci": "e4e6"}), StatusCode::UNPROCESSABLE_ENTITY),
        (json!({"uci": "castle!"}), StatusCode::UNPROCESSABLE_ENTITY),
        (
            json!({"uci": "g1f3", "extra": 1}),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
    ] {
        let (status, answer) = post(&app, &format!("/api/chess/games/{id}/moves"), &body).await;
        assert_eq!(status, expected, "{body} -> {answer}");
    }
    let (status, _) = post(
        &app,
        "/api/chess/games/999999/moves",
        &json!({"uci": "e2e4"}),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let unchanged = game(app.get(&format!("/api/chess/games/{id}")).await);
    assert_eq!(unchanged.moves.len(), 2);

    // Over the socket: subscribe to the game, move, and both moves arrive as events.
    let ws_url = app.url("/ws").replacen("http://", "ws://", 1);
    let (mut ws, _) = tokio_tungstenite::connect_async(&ws_url)
        .await
        .expect("upgrade");
    let topic = Topic::Game { game: id.clone() };
    let send = |msg: ClientMsg| Message::text(serde_json::to_string(&msg).unwrap());
    ws.send(send(ClientMsg::Subscribe {
        topic: topic.clone(),
    }))
    .await
    .unwrap();
    let mut frames = Vec::new();
    let uci = some_legal_move(&unchanged);
    let mut sent_move = false;
    let mut moves_seen = Vec::new();
    while moves_seen.len() < 2 {
        let frame = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("a frame in time");
        let Some(Ok(Message::Text(text))) = frame else {
            continue;
        };
        let msg: ServerMsg = serde_json::from_str(&text).unwrap();
        match &msg {
            ServerMsg::Subscribed { .. } if !sent_move => {
                ws.send(send(ClientMsg::ChessMove {
                    game: id.clone(),
                    uci: uci.clone(),
                }))
                .await
                .unwrap();
                sent_move = true;
            }
            ServerMsg::Event {
                event: LiveEvent::ChessMove(event),
                ..
            } => moves_seen.push(event.record.clone()),
            _ => {}
        }
        frames.push(msg);
    }
    assert_eq!(moves_seen[0].uci, uci);
    assert_eq!((moves_seen[0].ply, moves_seen[1].ply), (2, 3));
    assert!(moves_seen[1].by_agent);
    // A refused socket move is an error frame naming the reason.
    ws.send(send(ClientMsg::ChessMove {
        game: id.clone(),
        uci: "a1a8".into(),
    }))
    .await
    .unwrap();
    let refusal = loop {
        let frame = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("a frame in time");
        if let Some(Ok(Message::Text(text))) = frame
            && let ServerMsg::Error { code, message } = serde_json::from_str(&text).unwrap()
        {
            break (code, message);
        }
    };
    assert_eq!(refusal.0, LiveErrorCode::Rejected);
    assert!(refusal.1.contains("a1a8"), "{}", refusal.1);

    // The person resigns: the agent wins and every agent move is judged.
    let (status, body) = post(&app, &format!("/api/chess/games/{id}/resign"), &json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let view = game(body);
    let outcome = view.outcome.clone().expect("the game is over");
    assert_eq!(outcome.result, "0-1");
    assert_replays(&view);
    let agent_moves: Vec<_> = view.moves.iter().filter(|m| m.by_agent).collect();
    assert_eq!(agent_moves.len(), 2);
    for m in &agent_moves {
        let reward = m.reward.as_ref().expect("agent moves are judged");
        assert!((0.0..=1.0).contains(&reward.total));
        assert!((0.0..=10.0).contains(&reward.aggression));
        assert!(!reward.justification.is_empty());
        assert_eq!(reward.judge, "engine");
    }
    assert!(
        view.moves
            .iter()
            .filter(|m| !m.by_agent)
            .all(|m| m.reward.is_none())
    );
    let expected_return = agent_moves
        .iter()
        .map(|m| m.reward.as_ref().unwrap().total)
        .sum::<f64>()
        + 1.0;
    assert!((view.game_return.unwrap() - expected_return).abs() < 1e-9);
    let (status, _) = post(
        &app,
        &format!("/api/chess/games/{id}/moves"),
        &json!({"uci": "d2d4"}),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);

    // PGN: tags, the moves in SAN and the result.
    let pgn = app
        .client
        .get(app.url(&format!("/api/chess/games/{id}/pgn")))
        .send()
        .await
        .unwrap();
    assert_eq!(pgn.status(), StatusCode::OK);
    let pgn = pgn.text().await.unwrap();
    assert!(pgn.contains("[Result \"0-1\"]"), "{pgn}");
    assert!(
        pgn.contains(&format!("1. e4 {}", view.moves[1].san)),
        "{pgn}"
    );
    assert!(pgn.trim_end().ends_with("0-1"), "{pgn}");

    // Ratings: agent moves only, 1 to 5.
    let agent_ply = agent_moves[0].ply;
    let (status, body) = post(
        &app,
        &format!("/api/chess/games/{id}/ratings"),
        &json!({"ply": agent_ply, "rating": 5}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(game(body).moves[agent_ply as usize].rating, Some(5));
    for body in [
        json!({"ply": 0, "rating": 3}),
        json!({"ply": agent_ply, "rating": 9}),
    ] {
        let (status, _) = post(&app, &format!("/api/chess/games/{id}/ratings"), &body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    }

    // The next game learns from the judged one first: a new policy version plays it, and the
    // agent has white, so it has already opened.
    let (status, body) = post(&app, "/api/chess/games", &json!({"agent_side": "white"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let next = game(body);
    assert_eq!(next.policy_version, 1);
    assert_eq!(next.moves.len(), 1);
    assert!(next.moves[0].by_agent);
    let agent = app.get("/api/chess/agent").await;
    assert_eq!(agent["version"], 1);
    assert_eq!(agent["games_learned"], 1);
    let weights: Vec<f64> = agent["weights"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["weight"].as_f64().unwrap())
        .collect();
    assert_ne!(
        weights,
        lachesis_chess::agent::PolicyParams::default().weights,
        "learning moved the weights"
    );
    let listed = app.get("/api/chess/games").await;
    assert_eq!(listed.as_array().unwrap().len(), 2);
    assert_eq!(listed[0]["id"], json!(next.id));
}

#[tokio::test]
async fn with_accounts_on_a_game_is_its_players_alone() {
    let mut config = config_for(&fresh_database().await);
    config.auth = true;
    let app = TestApp::spawn_with(config).await;
    let ada = sign_up(&app, "/api/auth/setup", "ada", "lab").await;
    let bob = sign_up(&app, "/api/auth/register", "bob", "rivals").await;

    let response = app
        .client
        .post(app.url("/api/chess/games"))
        .header("cookie", &ada.0)
        .header("x-csrf-token", &ada.1)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let id = game(response.json().await.unwrap()).id;

    // Without the CSRF header a cookie cannot move; nobody signed in cannot play or list.
    let no_csrf = app
        .client
        .post(app.url(&format!("/api/chess/games/{id}/moves")))
        .header("cookie", &ada.0)
        .json(&json!({"uci": "e2e4"}))
        .send()
        .await
        .unwrap();
    assert_eq!(no_csrf.status(), StatusCode::FORBIDDEN);
    assert_eq!(
        app.call(Caller::Nobody, Method::GET, "/api/chess/games", None)
            .await
            .0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        app.call(
            Caller::Nobody,
            Method::POST,
            "/api/chess/games",
            Some(json!({}))
        )
        .await
        .0,
        StatusCode::UNAUTHORIZED
    );

    // Bob sees nothing of Ada's game, over every route, as if it did not exist.
    for (method, body, path) in [
        (Method::GET, None, format!("/api/chess/games/{id}")),
        (Method::GET, None, format!("/api/chess/games/{id}/pgn")),
        (
            Method::POST,
            Some(json!({"uci": "e2e4"})),
            format!("/api/chess/games/{id}/moves"),
        ),
        (
            Method::POST,
            Some(json!({})),
            format!("/api/chess/games/{id}/resign"),
        ),
    ] {
        assert_eq!(
            app.call(Caller::Session(&bob), method, &path, body).await.0,
            StatusCode::NOT_FOUND,
            "{path}"
        );
    }
    let bobs_list: Value = app
        .client
        .get(app.url("/api/chess/games"))
        .header("cookie", &bob.0)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(bobs_list, json!([]));
    // Ada plays on; her game is untouched by Bob's attempts.
    assert_eq!(
        app.call(
            Caller::Session(&ada),
            Method::POST,
            &format!("/api/chess/games/{id}/moves"),
            Some(json!({"uci": "e2e4"}))
        )
        .await
        .0,
        StatusCode::OK
    );
    assert_eq!(
        app.call(
            Caller::Session(&ada),
            Method::GET,
            &format!("/api/chess/games/{id}"),
            None
        )
        .await
        .0,
        StatusCode::OK
    );
}

/// The LLM-as-player environment with the embedded SmolLM2: one group is rolled out and scored
/// (each score the judge's, in [0, 1], or the illegal-move penalty with its reason appended), and
/// goes through the trajectory API to a trainer's batch.
#[tokio::test]
async fn the_model_plays_a_position_and_its_group_reaches_the_trajectory_api() {
    use lachesis::envs::chess_player::ILLEGAL_PENALTY;
    let app = TestApp::spawn_with(config_for(&fresh_database().await)).await;
    let options: lachesis::envs::EnvOptions =
        serde_json::from_value(json!({"seed": 5, "group_size": 4, "max_tokens": 24})).unwrap();
    let env = lachesis::envs::build("chess_player", &options).unwrap();
    let engine = lachesis_inference::Engine::load(
        &lachesis_tests::model_path(),
        lachesis_inference::EngineOptions::default(),
    )
    .expect("the embedded model loads");
    let policy = lachesis::policy::EmbeddedPolicy::new(engine);
    let item = env.next_item().await.unwrap().unwrap();
    let collected = env.collect(item, &policy).await.expect("a group");
    let group = collected.group.expect("the environment keeps every group");
    assert_eq!(group.sequences.len(), 4);
    for seq in &group.sequences {
        let last = seq.messages.last().unwrap();
        if seq.score == ILLEGAL_PENALTY {
            assert!(last.content.starts_with("Environment: "), "{last:?}");
        } else {
            assert!((0.0..=1.0).contains(&seq.score), "{}", seq.score);
            assert_eq!(last.role, "assistant");
        }
        assert_eq!(seq.rollout.tokens.len(), seq.rollout.masks.len());
    }

    app.post("/register", &lachesis_tests::registration(4))
        .await;
    let env_id = app
        .post(
            "/register-env",
            &lachesis_tests::env_registration("chess_player", 4),
        )
        .await["env_id"]
        .as_i64();
    let posted = serde_json::to_value(group.to_scored_data(env_id, true)).unwrap();
    app.post("/scored_data", &posted).await;
    let batch = app.get("/batch").await;
    let groups: Vec<lachesis_shared::atropos::ScoredData> =
        serde_json::from_value(batch["batch"].clone()).unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].scores, group.scores());
}

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
    let view = game(body);
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
        // A search restricted to the played move may see a little further than the full one.
        assert!(engine.best_cp >= engine.played_cp - 60, "{engine:?}");
        assert!(
            reward.justification.contains("Stockfish (depth 8)"),
            "{}",
            reward.justification
        );
        // A better move is named exactly when the agent did not play Stockfish's choice.
        if let Some(better) = &engine.better_move {
            assert_ne!(better, &m.san);
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

/// `lachesis chess rate` (the real binary) with a tiny schedule and `--record` stores the agent's
/// rating in a fresh database, and `GET /api/chess/agent` answers it; flags over their limits
/// are refused before anything is played, and Postgres refuses a rating that breaks its checks.
#[tokio::test]
async fn the_yardstick_records_a_rating_that_the_agent_answer_carries() {
    let rate = |flags: &[&str]| {
        let mut command = tokio::process::Command::new(lachesis_tests::lachesis_bin());
        command
            .args(["chess", "rate"])
            .args(flags)
            .env_remove("DATABASE_URL")
            .stdin(std::process::Stdio::null());
        command
    };
    let refused = rate(&["--games", "201"]).output().await.unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("--games 201 is more than --max-games 200"),
        "{stderr}"
    );

    let database = fresh_database().await;
    let tiny = [
        "--games",
        "1",
        "--calibration-games",
        "1",
        "--movetime-ms",
        "5",
        "--seed",
        "3",
        "--record",
    ];
    let output = rate(&tiny)
        .env("DATABASE_URL", &database)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let rungs = lachesis_chess::rating::ladder().len();

    let app = TestApp::spawn_with(config_for(&database)).await;
    let info: lachesis_shared::chess::AgentInfo =
        serde_json::from_value(app.get("/api/chess/agent").await).expect("an AgentInfo");
    let rating = info.rating.clone().expect("the recorded rating");
    assert_eq!((info.version, rating.policy_version), (0, 0));
    // Version 0 is the current version: both fields are the same row.
    assert_eq!(info.baseline_rating, info.rating);
    assert_eq!(rating.games, rungs as i64, "one game against each rung");
    assert!((0.0..=1.0).contains(&rating.sacrifice_rate), "{rating:?}");
    // What the command printed is what was stored.
    let printed = lachesis_chess::rating::EloEstimate {
        point: rating.elo,
        low: rating.elo_low,
        high: rating.elo_high,
    };
    let line = format!(
        "Elo of policy version 0: {} over {rungs} games; sacrifice rate {:.3}",
        printed.shown(),
        rating.sacrifice_rate
    );
    assert!(stdout.contains(&line), "{line} in\n{stdout}");
    assert!(stdout.contains("recorded as rating"), "{stdout}");
    for rung in 1..rungs {
        assert!(stdout.contains(&format!("rung {rung}: ")), "{stdout}");
    }

    // A policy file is recorded only as the stored version it claims to be.
    let file = std::env::temp_dir().join(format!("lachesis-policy-{}.json", std::process::id()));
    let unstored = lachesis_chess::agent::PolicyParams {
        version: 7,
        ..Default::default()
    };
    std::fs::write(&file, serde_json::to_string(&unstored).unwrap()).unwrap();
    let refused = rate(&["--policy", &file.display().to_string(), "--record"])
        .env("DATABASE_URL", &database)
        .output()
        .await
        .unwrap();
    let _ = std::fs::remove_file(&file);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        stderr.contains("the policy file's version 7 is not the stored version 7"),
        "{stderr}"
    );

    // The table's checks hold whatever writes to it.
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&database)
        .await
        .unwrap();
    let good = lachesis::chess::ratings::NewRating {
        policy_version: 0,
        elo: Some(800.0),
        elo_low: Some(700.0),
        elo_high: Some(900.0),
        games: 10,
        calibration_games: 0,
        sacrifice_rate: 0.1,
    };
    for bad in [
        lachesis::chess::ratings::NewRating {
            elo_low: Some(850.0),
            ..good.clone()
        },
        lachesis::chess::ratings::NewRating {
            elo_low: None,
            ..good.clone()
        },
        lachesis::chess::ratings::NewRating {
            sacrifice_rate: 1.5,
            ..good.clone()
        },
        lachesis::chess::ratings::NewRating {
            elo: Some(f64::NAN),
            ..good.clone()
        },
        lachesis::chess::ratings::NewRating {
            policy_version: 7,
            ..good.clone()
        },
    ] {
        let refused = lachesis::chess::ratings::insert(&mut conn, &bad).await;
        assert!(refused.is_err(), "{bad:?} was stored");
    }
    lachesis::chess::ratings::insert(&mut conn, &good)
        .await
        .unwrap();
    let latest: lachesis_shared::chess::AgentInfo =
        serde_json::from_value(app.get("/api/chess/agent").await).unwrap();
    assert_eq!(
        latest.rating.map(|r| r.elo_text()),
        Some("Elo 800 (95% 700–900)".to_owned()),
        "the newest row wins"
    );
}
