//! People as judges: a team's human card sends Pay-to-Play's groups to its rank queue; its
//! annotators rank them over HTTP and each verdict is paid the card's price into their own ledger
//! account; their ranks are the rewards, and a GRPO trainer learns from them. Silence past the
//! deadline falls back to the bandit's panel and closes the item. The ledger reconciles after.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lachesis::envs::pay_to_play::{Marketplace, PayToPlayEnv};
use lachesis::envs::{EnvOptions, Environment};
use lachesis::ledger::Ledger;
use lachesis::marketplace::judges::Judges;
use lachesis::settlement::Settler;
use lachesis_shared::feedback::{Earnings, ItemToJudge};
use lachesis_shared::marketplace::{MarketEvent, PanelChoice, RoundEvent};
use lachesis_tests::scripted::ScriptedPolicy;
use lachesis_tests::{Caller, TestApp, config_for, fresh_database, lachesis_bin, model_path};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::{Session, sign_up};

#[path = "human_judge/replay.rs"]
mod replay;

const ADMIN: &str = "admin-token-for-the-human-judge-tests";
/// The human card's price per verdict: 0.002 USDC.
const PRICE: i64 = 2_000;

async fn people_app(model: bool) -> TestApp {
    TestApp::spawn_with(people_config(model).await).await
}

async fn people_config(model: bool) -> lachesis::config::ServeConfig {
    let mut config = config_for(&fresh_database().await);
    config.auth = true;
    config.api_token = Some(ADMIN.into());
    if model {
        config.model = Some(model_path());
    }
    config
}

async fn post(app: &TestApp, who: Caller<'_>, path: &str, body: Value) -> (StatusCode, Value) {
    app.call(who, Method::POST, path, Some(body)).await
}

async fn open_queue(app: &TestApp, owner: &Session, team: &str, name: &str, kind: &str) -> i64 {
    let body = json!({"team": team, "name": name, "kind": kind, "overlap": 1,
        "guidelines": "Best first: the reply that meets the cat's need with concrete care."});
    let (status, queue) = post(app, Caller::Session(owner), "/api/feedback/queues", body).await;
    assert_eq!(status, StatusCode::OK, "{queue}");
    queue["id"].as_i64().unwrap()
}

fn human_card(slug: &str, team: &str, queue: i64) -> Value {
    json!({"slug": slug, "name": "People", "specialties": ["comfort"], "price": PRICE,
        "team": team, "judge": {"kind": "human", "queue": queue}})
}

/// The labelers' owner (ann) with a rank queue and the human card `people` on it.
async fn labelers(app: &TestApp) -> (Session, i64) {
    let ann = sign_up(app, "/api/auth/setup", "ann", "labelers").await;
    let queue = open_queue(app, &ann, "labelers", "replies", "rank").await;
    let card = human_card("people", "labelers", queue);
    let (status, body) = post(app, Caller::Session(&ann), "/api/marketplace/cards", card).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    (ann, queue)
}

async fn next_item(app: &TestApp, who: &Session, queue: i64) -> Option<ItemToJudge> {
    let path = format!("/api/feedback/queues/{queue}/next");
    let (status, body) = app
        .call(Caller::Session(who), Method::GET, &path, None)
        .await;
    match status {
        StatusCode::OK => Some(serde_json::from_value(body).unwrap()),
        StatusCode::NO_CONTENT => None,
        other => panic!("next: {other} {body}"),
    }
}

async fn rank(app: &TestApp, who: &Session, item: i64, order: &[usize]) -> StatusCode {
    let path = format!("/api/feedback/items/{item}/judgements");
    let body = json!({"judgement": {"kind": "rank", "order": order}});
    post(app, Caller::Session(who), &path, body).await.0
}

async fn earnings(app: &TestApp, who: &Session) -> Earnings {
    let (status, body) = app
        .call(
            Caller::Session(who),
            Method::GET,
            "/api/feedback/earnings",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    serde_json::from_value(body).unwrap()
}

async fn rounds(app: &TestApp, run: &str) -> Vec<RoundEvent> {
    let path = format!("/api/marketplace/feed?run={run}");
    let (status, body) = app
        .call(Caller::Token(ADMIN), Method::GET, &path, None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let feed: Vec<MarketEvent> = serde_json::from_value(body).unwrap();
    feed.into_iter()
        .filter_map(|event| match event {
            MarketEvent::Round(round) => Some(*round),
            MarketEvent::Skipped(_) => None,
        })
        .collect()
}

/// Whether `item`'s verdicts were all paid, by its round or for it.
async fn settled(db: &sqlx::PgPool, item: i64) -> bool {
    sqlx::query_scalar("SELECT settled_at IS NOT NULL FROM feedback_items WHERE id = $1")
        .bind(item)
        .fetch_one(db)
        .await
        .unwrap()
}

fn reconcile(database_url: &str) {
    let out = std::process::Command::new(lachesis_bin())
        .args(["ledger", "reconcile"])
        .env("DATABASE_URL", database_url)
        .output()
        .expect("run lachesis ledger reconcile");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the ledger does not reconcile:\n{stdout}"
    );
}

/// Each answer's place as a score, 1 for first and 0 for last: what a rank says, computed here
/// from the order the annotator gave.
fn places(order: &[usize]) -> Vec<f64> {
    let mut scores = vec![0.0; order.len()];
    for (place, &answer) in order.iter().enumerate() {
        scores[answer] = 1.0 - place as f64 / (order.len() - 1) as f64;
    }
    scores
}

fn env_for(db: sqlx::PgPool, run: &str, deadline_secs: u64) -> PayToPlayEnv {
    let market = Marketplace {
        ledger: Ledger::new(db),
        settler: Settler::Simulated,
        judges: Judges::default(),
        queue_items: lachesis::feedback::DEFAULT_QUEUE_ITEMS,
    };
    let options: EnvOptions = serde_json::from_value(json!({"seed": 4, "group_size": 3,
        "settings": {"run": run, "budget_usdc": "0.05", "human_card": "people",
            "human_deadline_secs": deadline_secs}}))
    .unwrap();
    PayToPlayEnv::new(&options, market).expect("valid settings")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_rank_a_group_for_pay_and_silence_falls_back_to_the_bandit() {
    let app = people_app(false).await;
    let (ann, queue) = labelers(&app).await;

    // A team's card can only send groups to a rank queue of its own team.
    let bob = sign_up(&app, "/api/auth/register", "bob", "bobs").await;
    let bobs_queue = open_queue(&app, &bob, "bobs", "bobs-replies", "rank").await;
    let rates = open_queue(&app, &ann, "labelers", "ratings", "rate").await;
    for (who, card) in [
        (&ann, human_card("theirs", "labelers", bobs_queue)),
        (&bob, human_card("mine", "bobs", queue)),
        (&ann, human_card("rated", "labelers", rates)),
    ] {
        let (status, body) = post(&app, Caller::Session(who), "/api/marketplace/cards", card).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    }
    // Earnings are a signed-in person's own.
    let (status, _) = app
        .call(Caller::Nobody, Method::GET, "/api/feedback/earnings", None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(earnings(&app, &ann).await.payments, 0);

    // A group of three answers; ann ranks the third first, then the first, then the second.
    let db = lachesis::db::connect(&app.database_url, 4).await.unwrap();
    let env = env_for(db.clone(), "people-paid", 60);
    env.setup().await.unwrap();
    let policy = ScriptedPolicy::new(&["Feed her.", "Sing.", "Brush her and check her teeth."]);
    let order = [2, 0, 1];
    let annotate = async {
        loop {
            if let Some(item) = next_item(&app, &ann, queue).await {
                assert_eq!(item.answers.len(), 3);
                assert_eq!(rank(&app, &ann, item.item, &order).await, StatusCode::OK);
                return item;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let (collected, item) = tokio::join!(env.collect(json!({"seed": 11}), &policy), annotate);
    let group = collected
        .unwrap()
        .group
        .expect("the people's ranks judge it");
    assert_eq!(item.answers[2], "Brush her and check her teeth.");
    // The person ranking is told how long the item takes verdicts: the round's 60 s, less the
    // moments since it asked.
    let closes_in_ms = item
        .closes_in_ms
        .expect("a round's item says when it closes");
    assert!((50_000..=60_000).contains(&closes_in_ms), "{closes_in_ms}");
    let cost = PRICE as f64 / 1e6;
    let expected: Vec<f64> = places(&order).iter().map(|p| p - cost).collect();
    assert_eq!(
        group.scores(),
        expected,
        "rewards are the places less the cost"
    );
    let round = &rounds(&app, "people-paid").await[0];
    assert_eq!(round.choice, PanelChoice::Human);
    assert_eq!(round.panel_scores, places(&order));
    assert_eq!((round.cards.len(), round.paid.0), (1, PRICE));
    assert_eq!(
        earnings(&app, &ann).await,
        Earnings {
            balance: lachesis_shared::ledger::MicroUsdc(PRICE),
            payments: 1
        }
    );

    // Nobody ranks the next group in time: the bandit's panel judges it and the item closes, so
    // a late verdict is refused (and never paid).
    let env = env_for(db.clone(), "people-silent", 1);
    env.setup().await.unwrap();
    let group = env
        .collect(json!({"seed": 12}), &policy)
        .await
        .unwrap()
        .group
        .expect("the fallback judges it");
    assert_eq!(group.sequences.len(), 3);
    let round = &rounds(&app, "people-silent").await[0];
    let PanelChoice::HumanFallback { reason } = &round.choice else {
        panic!("a fallback round: {:?}", round.choice)
    };
    assert!(reason.starts_with("no verdict within"), "{reason}");
    assert!(round.cards.iter().all(|c| c.slug != "people"), "{round:?}");
    assert!(next_item(&app, &ann, queue).await.is_none());
    let closed: i64 =
        sqlx::query_scalar("SELECT id FROM feedback_items WHERE closed AND judged = 0")
            .fetch_one(&db)
            .await
            .unwrap();
    assert_eq!(rank(&app, &ann, closed, &order).await, StatusCode::CONFLICT);
    assert_eq!(earnings(&app, &ann).await.payments, 1);
    reconcile(&app.database_url);
}

/// The loop the issue asks for, across processes: `lachesis env serve pay_to_play` with the human
/// card, answered by the server's embedded model; `lachesis train run` trains on its batches;
/// the test's annotator ranks every group over HTTP as it arrives (the longer answer first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpo_run_trains_on_groups_people_ranked_and_they_are_paid() {
    let app = people_app(true).await;
    let (ann, queue) = labelers(&app).await;
    let mut env = tokio::process::Command::new(lachesis_bin())
        .args(["env", "serve", "pay_to_play", "--api", &app.base])
        .args(["--policy", "vllm", "--server", &app.base])
        .arg("--model")
        .arg(model_path())
        .args([
            "--group-size",
            "2",
            "--max-tokens",
            "16",
            "--max-workers",
            "2",
        ])
        .args(["--set", "run=people-grpo", "--set", "budget_usdc=\"0.05\""])
        .args([
            "--set",
            "human_card=\"people\"",
            "--set",
            "human_deadline_secs=300",
        ])
        .args(["--database-url", &app.database_url])
        .env("LACHESIS_API_TOKEN", ADMIN)
        .env("LACHESIS_INFERENCE_API_KEY", ADMIN)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the environment starts");
    let scratch = std::env::temp_dir().join(format!("lachesis-people-{}", std::process::id()));
    let trainer = lachesis_tests::trainer_command(&app.base, "none", "1e-4", 2, &scratch)
        .env("LACHESIS_API_TOKEN", ADMIN)
        .output();

    let trained = AtomicBool::new(false);
    let annotate = async {
        let mut expected: HashMap<Vec<String>, Vec<f64>> = HashMap::new();
        let mut verdicts = 0;
        while !trained.load(Ordering::SeqCst) {
            match next_item(&app, &ann, queue).await {
                Some(item) => {
                    let mut order: Vec<usize> = (0..item.answers.len()).collect();
                    order.sort_by_key(|&i| std::cmp::Reverse(item.answers[i].chars().count()));
                    // A round may close the item first (its deadline); then it is not used.
                    if rank(&app, &ann, item.item, &order).await == StatusCode::OK {
                        expected.insert(item.answers.clone(), places(&order));
                        verdicts += 1;
                    }
                }
                None => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
        (expected, verdicts)
    };
    let train = async {
        let output = trainer.await.expect("the trainer runs");
        trained.store(true, Ordering::SeqCst);
        output
    };
    // An environment that fails (a bad flag, a stale binary) fails the test instead of leaving
    // the trainer waiting for batches that never come; one that finishes its steps may exit
    // before the trainer does.
    let work = async { tokio::join!(train, annotate) };
    tokio::pin!(work);
    let (output, (expected, verdicts)) = tokio::select! {
        pair = &mut work => pair,
        status = env.wait() => {
            let status = status.expect("the environment's status");
            assert!(status.success(), "the environment failed: {status}");
            work.await
        }
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the trainer failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // The environment stops by itself once the queue holds batches past the trainer's steps, and
    // otherwise serves on (atroposlib's rule): stopped as an orchestrator would, its rounds cut
    // off close their items, pay the verdicts already given and record themselves before it
    // exits.
    if env.try_wait().expect("the environment's status").is_none() {
        lachesis_tests::sigterm(&env);
    }
    let status = tokio::time::timeout(Duration::from_secs(120), env.wait())
        .await
        .expect("the environment stops once signalled")
        .expect("the environment's status");
    assert!(status.success(), "the environment failed: {status}");
    let _ = std::fs::remove_dir_all(&scratch);

    // Two GRPO steps on batches of two groups each.
    let (status, metrics) = app
        .call(
            Caller::Token(ADMIN),
            Method::GET,
            "/api/runs/default/metrics",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{metrics}");
    assert_eq!(
        metrics["trainer"].as_array().map(Vec::len),
        Some(2),
        "{stdout}"
    );

    // Every judged round was the people's, scored by the places the annotator gave, and each of
    // their verdicts was paid from the run's budget into their account.
    let rounds = rounds(&app, "people-grpo").await;
    assert!(rounds.len() >= 4, "{} rounds fed two batches", rounds.len());
    for round in &rounds {
        assert_eq!(round.choice, PanelChoice::Human, "{round:?}");
        let places = expected
            .get(&round.answers)
            .unwrap_or_else(|| panic!("a round the annotator did not rank: {round:?}"));
        assert_eq!(&round.panel_scores, places);
    }
    // Every verdict given was paid once and is a round on the feed.
    let earned = earnings(&app, &ann).await;
    assert_eq!(
        (rounds.len() as i64, earned.payments),
        (verdicts, verdicts),
        "rounds and payments against the verdicts given"
    );
    assert_eq!(earned.balance.0, PRICE * earned.payments);
    let (_, budgets) = app
        .call(
            Caller::Token(ADMIN),
            Method::GET,
            "/api/marketplace/budgets",
            None,
        )
        .await;
    let budget = budgets
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["run"] == "people-grpo")
        .unwrap_or_else(|| panic!("the run's budget: {budgets}"));
    assert_eq!(budget["spent"], PRICE * earned.payments, "{budget}");
    reconcile(&app.database_url);
}
