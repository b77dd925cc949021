//! Pay-to-Play rounds against a real Postgres: a panel is chosen under the budget, really paid
//! through the ledger, judges every answer, and better answers earn more; the bandit spreads its
//! first rounds over the cards; a spent budget skips the round with a reason; a replayed round pays
//! nothing twice; the ledger reconciles afterwards.

use lachesis::envs::pay_to_play::bench;
use lachesis::ledger::{AccountId, Ledger};
use lachesis::marketplace::judges::Judges;
use lachesis::marketplace::panel::{Market, PanelConfig, PanelResult, Round, RoundOutcome};
use lachesis_shared::cats::{CatScenario, CatTask};
use lachesis_shared::ledger::{AccountKind, MicroUsdc};
use lachesis_tests::fresh_database;

/// One bandit round as the environment runs it: the market as it stands, a replay hearing the
/// panel it paid before.
async fn bandit_round(
    ledger: &Ledger,
    budget: AccountId,
    key: &str,
    task: &CatTask,
    answers: &[String],
    config: &PanelConfig,
) -> RoundOutcome {
    let judges = Judges::default();
    let market = Market::load(ledger.pool(), &judges).await.unwrap();
    let before = market.paid_before(ledger.pool(), key).await.unwrap();
    let round = Round {
        key,
        budget,
        task,
        answers,
    };
    let replayed = (!before.is_empty()).then_some(before);
    bench::bandit_round(ledger, &judges, &market, &round, config, replayed)
        .await
        .unwrap()
}

/// A round's result with its cards in slug order: a replay hears the panel it paid before in
/// market order, the first round in the bandit's order.
fn by_slug(result: &PanelResult) -> PanelResult {
    let mut result = result.clone();
    result.cards.sort_by(|a, b| a.slug.cmp(&b.slug));
    result
}

/// Asserts a replayed round was judged by exactly the panel `first` paid (the same cards, prices
/// and ledger transactions) with the same scores and rewards.
fn assert_same_panel(replay: RoundOutcome, first: &PanelResult) {
    let RoundOutcome::Judged(replay) = replay else {
        panic!("the replay was skipped: {replay:?}")
    };
    assert_eq!(by_slug(&replay), by_slug(first));
}

fn scenario() -> CatScenario {
    let data = lachesis::envs::cat_caretaker::data::CatData::builtin().unwrap();
    data.scenarios
        .iter()
        .find(|s| s.scenario.contains("fresh drinking water"))
        .cloned()
        .unwrap()
}

#[tokio::test]
async fn rounds_pay_their_panel_reward_good_answers_and_stop_when_the_budget_is_spent() {
    let url = fresh_database().await;
    let db = lachesis::db::connect(&url, 8).await.unwrap();
    lachesis::db::migrate(&db).await.unwrap();
    lachesis::marketplace::cards::seed(&db).await.unwrap();
    let ledger = Ledger::new(db.clone());
    let budget = ledger
        .account("budget/p2p-run/agent", AccountKind::Budget, None, None)
        .await
        .unwrap();
    ledger
        .fund("fund/p2p", budget, MicroUsdc(40_000))
        .await
        .unwrap();

    let scenario = scenario();
    let task = CatTask {
        scenario: scenario.clone(),
        observed: Vec::new(),
    };
    let good = format!("I'll {} for her now.", scenario.remedy.join(", "));
    let answers = vec![
        good,
        format!("Perhaps {}.", scenario.remedy[0]),
        "Sing to the cat.".to_string(),
    ];
    let config = PanelConfig {
        run: "p2p-run".into(),
        panel: 2,
        cost_weight: 1.0,
    };

    let mut spent = 0;
    let mut rounds = 0;
    let mut cards_heard = 0;
    let mut seen_cards = std::collections::BTreeSet::new();
    let mut first: Option<PanelResult> = None;
    let reason = loop {
        let outcome = bandit_round(
            &ledger,
            budget,
            &format!("round-{rounds}"),
            &task,
            &answers,
            &config,
        )
        .await;
        match outcome {
            RoundOutcome::Judged(result) => {
                assert!(!result.cards.is_empty() && result.cards.len() <= 2);
                assert!(result.cards.iter().all(|c| c.tx_id.is_some()));
                assert_eq!(result.unreadable, 0);
                // Better answers earn more, whoever judges; the cost term lowers every reward alike.
                let s = &result.panel_scores;
                assert!(s[0] > s[1] && s[1] > s[2], "{s:?}");
                let cost = result.paid.0 as f64 / 1e6;
                for (reward, score) in result.rewards.iter().zip(s) {
                    assert!((reward - (score - cost)).abs() < 1e-12);
                }
                spent += result.paid.0;
                if rounds == 1 {
                    // Replaying the first round with its key hears the same panel, pays nothing
                    // again and records nothing again.
                    let count = || async {
                        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM card_evaluations")
                            .fetch_one(&db)
                            .await
                            .unwrap()
                    };
                    let (before, evaluations) = (
                        ledger.balance(budget).await.unwrap().available.0,
                        count().await,
                    );
                    let replay =
                        bandit_round(&ledger, budget, "round-0", &task, &answers, &config).await;
                    assert_same_panel(replay, first.as_ref().expect("round 0 was judged"));
                    assert_eq!(ledger.balance(budget).await.unwrap().available.0, before);
                    assert_eq!(count().await, evaluations);
                }
                first.get_or_insert_with(|| result.clone());
                cards_heard += result.cards.len();
                seen_cards.extend(result.slugs());
                rounds += 1;
            }
            RoundOutcome::Skipped { reason } => break reason,
        }
        assert!(rounds < 100, "the budget never ran out");
    };
    assert!(reason.starts_with("budget spent"), "{reason}");
    assert!(rounds >= 2, "{rounds} rounds");
    assert!(
        seen_cards.len() >= 3,
        "the bandit tries cards before settling: {seen_cards:?}"
    );
    let left = ledger.balance(budget).await.unwrap().available.0;
    assert_eq!(left, 40_000 - spent, "every round's panel was really paid");
    // The card accounts received exactly what the budget lost.
    let earned: i64 = sqlx::query_scalar(
        "SELECT coalesce(sum(balance), 0)::BIGINT FROM ledger_accounts WHERE kind = 'card_owner'",
    )
    .fetch_one(&db)
    .await
    .unwrap();
    assert_eq!(earned, spent);
    let (evaluations, priced): (i64, i64) =
        sqlx::query_as("SELECT count(*), coalesce(sum(price), 0)::BIGINT FROM card_evaluations")
            .fetch_one(&db)
            .await
            .unwrap();
    // One evaluation per paid card per answer (three answers), none for the replays.
    assert_eq!(evaluations, 3 * cards_heard as i64);
    assert_eq!(priced, spent, "evaluation prices add up to the payments");

    // Replaying a round with its key, even with the budget spent, hears the panel it paid
    // and pays nothing again.
    let before = ledger.balance(budget).await.unwrap().available.0;
    let first = first.expect("round 0 was judged");
    assert_same_panel(
        bandit_round(&ledger, budget, "round-0", &task, &answers, &config).await,
        &first,
    );
    assert_eq!(ledger.balance(budget).await.unwrap().available.0, before);

    let report = lachesis::ledger::reconcile::reconcile(&db).await.unwrap();
    assert!(report.is_balanced(), "{report}");
}
