//! The LLM as the player: the chess environment rolls out groups with the embedded model.

use lachesis_tests::{TestApp, config_for, fresh_database};
use serde_json::json;

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
