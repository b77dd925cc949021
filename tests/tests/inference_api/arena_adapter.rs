//! A training run's current weights as an arena contender: a contender naming a LoRA adapter
//! answers with whatever the trainer last hot-loaded under that name, and a battle dealt before
//! any is loaded is voided with the reason, not answered by the base model in its place.

use std::time::{Duration, Instant};

use lachesis::trainer::sync::{VllmLora, WeightSync};
use lachesis_shared::arena::{BattleState, BattleView};
use lachesis_tests::TestApp;
use reqwest::Method;
use serde_json::{Value, json};

use super::app_with_model;
use super::weights::{lora_trainer, perturb_by, scratch};

pub(super) async fn as_visitor(
    app: &TestApp,
    token: &str,
    method: Method,
    path: &str,
    body: Value,
) -> Value {
    let response = app
        .client
        .request(method, app.url(path))
        .header("x-arena-visitor", token)
        .json(&body)
        .send()
        .await
        .expect("the server answers");
    assert!(
        response.status().is_success(),
        "{path}: {}",
        response.status()
    );
    response.json().await.expect("a JSON body")
}

/// A new anonymous visitor's voting token.
pub(super) async fn visitor(app: &TestApp) -> String {
    app.post("/api/arena/visitors", &json!({})).await["token"]
        .as_str()
        .expect("a visitor token")
        .to_string()
}

/// Enters `contenders` (name and policy) as the admin, and returns a new visitor's token.
pub(super) async fn contenders_and_visitor(
    app: &TestApp,
    contenders: [(&str, Value); 2],
) -> String {
    for (name, policy) in contenders {
        app.post(
            "/api/arena/contenders",
            &json!({"name": name, "policy": policy}),
        )
        .await;
    }
    visitor(app).await
}

/// A battle of `arena` dealt to `visitor`, once its contenders have answered or it was voided.
pub(super) async fn dealt(app: &TestApp, visitor: &str, arena: &str) -> BattleView {
    let body = json!({"arena": arena});
    let dealt = as_visitor(app, visitor, Method::POST, "/api/arena/battles", body).await;
    let id = dealt["id"].as_i64().expect("an id");
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let battle: BattleView =
            serde_json::from_value(app.get(&format!("/api/arena/battles/{id}")).await).unwrap();
        if battle.state != BattleState::Answering {
            return battle;
        }
        assert!(Instant::now() < deadline, "battle {id} is still answering");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contender_naming_an_adapter_answers_with_the_trainers_weights() {
    let app = app_with_model().await;
    // Both greedy with the same instructions: on the same weights they would answer alike.
    for (name, adapter) in [("Baseline Bot", None), ("Trainee Bot", Some("policy"))] {
        let mut policy = json!({"kind": "embedded", "temperature": 0.0});
        if let Some(adapter) = adapter {
            policy["adapter"] = json!(adapter);
        }
        let added = app
            .post(
                "/api/arena/contenders",
                &json!({"name": name, "policy": policy}),
            )
            .await;
        let kind = adapter.map_or("embedded".to_string(), |a| format!("adapter {a}"));
        assert_eq!(added["kind"], json!(kind), "{added}");
    }
    let refused = app
        .client
        .post(app.url("/api/arena/contenders"))
        .json(
            &json!({"name": "Bad", "policy": {"kind": "embedded", "temperature": 0.0,
            "adapter": "../../etc"}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), reqwest::StatusCode::UNPROCESSABLE_ENTITY);
    let visitor = visitor(&app).await;

    // No adapter is loaded yet: the battle is void, and says why.
    let early = dealt(&app, &visitor, "catbot").await;
    assert_eq!(early.state, BattleState::Void, "{early:?}");
    let reason = early.void_reason.clone().unwrap_or_default();
    assert!(reason.contains("no adapter named \"policy\""), "{reason}");

    // A trainer loads its adapter under that name, as `--sync vllm-lora` does.
    let (trainer, _) = lora_trainer();
    // Strong enough that greedy decoding cannot stay on the base model's answer: a mild
    // adapter can leave an answer that copies the prompt unchanged.
    perturb_by(&trainer, 3.0, 2.0);
    let mut sync = WeightSync::VllmLora(VllmLora::new(&app.base, "policy", None));
    sync.sync(&trainer, None, &scratch("arena"), "smollm2", 1)
        .await
        .expect("the adapter loads");
    let battle = dealt(&app, &visitor, "catbot").await;
    assert_eq!(battle.state, BattleState::Ready, "{battle:?}");
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let path = format!("/api/arena/battles/{}/vote", battle.id);
    let voted: BattleView = serde_json::from_value(
        as_visitor(
            &app,
            &visitor,
            Method::POST,
            &path,
            json!({"choice": "tie"}),
        )
        .await,
    )
    .unwrap();
    let answer_of = |name: &str| {
        if voted.contender_a.as_deref() == Some(name) {
            voted.answer_a.clone()
        } else {
            voted.answer_b.clone()
        }
    };
    let (base, run) = (answer_of("Baseline Bot"), answer_of("Trainee Bot"));
    assert!(base.is_some() && run.is_some(), "{voted:?}");
    assert_ne!(
        base, run,
        "the adapter contender answered with the base weights"
    );
}
