//! Battles with the embedded model answering: the answers reach the pages watching them token by
//! token, over the live hub, before the battle is open to its vote; and a spatial battle is judged
//! by the physics once voted; catbot battles can be dialogues with a rule-based or a model cat.

use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use lachesis::arena::settings::{ArenaCat, ArenaSettings};
use lachesis_shared::arena::{ArenaKind, BattleState, BattleView};
use lachesis_shared::live::{ClientMsg, LiveEvent, ServerMsg, Topic};
use lachesis_tests::{TestApp, config_for, fresh_database, model_path};
use reqwest::Method;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

use super::app_with_model;
use super::arena_adapter::{as_visitor, contenders_and_visitor, dealt};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_answers_stream_to_an_anonymous_watcher_as_they_are_written() {
    let app = app_with_model().await;
    // One contender on the embedded engine, one behind an OpenAI-compatible endpoint (this same
    // server's, which streams its chunks as the engine writes them).
    let embedded = json!({"kind": "embedded", "temperature": 0.0,
        "system": "Explain your advice in several full sentences."});
    let endpoint = json!({"kind": "endpoint", "base_url": app.base, "model": "remote"});
    let contenders = [("Thorough Bot", embedded), ("Remote Bot", endpoint)];
    let visitor = contenders_and_visitor(&app, contenders).await;
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
    // Each side's text was seen while it was still being written.
    for side in 0..2 {
        let partial = seen
            .iter()
            .filter(|s| s[side].len() < answers[side].len())
            .count();
        assert!(
            partial >= 1,
            "side {side}: no partial text among {}",
            seen.len()
        );
    }
    println!(
        "{} live updates; answers of {} and {} characters",
        seen.len(),
        answers[0].len(),
        answers[1].len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spatial_and_chess_battles_are_judged_by_their_environments_once_voted() {
    // Short answers: a cut-off plan is judged too (unreadable, scoring nothing).
    let app = app_with_arena(ArenaSettings {
        max_answer_tokens: 48,
        ..ArenaSettings::default()
    })
    .await;
    let embedded = |temperature: f64| json!({"kind": "embedded", "temperature": temperature});
    let contenders = [
        ("Player Calm", embedded(0.0)),
        ("Player Bold", embedded(0.8)),
    ];
    let visitor = contenders_and_visitor(&app, contenders).await;
    let cases = [
        (
            ArenaKind::Spatial,
            "Scene",
            ["the scene scores "].as_slice(),
        ),
        (
            ArenaKind::Chess,
            "Position (FEN): ",
            ["plays ", "no legal move: "].as_slice(),
        ),
    ];
    for (arena, prompt_start, verdict_starts) in cases {
        let battle = dealt(&app, &visitor, arena.as_str()).await;
        assert_eq!(battle.arena, arena);
        assert!(battle.prompt.starts_with(prompt_start), "{}", battle.prompt);
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
            assert!(
                verdict_starts
                    .iter()
                    .any(|start| verdict.starts_with(start)),
                "{verdict}"
            );
        }
        let path = format!("/api/arena/leaderboard?arena={}", arena.as_str());
        let board = app.get(&path).await;
        assert_eq!(board["counted_votes"], json!(1), "{board}");
    }
    let catbot = app.get("/api/arena/leaderboard?arena=catbot").await;
    assert_eq!(catbot["counted_votes"], json!(0), "{catbot}");
}

/// An OpenAI-compatible endpoint standing for a hosted caretaker: it first sings to the cat, then
/// gives up with a final answer naming nothing (its turn is the number of its earlier replies).
async fn singing_caretaker() -> String {
    async fn reply(
        axum::Json(body): axum::Json<serde_json::Value>,
    ) -> axum::Json<serde_json::Value> {
        let earlier = body["messages"]
            .as_array()
            .map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count());
        let text = if earlier == 0 {
            "I sing it a song."
        } else {
            "Final: I am not sure."
        };
        axum::Json(json!({"choices": [{"message": {"role": "assistant", "content": text}}]}))
    }
    let router = axum::Router::new().route("/v1/chat/completions", axum::routing::post(reply));
    let socket = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", socket.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(socket, router).await });
    base
}

/// A catbot battle with `cat` playing the cat over up to three caretaker turns, between the
/// singing endpoint and the embedded model; the battle once voted.
async fn dialogue_battle(cat: ArenaCat) -> BattleView {
    let app = app_with_arena(ArenaSettings {
        cat_turns: 3,
        cat,
        max_answer_tokens: 40,
        ..ArenaSettings::default()
    })
    .await;
    let singer =
        json!({"kind": "endpoint", "base_url": singing_caretaker().await, "model": "singer"});
    let model = json!({"kind": "embedded", "temperature": 0.0});
    let contenders = [("Singer", singer), ("Model Keeper", model)];
    let visitor = contenders_and_visitor(&app, contenders).await;
    let battle = dealt(&app, &visitor, "catbot").await;
    assert_eq!(battle.state, BattleState::Ready, "{battle:?}");
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let path = format!("/api/arena/battles/{}/vote", battle.id);
    serde_json::from_value(
        as_visitor(&app, &visitor, Method::POST, &path, json!({"choice": "b"})).await,
    )
    .unwrap()
}

/// A server with the embedded model and these arena settings.
async fn app_with_arena(settings: ArenaSettings) -> TestApp {
    let mut config = config_for(&fresh_database().await);
    config.model = Some(model_path());
    config.arena = settings;
    TestApp::spawn_with(config).await
}

/// The singer's transcript and its judge's line, whichever side it was dealt.
fn singers_side(voted: &BattleView) -> (Vec<String>, String) {
    let side = usize::from(voted.contender_a.as_deref() != Some("Singer"));
    let answer = [&voted.answer_a, &voted.answer_b][side]
        .clone()
        .expect("the singer answered");
    let judged = voted.judged.clone().expect("judged once voted")[side].clone();
    (answer.lines().map(str::to_string).collect(), judged)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catbot_battles_play_a_dialogue_with_the_rule_cat() {
    let voted = dialogue_battle(ArenaCat::Rules).await;
    let (lines, judged) = singers_side(&voted);
    // Singing names no remedy: the rule cat shows more of its need, and the final answer ends
    // the dialogue at the second turn.
    assert_eq!(lines.len(), 3, "{lines:#?}");
    assert_eq!(lines[0], "Caretaker: I sing it a song.");
    assert!(lines[1].starts_with("The cat: "), "{}", lines[1]);
    assert!(lines[1].contains("you hear"), "{}", lines[1]);
    assert_eq!(lines[2], "Caretaker: Final: I am not sure.");
    assert_eq!(
        judged,
        "the cat hisses: score 0.00 over 2 turns, no remedy named"
    );
    // The model's side is a dialogue too: turns alternate, caretaker first, at most three.
    let model_side = [&voted.answer_a, &voted.answer_b]
        .into_iter()
        .flatten()
        .find(|a| !a.starts_with("Caretaker: I sing"))
        .expect("the model answered");
    let turns: Vec<&str> = model_side.lines().collect();
    for (i, line) in turns.iter().enumerate() {
        let speaker = if i % 2 == 0 {
            "Caretaker: "
        } else {
            "The cat: "
        };
        assert!(line.starts_with(speaker), "{model_side}");
    }
    assert!((1..=5).contains(&turns.len()), "{model_side}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_can_play_the_cat_and_give_its_own_verdict() {
    let voted = dialogue_battle(ArenaCat::Model).await;
    let (lines, judged) = singers_side(&voted);
    assert_eq!(lines[0], "Caretaker: I sing it a song.");
    let cat = lines.get(1).expect("the model cat reacted");
    assert!(
        cat.starts_with("The cat: ") && cat.len() > "The cat: ".len(),
        "{cat}"
    );
    // A purr ends the dialogue; otherwise the singer's final answer does. The cat's verdict, when
    // it gave one, is marked on its line and named by the judge.
    if cat.ends_with(" [purr]") {
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert!(
            judged.ends_with("the cat's own last word: a purr"),
            "{judged}"
        );
    } else {
        assert_eq!(lines.len(), 3, "{lines:#?}");
        assert_eq!(lines[2], "Caretaker: Final: I am not sure.");
        if cat.ends_with(" [hiss]") {
            assert!(
                judged.ends_with("the cat's own last word: a hiss"),
                "{judged}"
            );
        }
    }
    assert!(
        judged.starts_with("the cat hisses: score 0.00 over"),
        "{judged}"
    );
}
