//! The Pay-to-Play environment end to end against a real Postgres and the real server: episodes
//! pay their panel through the ledger, publish rounds to the marketplace feed, lower the run's
//! budget, send their groups through the trajectory API, and skip with a reason once the budget is
//! spent; the model's own card choice is parsed strictly with the bandit as fallback; evaluation
//! hears every card unpaid; with the embedded model as agent and judge a group still comes out.

use lachesis::envs::pay_to_play::{Marketplace, PayToPlayEnv};
use lachesis::envs::{EnvOptions, Environment};
use lachesis::ledger::Ledger;
use lachesis::marketplace::judges::Judges;
use lachesis::settlement::Settler;
use lachesis_shared::marketplace::{BudgetView, MarketEvent, PanelChoice};
use lachesis_tests::scripted::ScriptedPolicy;
use lachesis_tests::{TestApp, config_for, fresh_database};
use serde_json::{Value, json};

#[path = "pay_to_play_env/cut_off.rs"]
mod cut_off;

fn options(settings: Value, group_size: usize) -> EnvOptions {
    serde_json::from_value(json!({"seed": 3, "group_size": group_size, "settings": settings}))
        .unwrap()
}

async fn env(app: &TestApp, settings: Value, group_size: usize) -> (PayToPlayEnv, Ledger) {
    env_judged_by(app, settings, group_size, Judges::default()).await
}

async fn env_judged_by(
    app: &TestApp,
    settings: Value,
    group_size: usize,
    judges: Judges,
) -> (PayToPlayEnv, Ledger) {
    let db = lachesis::db::connect(&app.database_url, 4).await.unwrap();
    let ledger = Ledger::new(db);
    let market = Marketplace {
        ledger: ledger.clone(),
        settler: Settler::Simulated,
        judges,
        queue_items: lachesis::feedback::DEFAULT_QUEUE_ITEMS,
    };
    let env = PayToPlayEnv::new(&options(settings, group_size), market).expect("valid settings");
    env.setup().await.unwrap();
    (env, ledger)
}

/// A good answer (every remedy of the task's need), a partial one and a useless one.
fn answers_for(seed: u64) -> Vec<String> {
    let data = lachesis::envs::cat_caretaker::data::CatData::builtin().unwrap();
    let remedy = data.task(seed).scenario.remedy;
    vec![
        format!("It needs care: {}.", remedy.join(", ")),
        format!("Maybe {}.", remedy[0]),
        "Sing to the cat.".to_string(),
    ]
}

#[tokio::test]
async fn episodes_pay_publish_and_send_groups_until_the_budget_is_spent() {
    let app = TestApp::spawn_with(config_for(&fresh_database().await)).await;
    let settings = json!({"run": "p2p-e2e", "budget_usdc": "0.02", "panel": 2, "cost_weight": 2.0});
    let (env, ledger) = env(&app, settings, 3).await;
    let policy = ScriptedPolicy::default();
    app.post("/register", &lachesis_tests::registration(3))
        .await;
    let env_id = app
        .post(
            "/register-env",
            &lachesis_tests::env_registration("pay_to_play", 3),
        )
        .await["env_id"]
        .as_i64();

    let mut groups = Vec::new();
    let mut seed = 100;
    loop {
        policy.set(answers_for(seed));
        let collected = env.collect(json!({ "seed": seed }), &policy).await.unwrap();
        let Some(group) = collected.group else { break };
        let scores = group.scores();
        assert_eq!(scores.len(), 3);
        assert!(
            scores[0] > scores[2],
            "the good answer beats the useless one: {scores:?}"
        );
        assert!(scores[0] >= scores[1], "{scores:?}");
        let posted = serde_json::to_value(group.to_scored_data(env_id, false)).unwrap();
        app.post("/scored_data", &posted).await;
        groups.push(group);
        seed += 1;
        assert!(groups.len() < 60, "the budget never ran out");
    }
    assert!(groups.len() >= 2, "{} episodes were judged", groups.len());

    // The feed has every round and then the skip, newest first, each with its figures.
    let feed: Vec<MarketEvent> =
        serde_json::from_value(app.get("/api/marketplace/feed?run=p2p-e2e").await).unwrap();
    assert_eq!(feed.len(), groups.len() + 1);
    let MarketEvent::Skipped(skipped) = &feed[0] else {
        panic!("the newest event is the skip: {:?}", feed[0])
    };
    assert!(
        skipped.reason.starts_with("budget spent"),
        "{}",
        skipped.reason
    );
    let mut paid = 0;
    for (event, group) in feed[1..].iter().rev().zip(&groups) {
        let MarketEvent::Round(round) = event else {
            panic!("rounds before the skip")
        };
        assert_eq!(round.choice, PanelChoice::Bandit);
        assert_eq!(
            round.rewards,
            group.scores(),
            "the feed shows the rewards sent"
        );
        let cost = round.paid.0 as f64 / 1e6;
        for (reward, score) in round.rewards.iter().zip(&round.panel_scores) {
            assert!((reward - (score - 2.0 * cost)).abs() < 1e-12);
        }
        assert_eq!(
            round.cards.iter().map(|c| c.price.0).sum::<i64>(),
            round.paid.0
        );
        paid += round.paid.0;
    }
    assert_eq!(skipped.budget_left.0, 20_000 - paid);

    // The budget: funded once, spent what the rounds paid, a falling history.
    let budgets: Vec<BudgetView> =
        serde_json::from_value(app.get("/api/marketplace/budgets").await).unwrap();
    let budget = budgets
        .iter()
        .find(|b| b.run == "p2p-e2e")
        .expect("the run's budget");
    assert_eq!((budget.funded.0, budget.spent.0), (20_000, paid));
    assert_eq!(budget.available.0, 20_000 - paid);
    assert!(
        budget
            .points
            .windows(2)
            .all(|w| w[1].available.0 <= w[0].available.0)
    );
    let ledger_lines = app.get("/api/marketplace/runs/p2p-e2e/ledger").await;
    let payments = groups.len(); // at least one card per round
    assert!(ledger_lines.as_array().unwrap().len() > payments);

    // Every group reached the trainer's side of the trajectory API.
    let batch = app.get("/batch").await;
    let sent: Vec<lachesis_shared::atropos::ScoredData> =
        serde_json::from_value(batch["batch"].clone()).unwrap();
    assert_eq!(sent.len(), 1, "batch_size 3 is one group");
    assert_eq!(sent[0].scores, groups[0].scores());

    // Replaying an episode pays nothing again and does not repeat it in the feed.
    let before = ledger
        .balance(ledger.find("budget/p2p-e2e/agent").await.unwrap())
        .await
        .unwrap();
    policy.set(answers_for(100));
    let _ = env.collect(json!({"seed": 100}), &policy).await.unwrap();
    let after = ledger
        .balance(ledger.find("budget/p2p-e2e/agent").await.unwrap())
        .await
        .unwrap();
    assert_eq!(before, after);
    let feed_again = app.get("/api/marketplace/feed?run=p2p-e2e").await;
    assert_eq!(feed_again.as_array().unwrap().len(), feed.len());

    let db = ledger.pool();
    let report = lachesis::ledger::reconcile::reconcile(db).await.unwrap();
    assert!(report.is_balanced(), "{report}");
}

#[tokio::test]
async fn the_model_chooses_its_judges_in_strict_json_or_the_bandit_does() {
    let app = TestApp::spawn_with(config_for(&fresh_database().await)).await;
    let settings = json!({"run": "p2p-llm", "budget_usdc": "1", "selection": "llm"});
    let (env, _) = env(&app, settings, 2).await;
    let choice = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let said = choice.clone();
    let policy = ScriptedPolicy::new(&["Fresh water and food."]).with_responder(move |request| {
        let system = &request.messages[0].content;
        system
            .contains("You choose which paid judges")
            .then(|| said.lock().unwrap().clone())
    });
    let cases = [
        (
            r#"Sure! {"selected_agent_cards": ["feline-vet"], "reasoning": "health"}"#,
            None,
        ),
        ("I pick the vet.", Some("no JSON")),
        (
            r#"{"selected_agent_cards": ["judge-judy"], "reasoning": ""}"#,
            Some("judge-judy"),
        ),
        (
            r#"{"selected_agent_cards": ["feline-vet", "nutritionist", "panel-chair"]}"#,
            Some("3"),
        ),
    ];
    for (i, (answer, fallback)) in cases.iter().enumerate() {
        *choice.lock().unwrap() = answer.to_string();
        env.collect(json!({ "seed": 500 + i }), &policy)
            .await
            .unwrap();
        let feed: Vec<MarketEvent> =
            serde_json::from_value(app.get("/api/marketplace/feed?run=p2p-llm&limit=1").await)
                .unwrap();
        let MarketEvent::Round(round) = &feed[0] else {
            panic!("a round: {:?}", feed[0])
        };
        match (fallback, &round.choice) {
            (None, PanelChoice::Llm) => {
                assert_eq!(round.cards.len(), 1);
                assert_eq!(round.cards[0].slug, "feline-vet");
            }
            (Some(why), PanelChoice::LlmFallback { reason }) => {
                assert!(reason.contains(why), "{reason:?} should mention {why:?}");
                assert!(!round.cards.is_empty(), "the bandit chose instead");
            }
            other => panic!("case {i}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn evaluation_hears_every_card_and_pays_nothing() {
    let app = TestApp::spawn_with(config_for(&fresh_database().await)).await;
    let settings = json!({"run": "p2p-eval", "eval_size": 3});
    let (env, ledger) = env(&app, settings, 2).await;
    let account = ledger.find("budget/p2p-eval/agent").await.unwrap();
    let before = ledger.balance(account).await.unwrap();
    let policy = ScriptedPolicy::new(&["Give fresh water, food and see a vet."]);
    let outcome = env.evaluate(&policy).await.unwrap();
    assert_eq!(outcome.samples.len(), 3);
    // The five rubric cards (model cards need a model, which this server has not).
    assert_eq!(outcome.metrics["eval/cards"], 5.0);
    for sample in &outcome.samples {
        assert_eq!(sample["cards"].as_array().unwrap().len(), 5);
    }
    assert_eq!(ledger.balance(account).await.unwrap(), before);
}

#[tokio::test]
async fn the_embedded_model_answers_and_judges_an_episode() {
    let app = TestApp::spawn_with(config_for(&fresh_database().await)).await;
    let engine = lachesis_inference::Engine::load(
        &lachesis_tests::model_path(),
        lachesis_inference::EngineOptions::default(),
    )
    .expect("the embedded model loads");
    let policy: std::sync::Arc<dyn lachesis::policy::Policy> =
        std::sync::Arc::new(lachesis::policy::EmbeddedPolicy::new(engine));
    let db = lachesis::db::connect(&app.database_url, 4).await.unwrap();
    let market = Marketplace {
        ledger: Ledger::new(db),
        settler: Settler::Simulated,
        judges: Judges::new(Some(policy.clone())),
        queue_items: lachesis::feedback::DEFAULT_QUEUE_ITEMS,
    };
    let options: EnvOptions = serde_json::from_value(json!({"seed": 1, "group_size": 2,
        "max_tokens": 24, "settings": {"run": "p2p-model", "selection": "llm", "panel": 3}}))
    .unwrap();
    let env = PayToPlayEnv::new(&options, market).unwrap();
    env.setup().await.unwrap();
    let item = env.next_item().await.unwrap().unwrap();
    let group = env
        .collect(item, policy.as_ref())
        .await
        .unwrap()
        .group
        .expect("a fresh budget judges the episode");
    assert_eq!(group.sequences.len(), 2);
    for seq in &group.sequences {
        assert!(seq.score <= 1.0 && seq.score > -1.0, "{}", seq.score);
        assert_eq!(seq.rollout.tokens.len(), seq.rollout.masks.len());
    }
    let feed: Vec<MarketEvent> =
        serde_json::from_value(app.get("/api/marketplace/feed?run=p2p-model").await).unwrap();
    let MarketEvent::Round(round) = &feed[0] else {
        panic!("a round")
    };
    // SmolLM2-135M rarely writes the selection JSON: either way the choice says what happened.
    assert!(matches!(
        round.choice,
        PanelChoice::Llm | PanelChoice::LlmFallback { .. }
    ));
    assert!(round.paid.0 > 0);
    assert_eq!(
        round.weight_version,
        Some(0),
        "the round names the weights that answered: the model as loaded"
    );
}
