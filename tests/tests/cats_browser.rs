//! A person plays the cat caretaker in a real Chromium (`tests/browser/cats.mjs`): first as the
//! caretaker of the simulated cat, to a verdict that reveals the need; then as the cat, ticking
//! behaviors that the embedded model answers as the caretaker. The server's records of both
//! sessions are then checked against what the page showed.

use std::time::Duration;

use lachesis_tests::browser::{check_prerequisites, run_script};
use lachesis_tests::{TestApp, config_for, fresh_database};

#[tokio::test]
async fn a_person_plays_the_caretaker_and_the_cat_in_the_browser() {
    check_prerequisites();
    let mut config = config_for(&fresh_database().await);
    config.model = Some(lachesis_tests::model_path());
    let app = TestApp::spawn_with(config).await;

    let report = run_script("cats.mjs", &app.base, &[], Duration::from_secs(420))
        .await
        .passed();

    // The verdict the page showed is the rubric's on what the browser said.
    let caretaker = &report["caretaker"];
    let score = caretaker["score"].as_f64().expect("a score");
    assert!((0.0..=1.0).contains(&score));
    assert!(
        caretaker["revealed_need"]
            .as_str()
            .is_some_and(|n| !n.is_empty())
    );
    let cat = &report["cat"];
    assert_eq!(cat["behaviors_listed"], 35);
    assert_eq!(cat["ticked"].as_array().map(Vec::len), Some(2));
    assert!(cat["caretaker_reply"].as_str().is_some(), "{report:#}");

    let db = lachesis::db::connect(&app.database_url, 2).await.unwrap();
    let sessions: Vec<(String, serde_json::Value, Option<serde_json::Value>)> =
        sqlx::query_as("SELECT role, turns, verdict FROM cat_sessions ORDER BY id")
            .fetch_all(&db)
            .await
            .unwrap();
    assert_eq!(sessions.len(), 2, "one session per role");
    let (role, _, verdict) = &sessions[0];
    assert_eq!(role, "caretaker");
    let stored = verdict.as_ref().expect("the caretaker session is judged")["score"]
        .as_f64()
        .unwrap();
    assert!(
        (stored - score).abs() < 0.005,
        "shown {score}, stored {stored}"
    );
    let (role, turns, _) = &sessions[1];
    assert_eq!(role, "cat");
    let first = &turns[0];
    assert_eq!(first["speaker"], "cat");
    assert_eq!(
        first["behaviors"], cat["sent_turn"],
        "the behaviors ticked were sent"
    );
    assert_eq!(turns[1]["speaker"], "caretaker");
}
