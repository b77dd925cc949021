//! A people's round whose process died while people were ranking: its item takes no verdict
//! past the round's deadline, and the episode's replay in a new process closes the item the dead
//! attempt left and pays the verdict given on it, once, before asking people to rank its own
//! answers. With no replay, the server's sweep pays it once the deadline is well past.

use std::sync::mpsc;
use std::time::Duration;

use lachesis::envs::Environment;
use lachesis_shared::feedback::Earnings;
use lachesis_shared::ledger::MicroUsdc;
use lachesis_shared::marketplace::PanelChoice;
use lachesis_tests::Caller;
use lachesis_tests::scripted::ScriptedPolicy;
use reqwest::StatusCode;
use serde_json::json;

use super::super::sign_up;
use super::{PRICE, earnings, env_for, human_card, next_item, people_app, places, post, rank};
use super::{people_config, settled};
use super::{reconcile, rounds};

const RUN: &str = "people-replayed";
const SEED: u64 = 21;
const ANSWERS: [&str; 3] = ["Feed her.", "Sing.", "Brush her and check her teeth."];

/// Starts `SEED`'s episode of `run` in a runtime of its own, people given `deadline_secs`, and
/// drops the runtime when `die` fires: every task of the attempt (its round included) stops where
/// it is, as in a process killed with SIGKILL.
fn attempt_that_dies(
    database_url: String,
    run: &'static str,
    deadline_secs: u64,
    die: mpsc::Receiver<()>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        runtime.spawn(async move {
            let db = lachesis::db::connect(&database_url, 2).await.unwrap();
            let env = env_for(db, run, deadline_secs);
            env.setup().await.unwrap();
            let policy = ScriptedPolicy::new(&ANSWERS);
            let _ = env.collect(json!({"seed": SEED}), &policy).await;
        });
        let _ = die.recv();
        runtime.shutdown_background();
    })
}

async fn item_state(db: &sqlx::PgPool, item: i64) -> (bool, i32) {
    sqlx::query_as("SELECT closed, judged FROM feedback_items WHERE id = $1")
        .bind(item)
        .fetch_one(db)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_after_a_crash_closes_and_pays_what_the_dead_attempt_left_open() {
    let app = people_app(false).await;
    let ann = sign_up(&app, "/api/auth/setup", "ann", "labelers").await;
    // Two verdicts wanted per group, so the dead attempt's round was still waiting after ann's.
    let body = json!({"team": "labelers", "name": "replies", "kind": "rank", "overlap": 2,
        "guidelines": "Best first."});
    let (status, queue) = post(&app, Caller::Session(&ann), "/api/feedback/queues", body).await;
    assert_eq!(status, StatusCode::OK, "{queue}");
    let queue = queue["id"].as_i64().unwrap();
    let card = human_card("people", "labelers", queue);
    let (status, body) = post(&app, Caller::Session(&ann), "/api/marketplace/cards", card).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    let (die, dying) = mpsc::channel();
    let attempt = attempt_that_dies(app.database_url.clone(), RUN, 300, dying);
    let stale = loop {
        if let Some(item) = next_item(&app, &ann, queue).await {
            break item;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        rank(&app, &ann, stale.item, &[2, 0, 1]).await,
        StatusCode::OK
    );
    die.send(()).unwrap();
    attempt.join().unwrap();
    let db = lachesis::db::connect(&app.database_url, 4).await.unwrap();
    // What the crash left: an open item with a verdict nobody paid.
    assert_eq!(item_state(&db, stale.item).await, (false, 1));
    assert_eq!(earnings(&app, &ann).await.payments, 0);

    // The replay, in a new process: ann ranks its answers the other way round.
    let env = env_for(db.clone(), RUN, 3);
    env.setup().await.unwrap();
    let policy = ScriptedPolicy::new(&ANSWERS);
    let order = [0, 1, 2];
    let annotate = async {
        loop {
            if let Some(item) = next_item(&app, &ann, queue).await {
                assert_ne!(item.item, stale.item);
                assert_eq!(rank(&app, &ann, item.item, &order).await, StatusCode::OK);
                return item.item;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let (collected, fresh) = tokio::join!(env.collect(json!({"seed": SEED}), &policy), annotate);
    let group = collected.unwrap().group.expect("ann's rank judges it");
    let cost = PRICE as f64 / 1e6;
    let expected: Vec<f64> = places(&order).iter().map(|p| p - cost).collect();
    assert_eq!(
        group.scores(),
        expected,
        "only the replay's own verdict is used"
    );
    assert_eq!(item_state(&db, stale.item).await, (true, 1));
    assert_eq!(item_state(&db, fresh).await, (true, 1));
    // Both settled, so the server's sweep leaves them alone.
    assert!(settled(&db, stale.item).await && settled(&db, fresh).await);
    let paid = Earnings {
        balance: MicroUsdc(2 * PRICE),
        payments: 2,
    };
    assert_eq!(earnings(&app, &ann).await, paid, "both verdicts are paid");
    let feed = rounds(&app, RUN).await;
    assert_eq!(feed.len(), 1, "the dead attempt never reached the feed");
    assert_eq!(
        (&feed[0].choice, feed[0].panel_scores.clone()),
        (&PanelChoice::Human, places(&order))
    );

    // A second replay finds both items closed and paid: nobody is paid twice. Nobody ranks its
    // own item, so the bandit's panel judges it.
    let env = env_for(db.clone(), RUN, 1);
    env.setup().await.unwrap();
    let collected = env.collect(json!({"seed": SEED}), &policy).await.unwrap();
    assert!(collected.group.is_some());
    assert_eq!(earnings(&app, &ann).await, paid);
    reconcile(&app.database_url);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_item_whose_round_died_takes_no_verdict_past_the_round_deadline() {
    let app = people_app(false).await;
    let (ann, queue) = super::labelers(&app).await;
    let (die, dying) = mpsc::channel();
    let attempt = attempt_that_dies(app.database_url.clone(), "people-abandoned", 2, dying);
    let item = loop {
        if let Some(item) = next_item(&app, &ann, queue).await {
            break item;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    die.send(()).unwrap();
    attempt.join().unwrap();
    let db = lachesis::db::connect(&app.database_url, 2).await.unwrap();
    // Nothing closed it: the round that would have is gone.
    assert_eq!(item_state(&db, item.item).await, (false, 0));
    assert!(next_item(&app, &ann, queue).await.is_some());
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(next_item(&app, &ann, queue).await.is_none());
    assert_eq!(
        rank(&app, &ann, item.item, &[0, 1, 2]).await,
        StatusCode::CONFLICT
    );
    assert_eq!(item_state(&db, item.item).await, (false, 0));
    assert_eq!(earnings(&app, &ann).await.payments, 0);
}

/// Nobody restarts the run: the server's sweep (every second here) closes the dead round's item
/// and pays ann's verdict on the terms the round stored with it, once the deadline is a sweep
/// period past, and only once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_pays_the_verdicts_of_a_dead_round_nobody_replays() {
    let mut config = people_config(false).await;
    config.hosting.people_items_sweep = Duration::from_secs(1);
    let app = lachesis_tests::TestApp::spawn_with(config).await;
    let (ann, queue) = super::labelers(&app).await;
    let (die, dying) = mpsc::channel();
    let attempt = attempt_that_dies(app.database_url.clone(), "people-never-replayed", 2, dying);
    let item = loop {
        if let Some(item) = next_item(&app, &ann, queue).await {
            break item;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        rank(&app, &ann, item.item, &[1, 2, 0]).await,
        StatusCode::OK
    );
    die.send(()).unwrap();
    attempt.join().unwrap();
    let db = lachesis::db::connect(&app.database_url, 2).await.unwrap();
    // Before the deadline, the item is its round's: open, unpaid.
    assert_eq!(item_state(&db, item.item).await, (false, 1));
    assert_eq!(earnings(&app, &ann).await.payments, 0);
    assert!(!settled(&db, item.item).await);

    let mut waited = Duration::ZERO;
    while earnings(&app, &ann).await.payments == 0 {
        assert!(waited < Duration::from_secs(30), "the sweep never paid ann");
        tokio::time::sleep(Duration::from_millis(200)).await;
        waited += Duration::from_millis(200);
    }
    assert_eq!(item_state(&db, item.item).await, (true, 1));
    assert!(settled(&db, item.item).await);
    // Later sweeps find it settled: paid once.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let paid = Earnings {
        balance: MicroUsdc(PRICE),
        payments: 1,
    };
    assert_eq!(earnings(&app, &ann).await, paid);
    reconcile(&app.database_url);
}
