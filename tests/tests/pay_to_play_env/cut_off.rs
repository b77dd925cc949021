//! Rounds cut off after they paid: the caller that stops waiting (the runner aborting work over
//! its budget or stopping at its last step) does not stop the round, which records its judges'
//! evaluations and its feed round; a replay of the episode waits for it instead of judging twice,
//! a stopping runner returns only once it is recorded, and a round whose attempt died between
//! paying and recording is recorded by its replay.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use lachesis::envs::Environment;
use lachesis::envs::runner::{self, RunnerConfig, StopReason};
use lachesis::ledger::{AccountId, Ledger, Transfer};
use lachesis::marketplace::judges::Judges;
use lachesis::policy::{Finish, Policy, PolicyError, PolicyRequest, Rollout, rollout_from_ids};
use lachesis::settlement::Settler;
use lachesis_shared::ledger::MicroUsdc;
use lachesis_shared::marketplace::MarketEvent;
use lachesis_tests::scripted::ScriptedPolicy;
use lachesis_tests::{TestApp, config_for, fresh_database};
use serde_json::json;
use tokio::sync::watch;

use super::{answers_for, env_judged_by};

/// The one card left listed: a model card, judged by [`HeldJudge`].
const CARD: &str = "llm-generalist";
const VERDICT: &str = "It meets the need. \\boxed{0.7}";

/// A judge model that answers only once released, counting the verdicts it was asked for.
struct HeldJudge {
    asked: watch::Sender<usize>,
    released: watch::Sender<bool>,
    answered: AtomicUsize,
}

impl HeldJudge {
    fn new(released: bool) -> Arc<Self> {
        Arc::new(Self {
            asked: watch::channel(0).0,
            released: watch::channel(released).0,
            answered: AtomicUsize::new(0),
        })
    }

    async fn asked_at_least(&self, n: usize) {
        let mut asked = self.asked.subscribe();
        let _ = asked.wait_for(|asked| *asked >= n).await;
    }

    fn release(&self, released: bool) {
        self.released.send_replace(released);
    }
}

impl Policy for HeldJudge {
    fn name(&self) -> String {
        "held-judge".into()
    }

    fn complete(&self, request: PolicyRequest) -> BoxFuture<'_, Result<Vec<Rollout>, PolicyError>> {
        async move {
            self.asked.send_modify(|asked| *asked += 1);
            let _ = self.released.subscribe().wait_for(|go| *go).await;
            self.answered.fetch_add(1, Ordering::SeqCst);
            let ids: Vec<u32> = VERDICT.bytes().map(u32::from).collect();
            let rollout = rollout_from_ids(
                &[1],
                &ids,
                &vec![-0.1; ids.len()],
                VERDICT.into(),
                Finish::Stop,
            );
            Ok(vec![rollout; request.n.max(1)])
        }
        .boxed()
    }
}

/// Only [`CARD`] stays listed, so every round pays it alone.
async fn only_the_model_card(ledger: &Ledger) -> (i64, i64) {
    sqlx::query("UPDATE agent_cards SET listed = (slug = $1)")
        .bind(CARD)
        .execute(ledger.pool())
        .await
        .unwrap();
    sqlx::query_as("SELECT price, account_id FROM agent_cards WHERE slug = $1")
        .bind(CARD)
        .fetch_one(ledger.pool())
        .await
        .unwrap()
}

async fn evaluations(ledger: &Ledger, run: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM card_evaluations WHERE run = $1")
        .bind(run)
        .fetch_one(ledger.pool())
        .await
        .unwrap()
}

async fn spent(ledger: &Ledger, run: &str) -> i64 {
    let budget = ledger.find(&format!("budget/{run}/agent")).await.unwrap();
    let funded = 1_000_000; // budget_usdc "1"
    funded - ledger.balance(budget).await.unwrap().balance.0
}

async fn rounds(app: &TestApp, run: &str) -> Vec<String> {
    let feed: Vec<MarketEvent> =
        serde_json::from_value(app.get(&format!("/api/marketplace/feed?run={run}")).await).unwrap();
    feed.into_iter()
        .filter_map(|event| match event {
            MarketEvent::Round(round) => Some(round.episode),
            MarketEvent::Skipped(_) => None,
        })
        .collect()
}

fn episode(run: &str, seed: u64) -> String {
    format!("{run}/episode/{seed:016x}")
}

#[tokio::test]
async fn a_round_cut_off_after_paying_records_itself_and_its_replay_waits_for_it() {
    let app = TestApp::spawn_with(config_for(&fresh_database().await)).await;
    let run = "p2p-cut";
    let judge = HeldJudge::new(false);
    let settings = json!({"run": run, "budget_usdc": "1", "panel": 1});
    let (env, ledger) = env_judged_by(&app, settings, 3, Judges::new(Some(judge.clone()))).await;
    let (price, _) = only_the_model_card(&ledger).await;
    let policy = ScriptedPolicy::default();

    // The caller stops waiting once the card is paid and judging: the replay the runner would
    // send next joins the same round, and nothing is paid or heard twice.
    policy.set(answers_for(7));
    let mut first = env.collect(json!({"seed": 7}), &policy);
    tokio::select! {
        _ = &mut first => panic!("the round finished while its judge was held"),
        _ = judge.asked_at_least(1) => {}
    }
    drop(first);
    assert_eq!(spent(&ledger, run).await, price, "paid before judging");
    let (replayed, ()) = tokio::join!(env.collect(json!({"seed": 7}), &policy), async {
        judge.release(true)
    });
    let group = replayed
        .unwrap()
        .group
        .expect("the replay has the round's group");
    assert_eq!(group.scores().len(), 3);
    assert_eq!(
        (*judge.asked.borrow(), judge.answered.load(Ordering::SeqCst)),
        (3, 3),
        "one verdict an answer, none asked twice"
    );
    assert_eq!(spent(&ledger, run).await, price);
    assert_eq!(evaluations(&ledger, run).await, 3);
    assert_eq!(rounds(&app, run).await, vec![episode(run, 7)]);

    // A round nobody waits for any more is finished by the drain at the runner's stop.
    judge.release(false);
    policy.set(answers_for(8));
    let mut second = env.collect(json!({"seed": 8}), &policy);
    tokio::select! {
        _ = &mut second => panic!("the round finished while its judge was held"),
        _ = judge.asked_at_least(4) => {}
    }
    drop(second);
    tokio::join!(env.drain(), async { judge.release(true) });
    assert_eq!(
        evaluations(&ledger, run).await,
        6,
        "recorded by the time the drain ends"
    );
    assert_eq!(
        rounds(&app, run).await,
        vec![episode(run, 8), episode(run, 7)]
    );
    assert_eq!(spent(&ledger, run).await, 2 * price);
    let report = lachesis::ledger::reconcile::reconcile(ledger.pool())
        .await
        .unwrap();
    assert!(report.is_balanced(), "{report}");
}

#[tokio::test]
async fn a_round_paid_by_an_attempt_that_died_is_recorded_by_its_replay_once() {
    let app = TestApp::spawn_with(config_for(&fresh_database().await)).await;
    let run = "p2p-died";
    let judge = HeldJudge::new(true);
    let settings = json!({"run": run, "budget_usdc": "1", "panel": 1});
    let (env, ledger) = env_judged_by(&app, settings, 3, Judges::new(Some(judge.clone()))).await;
    let (price, card_account) = only_the_model_card(&ledger).await;

    // An attempt that paid the card under the episode's key and died before recording anything.
    let key = format!("{}/{CARD}", episode(run, 9));
    let transfer = Transfer {
        key: &key,
        payer: ledger.find(&format!("budget/{run}/agent")).await.unwrap(),
        payee: AccountId(card_account),
        amount: MicroUsdc(price),
        memo: "judge card",
    };
    Settler::Simulated.pay(&ledger, &transfer).await.unwrap();
    assert_eq!(evaluations(&ledger, run).await, 0);

    let policy = ScriptedPolicy::default();
    policy.set(answers_for(9));
    for _ in 0..2 {
        let group = env
            .collect(json!({"seed": 9}), &policy)
            .await
            .unwrap()
            .group
            .expect("the replay is judged");
        assert_eq!(group.scores().len(), 3);
        // Paid once (by the attempt that died), recorded once, on the feed once.
        assert_eq!(spent(&ledger, run).await, price);
        assert_eq!(evaluations(&ledger, run).await, 3);
        assert_eq!(rounds(&app, run).await, vec![episode(run, 9)]);
    }
}

#[tokio::test]
async fn a_stopping_runner_returns_only_once_the_round_it_cut_off_is_recorded() {
    let app = TestApp::spawn_with(config_for(&fresh_database().await)).await;
    let run = "p2p-stop";
    let judge = HeldJudge::new(false);
    let settings = json!({"run": run, "budget_usdc": "1", "panel": 1});
    let (env, ledger) = env_judged_by(&app, settings, 3, Judges::new(Some(judge.clone()))).await;
    only_the_model_card(&ledger).await;
    app.post("/register", &lachesis_tests::registration(3))
        .await;
    // The trainer's first pull starts the run; environments register after it.
    app.get("/batch").await;
    let agent: Arc<dyn Policy> = Arc::new(ScriptedPolicy::new(&[
        "Fresh water.",
        "Food and a warm bed.",
        "Sing to it.",
    ]));
    let config = RunnerConfig {
        max_workers: 1,
        total_steps: Some(0),
        ..RunnerConfig::default()
    };
    let (stop, stopped) = watch::channel(false);
    let runner = runner::run(&app.base, &env, agent, config, stopped);
    tokio::pin!(runner);
    tokio::select! {
        _ = &mut runner => panic!("the runner stopped by itself"),
        _ = judge.asked_at_least(1) => {}
    }
    // Stopped while its round is paid and judging: the runner waits for the round, however long
    // its judge takes.
    stop.send_replace(true);
    tokio::select! {
        _ = &mut runner => panic!("the runner returned while the round it cut off was judging"),
        _ = tokio::time::sleep(Duration::from_millis(500)) => {}
    }
    judge.release(true);
    let report = runner.await.unwrap();
    assert_eq!(report.stopped_by, Some(StopReason::Shutdown));
    assert_eq!(
        report.groups_sent, 0,
        "the round's group came after the stop"
    );
    assert_eq!(evaluations(&ledger, run).await, 3);
    assert_eq!(rounds(&app, run).await.len(), 1);
}
