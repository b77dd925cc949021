//! Reviews that nobody finished: a server that stopped mid-review, or a review that gave up, leaves
//! a finished game without its verdicts. The next server to start, or a running server's sweep,
//! reviews it, unless a review in progress elsewhere still holds its claim.

use std::time::Duration;

use lachesis_shared::chess::GameView;
use lachesis_tests::{TestApp, config_for, fresh_database};
use reqwest::StatusCode;
use serde_json::json;

use super::{game, post, reviewed, some_legal_move};

/// One agent move each side of the person's, then the person resigns: the reviewed game.
async fn play_and_resign(app: &TestApp) -> GameView {
    let (status, body) = post(app, "/api/chess/games", &json!({"agent_side": "white"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let opened = game(body);
    let id = opened.id.clone();
    let reply = some_legal_move(&opened);
    let path = format!("/api/chess/games/{id}/moves");
    let (status, body) = post(app, &path, &json!({ "uci": reply })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = post(app, &format!("/api/chess/games/{id}/resign"), &json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    reviewed(app, &id).await
}

/// What a review cut off midway leaves: the game over, no verdict, no return, and its claim
/// held until `claimed_until` (an SQL expression).
async fn cut_off(database_url: &str, id: &str, claimed_until: &str) {
    let db = lachesis::db::connect(database_url, 1).await.unwrap();
    let game_id: i64 = id.parse().unwrap();
    let unjudged = sqlx::query(
        "UPDATE chess_moves SET reward = NULL WHERE game_id = $1 AND reward IS NOT NULL",
    )
    .bind(game_id)
    .execute(&db)
    .await
    .unwrap();
    assert_eq!(unjudged.rows_affected(), 2, "both agent moves were judged");
    let unreturned = sqlx::query(&format!(
        "UPDATE chess_games SET game_return = NULL, review_claimed_until = {claimed_until}
         WHERE id = $1"
    ))
    .bind(game_id)
    .execute(&db)
    .await
    .unwrap();
    assert_eq!(unreturned.rows_affected(), 1);
}

fn same_review(resumed: &GameView, judged: &GameView) {
    assert_eq!(resumed.game_return, judged.game_return);
    let verdicts = |g: &GameView| -> Vec<_> { g.moves.iter().map(|m| m.reward.clone()).collect() };
    assert_eq!(verdicts(resumed), verdicts(judged));
}

/// A server that stops while reviewing leaves the game claimed until its claim lapses; the next
/// server to start reviews it then, and judges it as the first did.
#[tokio::test]
async fn a_review_cut_off_by_a_stop_is_done_by_the_next_start() {
    let database_url = fresh_database().await;
    let first = TestApp::spawn_with(config_for(&database_url)).await;
    let judged = play_and_resign(&first).await;
    drop(first);
    cut_off(&database_url, &judged.id, "now() - interval '1 second'").await;

    let second = TestApp::spawn_with(config_for(&database_url)).await;
    same_review(&reviewed(&second, &judged.id).await, &judged);
}

/// A running server's sweep leaves a game alone while a review elsewhere holds its claim, and
/// reviews it once that claim lapses (its server stopped), without a restart.
#[tokio::test]
async fn a_running_servers_sweep_takes_up_a_review_whose_claim_lapsed() {
    let database_url = fresh_database().await;
    let mut config = config_for(&database_url);
    config.hosting.chess_review_sweep = Duration::from_secs(1);
    let app = TestApp::spawn_with(config).await;
    let judged = play_and_resign(&app).await;
    cut_off(&database_url, &judged.id, "now() + interval '1 hour'").await;

    // Three sweeps pass while another review holds the game.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let held = game(app.get(&format!("/api/chess/games/{}", judged.id)).await);
    assert_eq!(held.game_return, None, "a claimed game was reviewed again");
    assert!(held.moves.iter().all(|m| m.reward.is_none()));

    let db = lachesis::db::connect(&database_url, 1).await.unwrap();
    sqlx::query(
        "UPDATE chess_games SET review_claimed_until = now() - interval '1 second' WHERE id = $1",
    )
    .bind(judged.id.parse::<i64>().unwrap())
    .execute(&db)
    .await
    .unwrap();
    same_review(&reviewed(&app, &judged.id).await, &judged);
}
