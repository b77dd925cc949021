//! The cat caretaker: the environment's multi-turn dialogues with the simulated cat (scripted and
//! with the embedded model, its group reaching the trajectory API), and the sessions a person
//! plays over HTTP as the caretaker or as the cat, with bad moves refused and nothing changed.

use lachesis::envs::cat_caretaker::CatCaretakerEnv;
use lachesis::envs::cat_caretaker::data::CatData;
use lachesis::envs::{EnvOptions, Environment};
use lachesis_shared::cats::{CatRole, CatSession, CatTurn};
use lachesis_tests::scripted::ScriptedPolicy;
use lachesis_tests::{Caller, TestApp, config_for, fresh_database, sign_up};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

fn env(max_turns: usize, group_size: usize) -> CatCaretakerEnv {
    let options: EnvOptions = serde_json::from_value(json!({"seed": 9, "group_size": group_size,
        "max_tokens": 32, "settings": {"max_turns": max_turns}}))
    .unwrap();
    CatCaretakerEnv::new(&options).unwrap()
}

#[tokio::test]
async fn a_caretaker_who_reads_the_cat_at_once_outscores_one_who_keeps_guessing() {
    let env = env(3, 2);
    let task = CatData::builtin().unwrap().task(42);
    let good = format!("Final: {}.", task.scenario.remedy.join(", "));
    let policy = ScriptedPolicy::new(&[&good, "I pet the cat."]);
    let group = env
        .collect(json!({"seed": 42}), &policy)
        .await
        .unwrap()
        .group
        .unwrap();
    let scores = group.scores();
    assert_eq!(scores[0], 1.0, "all remedies at the first turn");
    // The guesser's later turns come from the script's first answer (n = 1 asks get answers[0]),
    // so it names the remedies only at its second turn: a tenth less.
    assert!((scores[1] - 0.9).abs() < 1e-12, "{scores:?}");
    // The guesser's dialogue: the opening, its guess, the cat insisting with its need's behaviors.
    let guesser = &group.sequences[1].messages;
    let cat_turns: Vec<&str> = guesser
        .iter()
        .filter(|m| m.role == "user" && m.content.starts_with("The cat:"))
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(cat_turns.len(), 2, "{guesser:#?}");
    assert!(
        task.scenario
            .behaviors
            .iter()
            .any(|b| cat_turns[1].contains(b.as_str())),
        "the cat repeats its need: {}",
        cat_turns[1]
    );
    assert!(guesser.last().unwrap().content.starts_with("Judge: "));

    // Never naming a remedy scores nothing, after max_turns turns.
    let lost = ScriptedPolicy::new(&["I sing."]);
    let group = env
        .collect(json!({"seed": 42}), &lost)
        .await
        .unwrap()
        .group
        .unwrap();
    assert_eq!(group.scores(), vec![0.0, 0.0]);
    let asks = lost.requests.lock().unwrap().len();
    assert_eq!(
        asks,
        1 + 2 * 2,
        "one group ask, then two more turns per dialogue"
    );
}

#[tokio::test]
async fn the_embedded_model_cares_for_the_cat_and_its_group_reaches_the_trajectory_api() {
    let app = TestApp::spawn_with(config_for(&fresh_database().await)).await;
    let engine = lachesis_inference::Engine::load(
        &lachesis_tests::model_path(),
        lachesis_inference::EngineOptions::default(),
    )
    .expect("the embedded model loads");
    let policy = lachesis::policy::EmbeddedPolicy::new(engine);
    let env = env(2, 2);
    let item = env.next_item().await.unwrap().unwrap();
    let group = env.collect(item, &policy).await.unwrap().group.unwrap();
    assert_eq!(group.sequences.len(), 2);
    for seq in &group.sequences {
        assert!((0.0..=1.0).contains(&seq.score));
        assert_eq!(seq.rollout.tokens.len(), seq.rollout.masks.len());
        assert!(
            seq.rollout.masks.iter().any(|&m| m != -100),
            "a completion is trained on"
        );
    }
    app.post("/register", &lachesis_tests::registration(2))
        .await;
    let env_id = app
        .post(
            "/register-env",
            &lachesis_tests::env_registration("cat_caretaker", 2),
        )
        .await["env_id"]
        .as_i64();
    let posted = serde_json::to_value(group.to_scored_data(env_id, true)).unwrap();
    app.post("/scored_data", &posted).await;
    let batch = app.get("/batch").await;
    let sent: Vec<lachesis_shared::atropos::ScoredData> =
        serde_json::from_value(batch["batch"].clone()).unwrap();
    assert_eq!(sent[0].scores, group.scores());
}

/// A signed-in browser: its session cookie and CSRF token.
struct Player<'a> {
    app: &'a TestApp,
    session: (String, String),
}

impl Player<'_> {
    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        self.app
            .call(Caller::Session(&self.session), method, path, body)
            .await
    }
}

fn session(value: Value) -> CatSession {
    serde_json::from_value(value).expect("a session")
}

#[tokio::test]
async fn a_person_plays_the_caretaker_or_the_cat_and_bad_moves_change_nothing() {
    let mut config = config_for(&fresh_database().await);
    config.auth = true;
    config.model = Some(lachesis_tests::model_path());
    let app = TestApp::spawn_with(config).await;
    let me = Player {
        app: &app,
        session: sign_up(&app, "/api/auth/setup", "tabby", "cat-lovers").await,
    };
    let other = Player {
        app: &app,
        session: sign_up(&app, "/api/auth/register", "rex", "dog-people").await,
    };

    let (status, behaviors) = me.call(Method::GET, "/api/cats/behaviors", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(behaviors.as_array().unwrap().len(), 35);

    // As the caretaker: the cat opens, the need stays hidden until the verdict.
    let (status, created) = me
        .call(
            Method::POST,
            "/api/cats/sessions",
            Some(json!({"role": "caretaker", "seed": 7})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{created}");
    let created = session(created);
    assert_eq!(created.role, CatRole::Caretaker);
    assert!(matches!(created.turns[..], [CatTurn::Cat { .. }]));
    assert!(created.scenario.is_none());
    let turns = format!("/api/cats/sessions/{}/turns", created.id);
    let task = CatData::builtin().unwrap().task(7);

    for bad in [
        json!({"turn": {"speaker": "cat", "behaviors": ["Purring"]}}),
        json!({"turn": {"speaker": "caretaker", "text": "   "}}),
        json!({"turn": {"speaker": "caretaker", "text": "x".repeat(1001)}}),
        json!({"turn": {"speaker": "dog", "text": "woof"}}),
        json!({"turn": {"speaker": "caretaker", "text": "hi"}, "extra": 1}),
    ] {
        let (status, body) = me.call(Method::POST, &turns, Some(bad.clone())).await;
        assert!(status.is_client_error(), "{bad} -> {status} {body}");
    }
    let (status, _) = other
        .call(
            Method::POST,
            &turns,
            Some(json!({"turn": {"speaker": "caretaker", "text": "hi"}})),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "another user cannot play it");
    let (_, unchanged) = me
        .call(
            Method::GET,
            &format!("/api/cats/sessions/{}", created.id),
            None,
        )
        .await;
    assert_eq!(
        session(unchanged).turns.len(),
        1,
        "refused moves changed nothing"
    );

    let (status, after) = me
        .call(
            Method::POST,
            &turns,
            Some(json!({"turn": {"speaker": "caretaker", "text": "I pet it."}})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let after = session(after);
    assert_eq!(after.turns.len(), 3, "the cat answered");
    assert!(after.verdict.is_none());
    let final_text = format!("I {}.", task.scenario.remedy.join(" and "));
    let (_, done) = me
        .call(
            Method::POST,
            &turns,
            Some(json!({"turn": {"speaker": "caretaker", "text": final_text}, "finish": true})),
        )
        .await;
    let done = session(done);
    let verdict = done.verdict.expect("finished");
    assert!(
        (verdict.score - 0.9).abs() < 1e-12,
        "all remedies, one extra turn: {verdict:?}"
    );
    assert_eq!(
        done.scenario.as_ref(),
        Some(&task.scenario),
        "the need is revealed"
    );
    let CatTurn::Cat { behaviors, .. } = done.turns.last().unwrap() else {
        panic!("the cat has the last word")
    };
    assert!(behaviors.contains(&"Purring".to_string()), "{behaviors:?}");
    let (status, _) = me
        .call(
            Method::POST,
            &turns,
            Some(json!({"turn": {"speaker": "caretaker", "text": "more"}})),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "the session is over");

    // As the cat: the need is shown, the model answers as the caretaker.
    let (_, cat) = me
        .call(
            Method::POST,
            "/api/cats/sessions",
            Some(json!({"role": "cat", "seed": 8})),
        )
        .await;
    let cat = session(cat);
    assert!(cat.turns.is_empty() && cat.scenario.is_some());
    let turns = format!("/api/cats/sessions/{}/turns", cat.id);
    let (status, body) = me
        .call(
            Method::POST,
            &turns,
            Some(json!({"turn": {"speaker": "cat", "behaviors": ["Barking"]}})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let (status, body) = me
        .call(Method::POST,
            &turns,
            Some(json!({"turn": {"speaker": "cat", "behaviors": ["Meowing", "Pacing or Restlessness"],
                "sound": "a long meow"}})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let played = session(body);
    assert_eq!(played.turns.len(), 2);
    assert!(
        matches!(&played.turns[1], CatTurn::Caretaker { .. }),
        "the model replied"
    );
}

#[tokio::test]
async fn a_model_judge_gives_the_verdict_and_an_unreadable_one_falls_back_to_the_rubric() {
    let options = |judge: Value| -> EnvOptions {
        serde_json::from_value(
            json!({"seed": 9, "group_size": 1, "settings": {"max_turns": 1,
            "judge": judge}}),
        )
        .unwrap()
    };
    let judge = json!({"kind": "embedded", "system_prompt": "You judge cat care strictly."});
    let env = CatCaretakerEnv::new(&options(judge)).unwrap();
    let task = CatData::builtin().unwrap().task(42);
    let answer = format!("Final: {}.", task.scenario.remedy.join(", "));
    let verdict = std::sync::Arc::new(std::sync::Mutex::new("Decent. \\boxed{0.3}".to_string()));
    let said = verdict.clone();
    let policy = ScriptedPolicy::new(&[&answer]).with_responder(move |request| {
        (request.messages[0].content == "You judge cat care strictly.")
            .then(|| said.lock().unwrap().clone())
    });
    let group = env
        .collect(json!({"seed": 42}), &policy)
        .await
        .unwrap()
        .group
        .unwrap();
    assert_eq!(
        group.scores(),
        vec![0.3],
        "the model judge's score, not the rubric's 1.0"
    );
    let judged = policy.requests.lock().unwrap().last().unwrap().messages[1]
        .content
        .clone();
    assert!(judged.contains(&format!("Caretaker: {answer}")), "{judged}");

    *verdict.lock().unwrap() = "I cannot decide.".to_string();
    let group = env
        .collect(json!({"seed": 42}), &policy)
        .await
        .unwrap()
        .group
        .unwrap();
    assert_eq!(group.scores(), vec![1.0], "the rubric stands in");
    let last = &group.sequences[0].messages.last().unwrap().content;
    assert!(last.contains("model verdict unreadable"), "{last}");
}
#[path = "cats/arena.rs"]
mod arena;
