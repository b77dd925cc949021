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
/// How long a finished game's review may take in a test: the LLM judge on the embedded model,
/// on a busy 2-core machine, has needed over a minute.
const REVIEW_WAIT: Duration = Duration::from_secs(240);

#[path = "chess/judges.rs"]
mod judges;
#[path = "chess/model_player.rs"]
mod model_player;
#[path = "chess/resumed_reviews.rs"]
mod resumed_reviews;
#[path = "chess/spectators.rs"]
mod spectators;
#[path = "chess/yardstick.rs"]
mod yardstick;

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

/// The game once its review is stored: the request that ends a game answers before it.
async fn reviewed(app: &TestApp, id: &str) -> GameView {
    let deadline = tokio::time::Instant::now() + REVIEW_WAIT;
    loop {
        let view = game(app.get(&format!("/api/chess/games/{id}")).await);
        if view.game_return.is_some() {
            return view;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "game {id} was not reviewed within {REVIEW_WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
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

    // The person resigns: the agent wins. The answer comes before the review, and the game's
    // topic hears that it ended and then that every agent move is judged.
    let (status, body) = post(&app, &format!("/api/chess/games/{id}/resign"), &json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let answer = game(body);
    assert_eq!(
        answer.outcome.as_ref().map(|o| o.result.as_str()),
        Some("0-1")
    );
    assert!(answer.game_return.is_none() && answer.moves.iter().all(|m| m.reward.is_none()));
    let mut announced = Vec::new();
    while !announced.last().is_some_and(|&(_, reviewed)| reviewed) {
        let frame = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("the game's events in time");
        if let Some(Ok(Message::Text(text))) = frame
            && let ServerMsg::Event {
                event: LiveEvent::ChessGame(event),
                ..
            } = serde_json::from_str(&text).unwrap()
        {
            assert_eq!(event.game, id);
            announced.push((event.outcome.map(|o| o.result), event.reviewed));
        }
    }
    let ended = Some("0-1".to_owned());
    let (last, earlier) = announced.split_last().unwrap();
    assert_eq!(last, &(ended.clone(), true));
    // The ending's own event comes first, unless the review's replaced it before it was sent
    // (state events coalesce).
    assert!(
        earlier.iter().all(|e| e == &(ended.clone(), false)),
        "{announced:?}"
    );
    let view = game(app.get(&format!("/api/chess/games/{id}")).await);
    assert_eq!(view.moves.len(), answer.moves.len());
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
