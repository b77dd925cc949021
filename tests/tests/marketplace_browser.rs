//! What a new user sees after `make run`: the server runs the Pay-to-Play environment with the
//! embedded model (agent, card chooser and model judges), and `/marketplace` in a real Chromium
//! (`tests/browser/marketplace.mjs`) shows the cards, then a round arriving live with the cards
//! paid, the run's budget falling and its ledger, without a reload. The server's own feed and
//! ledger are then checked against what the page showed, and the ledger reconciles.
//!
//! Needs what `make test` provides: the built frontend, Node with `node_modules`, Chromium and the
//! embedded model.

use std::time::Duration;

use lachesis_shared::marketplace::{BudgetView, MarketEvent};
use lachesis_tests::browser::{check_prerequisites, run_script};
use lachesis_tests::{TestApp, config_for, fresh_database};

#[tokio::test]
async fn a_pay_to_play_run_of_the_embedded_model_is_watched_live_in_the_browser() {
    check_prerequisites();
    let mut config = config_for(&fresh_database().await);
    config.model = Some(lachesis_tests::model_path());
    config.envs = vec![
        r#"pay_to_play:{"group_size": 2, "max_tokens": 24, "settings": {"run": "showcase", "budget_usdc": "0.5", "selection": "llm", "panel": 2}}"#
            .parse()
            .expect("a valid --env"),
    ];
    let app = TestApp::spawn_with(config).await;

    let report = run_script(
        "marketplace.mjs",
        &app.base,
        &[("ROUNDS_TIMEOUT_MS", "240000".to_string())],
        Duration::from_secs(420),
    )
    .await
    .passed();
    assert_eq!(report["reloaded"], false, "{report:#}");
    assert!(
        report["missing_cards"]
            .as_array()
            .is_some_and(|m| m.is_empty()),
        "{report:#}"
    );

    // The round the page showed live is the server's, with the cards it paid.
    let round = &report["round"];
    assert_eq!(round["run"], "showcase");
    let feed: Vec<MarketEvent> = serde_json::from_value(
        app.get("/api/marketplace/feed?run=showcase&limit=500")
            .await,
    )
    .unwrap();
    let shown = feed
        .iter()
        .find_map(|e| match e {
            MarketEvent::Round(r) if r.episode == round["episode"] => Some(r),
            _ => None,
        })
        .expect("the round shown is in the server's feed");
    let slugs: Vec<&str> = round["cards"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["slug"].as_str())
        .collect();
    let paid: Vec<&str> = shown.cards.iter().map(|c| c.slug.as_str()).collect();
    assert_eq!(slugs, paid, "{report:#}");

    // The budget fell by what the rounds paid, and the ledger shows the payments.
    let budgets: Vec<BudgetView> =
        serde_json::from_value(app.get("/api/marketplace/budgets").await).unwrap();
    let budget = budgets.iter().find(|b| b.run == "showcase").unwrap();
    assert!(budget.spent.0 > 0 && budget.available.0 < 500_000);
    assert_eq!(
        budget.available.0 + budget.spent.0,
        budget.funded.0 - held(&app).await
    );
    assert!(report["ledger_lines"].as_u64() >= Some(2), "{report:#}");

    let db = lachesis::db::connect(&app.database_url, 2).await.unwrap();
    let reconcile = lachesis::ledger::reconcile::reconcile(&db).await.unwrap();
    assert!(reconcile.is_balanced(), "{reconcile}");
}

/// Money held for payments in flight on the showcase's budget (a round may be paying right now).
async fn held(app: &TestApp) -> i64 {
    let accounts = app.get("/api/ledger/accounts").await;
    accounts
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "budget/showcase/agent")
        .and_then(|a| a["held"].as_i64())
        .unwrap_or(0)
}
