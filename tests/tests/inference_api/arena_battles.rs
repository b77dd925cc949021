//! Battles with the embedded model answering: the answers reach the pages watching them token by
//! token, over the live hub, before the battle is open to its vote; and a spatial battle is judged
//! by the physics once voted.

use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use lachesis_shared::arena::{BattleState, BattleView};
use lachesis_shared::live::{ClientMsg, LiveEvent, ServerMsg, Topic};
use reqwest::Method;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

use super::app_with_model;
use super::arena_adapter::{as_visitor, dealt};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_battles_answers_stream_to_an_anonymous_watcher_as_they_are_written() {
    let app = app_with_model().await;
    for (name, system) in [
        (
            "Thorough Bot",
            "Explain your advice in several full sentences.",
        ),
        ("Careful Bot", "Give detailed, step-by-step advice."),
    ] {
        let policy = json!({"kind": "embedded", "temperature": 0.0, "system": system});
        app.post(
            "/api/arena/contenders",
            &json!({"name": name, "policy": policy}),
        )
        .await;
    }
    let visitor = app.post("/api/arena/visitors", &json!({})).await["token"]
        .as_str()
        .expect("a visitor token")
        .to_string();
    // A watcher without an account, connected before the battle is dealt.
    let ws_url = app.url("/ws").replace("http://", "ws://");
    let (mut ws, _) = tokio_tungstenite::connect_async(&ws_url)
        .await
        .expect("the live hub upgrades");
    let body = json!({"arena": "catbot"});
    let dealt = as_visitor(&app, &visitor, Method::POST, "/api/arena/battles", body).await;
    let id = dealt["id"].as_i64().expect("an id");
    let topic = Topic::Battle { battle: id };
    let subscribe = ClientMsg::Subscribe {
        topic: topic.clone(),
    };
    ws.send(Message::text(serde_json::to_string(&subscribe).unwrap()))
        .await
        .unwrap();

    let mut seen: Vec<[String; 2]> = Vec::new();
    let mut subscribed = false;
    let deadline = Instant::now() + Duration::from_secs(240);
    let finished = loop {
        assert!(Instant::now() < deadline, "battle {id} is still answering");
        match tokio::time::timeout(Duration::from_millis(300), ws.next()).await {
            Ok(Some(Ok(Message::Text(text)))) => {
                match serde_json::from_str::<ServerMsg>(&text).expect("a server frame") {
                    ServerMsg::Subscribed { topic: t } => {
                        assert_eq!(t, topic);
                        subscribed = true;
                    }
                    ServerMsg::Event {
                        topic: t,
                        event: LiveEvent::BattleText(event),
                    } => {
                        assert_eq!((t, event.battle), (topic.clone(), id));
                        seen.push(event.answers);
                    }
                    ServerMsg::Welcome { .. } => {}
                    other => panic!("unexpected frame {other:?}"),
                }
            }
            Ok(Some(Ok(_))) => {}
            Ok(other) => panic!("the live connection ended: {other:?}"),
            Err(_) => {
                let battle: BattleView =
                    serde_json::from_value(app.get(&format!("/api/arena/battles/{id}")).await)
                        .unwrap();
                if battle.state != BattleState::Answering {
                    break battle;
                }
            }
        }
    };
    assert!(subscribed, "the battle's topic is open to anyone");
    assert_eq!(finished.state, BattleState::Ready, "{finished:?}");
    let answers = [
        finished.answer_a.clone().expect("A answered"),
        finished.answer_b.clone().expect("B answered"),
    ];
    assert!(!seen.is_empty(), "no text was streamed");
    for side in 0..2 {
        let texts: Vec<&String> = seen.iter().map(|s| &s[side]).collect();
        // Each text extends the one before it, and all lead to the finished answer.
        for pair in texts.windows(2) {
            assert!(pair[1].starts_with(pair[0].as_str()), "{pair:?}");
        }
        for text in &texts {
            assert!(
                answers[side].starts_with(text.as_str()),
                "{text:?} / {:?}",
                answers[side]
            );
        }
        assert_eq!(
            texts.last().map(|t| t.as_str()),
            Some(answers[side].as_str())
        );
    }
    // Text was seen while the answers were still being written: the watcher got partial answers.
    let partial = seen
        .iter()
        .filter(|s| s[0].len() < answers[0].len() || s[1].len() < answers[1].len())
        .count();
    assert!(
        partial >= 2,
        "only {partial} partial texts among {}",
        seen.len()
    );
    println!(
        "{} live updates; answers of {} and {} characters",
        seen.len(),
        answers[0].len(),
        answers[1].len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spatial_battle_is_judged_by_the_physics_once_voted() {
    let app = app_with_model().await;
    for (name, temperature) in [("Planner Calm", 0.0), ("Planner Bold", 0.8)] {
        let policy = json!({"kind": "embedded", "temperature": temperature});
        app.post(
            "/api/arena/contenders",
            &json!({"name": name, "policy": policy}),
        )
        .await;
    }
    let visitor = app.post("/api/arena/visitors", &json!({})).await["token"]
        .as_str()
        .expect("a visitor token")
        .to_string();
    let battle = dealt(&app, &visitor, "spatial").await;
    assert_eq!(battle.arena, lachesis_shared::arena::ArenaKind::Spatial);
    assert!(battle.prompt.starts_with("Scene"), "{}", battle.prompt);
    assert_eq!(battle.state, BattleState::Ready, "{battle:?}");
    assert!(
        battle.judged.is_none(),
        "the judge is hidden before the vote"
    );
    // Votes sooner than two seconds after the answers are recorded but not counted.
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let path = format!("/api/arena/battles/{}/vote", battle.id);
    let voted: BattleView = serde_json::from_value(
        as_visitor(&app, &visitor, Method::POST, &path, json!({"choice": "a"})).await,
    )
    .unwrap();
    assert_eq!(voted.excluded, None, "{voted:?}");
    for verdict in voted.judged.expect("judged once voted") {
        assert!(verdict.starts_with("the scene scores "), "{verdict}");
    }
    let board = app.get("/api/arena/leaderboard?arena=spatial").await;
    assert_eq!(board["counted_votes"], json!(1), "{board}");
    let catbot = app.get("/api/arena/leaderboard?arena=catbot").await;
    assert_eq!(catbot["counted_votes"], json!(0), "{catbot}");
}
