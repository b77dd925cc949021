//! Spectators: a game its owner opens is readable by anyone and watched live over the socket by
//! people who are not signed in; only the owner plays, rates or closes it, and a closed game is
//! gone from view again.

use futures::{SinkExt, StreamExt};
use lachesis_shared::chess::{GameSummary, GameView};
use lachesis_shared::live::{ClientMsg, LiveEvent, ServerMsg, Topic};
use lachesis_tests::{Caller, accounts_app, sign_up, start_chess_game};
use reqwest::{Method, StatusCode};
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

use super::{WAIT, game};

#[tokio::test]
async fn a_public_game_is_watched_live_by_anyone_and_played_by_its_owner_alone() {
    let app = accounts_app().await;
    let ada = sign_up(&app, "/api/auth/setup", "ada", "lab").await;
    let bob = sign_up(&app, "/api/auth/register", "bob", "rivals").await;
    let created = start_chess_game(&app, &ada, "black").await;
    let id = created.id.clone();
    assert!(created.yours && !created.public);
    let path = format!("/api/chess/games/{id}");
    let visibility = format!("{path}/visibility");

    // Private: nobody else sees it, and only Ada may open it.
    for who in [Caller::Nobody, Caller::Session(&bob)] {
        let (status, _) = app.call(who, Method::GET, &path, None).await;
        assert_eq!(
            status,
            StatusCode::NOT_FOUND,
            "a private game is not there to others"
        );
    }
    let (status, _) = app
        .call(
            Caller::Session(&bob),
            Method::PUT,
            &visibility,
            Some(json!({"public": true})),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, opened) = app
        .call(
            Caller::Session(&ada),
            Method::PUT,
            &visibility,
            Some(json!({"public": true})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{opened}");
    assert!(game(opened).public);

    // Public: listed for anyone, read as a spectator's view, watched over the socket.
    let listed: Vec<GameSummary> =
        serde_json::from_value(app.get("/api/chess/games?public=true").await).unwrap();
    let listed_ids: Vec<&str> = listed.iter().map(|g| g.id.as_str()).collect();
    assert_eq!(listed_ids, [id.as_str()]);
    let seen: GameView = serde_json::from_value(app.get(&path).await).unwrap();
    assert!(seen.public && !seen.yours);
    let ws_url = app.url("/ws").replacen("http://", "ws://", 1);
    let (mut socket, _) = tokio_tungstenite::connect_async(&ws_url).await.unwrap();
    let subscribe = ClientMsg::Subscribe {
        topic: Topic::Game { game: id.clone() },
    };
    socket
        .send(Message::text(serde_json::to_string(&subscribe).unwrap()))
        .await
        .unwrap();
    // The hub confirms the subscription before any event on it; a refusal would be an error.
    loop {
        let frame = tokio::time::timeout(WAIT, socket.next()).await.unwrap();
        let Some(Ok(Message::Text(text))) = frame else {
            continue;
        };
        match serde_json::from_str::<ServerMsg>(&text).unwrap() {
            ServerMsg::Subscribed { .. } => break,
            ServerMsg::Error { message, .. } => panic!("the spectator was refused: {message}"),
            _ => {}
        }
    }

    // Spectators neither move, rate nor close it.
    for (method, tail, body) in [
        (Method::POST, "/moves", json!({"uci": "e2e4"})),
        (Method::POST, "/ratings", json!({"ply": 1, "rating": 5})),
        (Method::PUT, "/visibility", json!({"public": false})),
    ] {
        let (status, _) = app
            .call(
                Caller::Session(&bob),
                method,
                &format!("{path}{tail}"),
                Some(body),
            )
            .await;
        assert!(status.is_client_error(), "{tail}: {status}");
    }

    // Ada plays; the spectator's socket carries her move and the agent's answer.
    let (status, _) = app
        .call(
            Caller::Session(&ada),
            Method::POST,
            &format!("{path}/moves"),
            Some(json!({"uci": "e2e4"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let mut plies = Vec::new();
    while plies.len() < 2 {
        let frame = tokio::time::timeout(WAIT, socket.next())
            .await
            .expect("moves reach the spectator");
        let Some(Ok(Message::Text(text))) = frame else {
            continue;
        };
        if let ServerMsg::Event {
            event: LiveEvent::ChessMove(event),
            ..
        } = serde_json::from_str(&text).unwrap()
        {
            plies.push((event.record.ply, event.record.by_agent));
        }
    }
    assert_eq!(plies, [(0, false), (1, true)]);

    // Closed again: gone from the list and from anyone else's view.
    let (status, _) = app
        .call(
            Caller::Session(&ada),
            Method::PUT,
            &visibility,
            Some(json!({"public": false})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(app.get("/api/chess/games?public=true").await, json!([]));
    let (status, _) = app
        .call(Caller::Session(&bob), Method::GET, &path, None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
