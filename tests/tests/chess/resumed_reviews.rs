//! Reviews that nobody finished: a server that stopped mid-review, or a review that gave up, leaves
//! a finished game without its verdicts. The next server to start, or a running server's sweep,
//! reviews it, unless a review in progress elsewhere still holds its claim.

use std::time::Duration;

use lachesis::chess::oracle_config::{OracleSettings, StockfishArgs};
use lachesis_shared::chess::GameView;
use lachesis_tests::{TestApp, config_for, fresh_database};
use reqwest::StatusCode;
use serde_json::json;

use super::{game, post, reviewed, some_legal_move};

/// One agent move each side of the person's, then the person resigns: the reviewed game.
async fn play_and_resign(app: &TestApp) -> GameView {
    let id = resign_unreviewed(app).await;
    reviewed(app, &id).await
}

/// What a review cut off midway leaves: the game over, no verdict, no return, and its claim
/// held until `claimed_until` (an SQL expression) by a server that is not running.
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
        "UPDATE chess_games SET game_return = NULL, review_claimed_until = {claimed_until},
         review_claimed_by = {GONE_SERVER} WHERE id = $1"
    ))
    .bind(game_id)
    .execute(&db)
    .await
    .unwrap();
    assert_eq!(unreturned.rows_affected(), 1);
}

/// The claim holder of a server that stopped without giving its claims back (killed).
const GONE_SERVER: i64 = 7;

/// Lets game `id`'s claim lapse, as it does when its holder is gone.
async fn lapse_claim(db: &sqlx::PgPool, id: &str) {
    let lapsed = sqlx::query(
        "UPDATE chess_games SET review_claimed_until = now() - interval '1 second' WHERE id = $1",
    )
    .bind(id.parse::<i64>().unwrap())
    .execute(db)
    .await
    .unwrap();
    assert_eq!(lapsed.rows_affected(), 1);
}

fn same_review(resumed: &GameView, judged: &GameView) {
    assert_eq!(resumed.game_return, judged.game_return);
    let verdicts = |g: &GameView| -> Vec<_> { g.moves.iter().map(|m| m.reward.clone()).collect() };
    assert_eq!(verdicts(resumed), verdicts(judged));
}

/// A server killed while reviewing leaves the game claimed until its claim lapses; the next
/// server to start reviews it then, and judges it as the first did.
#[tokio::test]
async fn a_review_cut_off_by_a_killed_server_is_done_by_the_next_start() {
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
    lapse_claim(&db, &judged.id).await;
    same_review(&reviewed(&app, &judged.id).await, &judged);
}

/// A server whose reviews are slow: Stockfish at depth 30, each search cut off at `search_ms`,
/// two searches for each agent move; its claims last an hour and its sweep runs every second.
fn slow_reviews(database_url: &str, search_ms: u64) -> lachesis::config::ServeConfig {
    let args = StockfishArgs {
        stockfish_depth: Some(30),
        stockfish_deadline_ms: Some(search_ms),
        stockfish_processes: Some(1),
        ..Default::default()
    };
    let stockfish = OracleSettings::resolve(&args)
        .unwrap()
        .expect("no Stockfish: apt-get install stockfish (make test installs it)");
    let mut config = lachesis::config::ServeConfig {
        stockfish: Some(stockfish),
        ..config_for(database_url)
    };
    config.hosting.chess_review_claim = Duration::from_secs(3600);
    config.hosting.chess_review_sweep = Duration::from_secs(1);
    config
}

/// A game with two agent moves, resigned without waiting for its review: its id.
async fn resign_unreviewed(app: &TestApp) -> String {
    let (status, body) = post(app, "/api/chess/games", &json!({"agent_side": "white"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let opened = game(body);
    let path = format!("/api/chess/games/{}/moves", opened.id);
    let (status, body) = post(app, &path, &json!({ "uci": some_legal_move(&opened) })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let resign = format!("/api/chess/games/{}/resign", opened.id);
    let (status, body) = post(app, &resign, &json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    opened.id
}

/// Game `id`'s claim holder, whether it is claimed until some time, and its return.
async fn claim_of(db: &sqlx::PgPool, id: &str) -> (Option<i64>, bool, Option<f64>) {
    sqlx::query_as(
        "SELECT review_claimed_by, review_claimed_until IS NOT NULL, game_return
         FROM chess_games WHERE id = $1",
    )
    .bind(id.parse::<i64>().unwrap())
    .fetch_one(db)
    .await
    .unwrap()
}

/// Waits until a review holds game `id`'s claim; the holder.
async fn claimed(db: &sqlx::PgPool, id: &str) -> i64 {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let (Some(holder), true, None) = claim_of(db, id).await {
            return holder;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the review never claimed the game"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn judges(view: &GameView) -> Vec<String> {
    view.moves
        .iter()
        .filter_map(|m| m.reward.as_ref().map(|r| r.judge.clone()))
        .collect()
}

/// A server stopped (by a signal) while it reviews gives the game's claim back as it drains: the
/// next server to start reviews the game at once, however long the first server's claims were.
#[tokio::test]
async fn a_stopping_server_gives_back_the_review_it_cut_off() {
    let database_url = fresh_database().await;
    // Eight seconds of review: the stop comes well inside it.
    let first = TestApp::spawn_with(slow_reviews(&database_url, 2_000)).await;
    let id = resign_unreviewed(&first).await;
    let db = lachesis::db::connect(&database_url, 1).await.unwrap();
    claimed(&db, &id).await;
    first.stop().await;
    assert_eq!(
        claim_of(&db, &id).await,
        (None, false, None),
        "the claim was not given back"
    );

    let second = TestApp::spawn_with(config_for(&database_url)).await;
    let view = reviewed(&second, &id).await;
    assert_eq!(
        judges(&view),
        ["engine", "engine"],
        "the second server judged"
    );
    assert_eq!(
        claim_of(&db, &id).await.0,
        None,
        "a stored review keeps its claim"
    );
}

/// A review whose claim another took meanwhile (its own had lapsed while it stalled) stores
/// nothing when it ends; the game is reviewed once the other claim lapses in turn.
#[tokio::test]
async fn a_review_that_lost_its_claim_stores_nothing() {
    let database_url = fresh_database().await;
    // Four seconds of review.
    let app = TestApp::spawn_with(slow_reviews(&database_url, 1_000)).await;
    let id = resign_unreviewed(&app).await;
    let db = lachesis::db::connect(&database_url, 1).await.unwrap();
    let holder = claimed(&db, &id).await;
    assert_ne!(holder, GONE_SERVER);
    let taken = sqlx::query(
        "UPDATE chess_games SET review_claimed_by = $2, review_claimed_until = now() + interval '1 hour'
         WHERE id = $1 AND review_claimed_by = $3",
    )
    .bind(id.parse::<i64>().unwrap())
    .bind(GONE_SERVER)
    .bind(holder)
    .execute(&db)
    .await
    .unwrap();
    assert_eq!(
        taken.rows_affected(),
        1,
        "the review ended before its claim was taken"
    );
    // Twice the review's length: it has ended, and stored nothing.
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(claim_of(&db, &id).await, (Some(GONE_SERVER), true, None));

    lapse_claim(&db, &id).await;
    let view = reviewed(&app, &id).await;
    assert_eq!(judges(&view), ["stockfish", "stockfish"]);
    assert_eq!(claim_of(&db, &id).await.0, None);
}
