//! A stranger with a free account against the judge marketplace: they try to make the server send
//! its secrets to a host of theirs, and to farm the budgets that pay for judging. A listener on
//! this machine stands for their host and proves nothing reaches it.

use std::sync::Arc;

use lachesis::ledger::{AccountId, Ledger};
use lachesis::marketplace::judges::Judges;
use lachesis::marketplace::outbound::OutboundLimits;
use lachesis::marketplace::panel::{Market, PanelConfig, Round, RoundOutcome, judge_round};
use lachesis::marketplace::probation::ProbationRules;
use lachesis::marketplace::sealed::SecretsKey;
use lachesis::settlement::Settler;
use lachesis_shared::cats::CatTask;
use lachesis_shared::ledger::{AccountKind, MicroUsdc};
use lachesis_shared::marketplace::PanelChoice;
use lachesis_tests::listener::Listener;
use lachesis_tests::{Caller, TestApp, config_for, fresh_database, sign_up};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

fn endpoint_card(slug: &str, base_url: &str) -> Value {
    json!({
        "slug": slug, "name": "Remote Judge", "specialties": ["comfort"], "price": 1_000,
        "team": "mallory-inc",
        "judge": {"kind": "openai", "base_url": base_url, "model": "m", "system_prompt": "judge"},
    })
}

async fn card_count(db: &sqlx::PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM agent_cards WHERE owner_team IS NOT NULL")
        .fetch_one(db)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_team_card_can_name_no_server_variable_and_no_private_host() {
    let url = fresh_database().await;
    let mut config = config_for(&url);
    config.auth = true;
    config.hosting.secrets_key = Some(SecretsKey::random());
    let app = TestApp::spawn_with(config).await;
    let db = lachesis::db::connect(&url, 2).await.unwrap();
    let _owner = sign_up(&app, "/api/auth/setup", "ada", "cats-inc").await;
    let mallory = sign_up(&app, "/api/auth/register", "mallory", "mallory-inc").await;
    let listener = Listener::start(Arc::new(b"HTTP/1.1 200 OK\r\n\r\n".to_vec())).await;
    let port = listener.port;

    // Today's attack: name the database URL (or the chain key, or the admin token) as the key.
    let mut naming = endpoint_card("leaky", "https://judge.example/v1");
    naming["judge"]["api_key_env"] = json!("DATABASE_URL");
    let (status, body) = app
        .call(
            Caller::Session(&mallory),
            Method::POST,
            "/api/marketplace/cards",
            Some(naming),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("environment variable")
    );

    // Endpoints on this machine, its network, or the cloud's metadata service are refused.
    for base in [
        format!("http://127.0.0.1:{port}/v1"),
        format!("https://127.0.0.1:{port}/v1"),
        format!("https://localhost:{port}/v1"),
        format!("https://[::1]:{port}/v1"),
        "https://169.254.169.254/latest".to_string(),
        "https://10.0.0.7/v1".to_string(),
        "ftp://judge.example/v1".to_string(),
    ] {
        let (status, body) = app
            .call(
                Caller::Session(&mallory),
                Method::POST,
                "/api/marketplace/cards",
                Some(endpoint_card("local", &base)),
            )
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{base}: {body}");
    }
    // A key belongs to an endpoint card only.
    let mut rubric_with_key = endpoint_card("keyed", "https://judge.example/v1");
    rubric_with_key["judge"] = json!({"kind": "rubric"});
    rubric_with_key["api_key"] = json!("sk-mallory");
    let (status, _) = app
        .call(
            Caller::Session(&mallory),
            Method::POST,
            "/api/marketplace/cards",
            Some(rubric_with_key),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(card_count(&db).await, 0, "no refused card was listed");
    assert_eq!(
        listener.connections(),
        0,
        "nothing was sent to the listener"
    );

    // Postgres itself refuses a team card that names a server variable, whatever wrote it.
    let team: i64 = sqlx::query_scalar("SELECT id FROM teams WHERE name = 'mallory-inc'")
        .fetch_one(&db)
        .await
        .unwrap();
    let refused = insert_card(
        &db,
        "sneaky",
        Some(team),
        json!({"kind": "openai", "base_url": "https://judge.example/v1", "model": "m",
               "system_prompt": "judge", "api_key_env": "DATABASE_URL"}),
        None,
        1_000,
    )
    .await;
    let message = refused.unwrap_err().to_string();
    assert!(
        message.contains("agent_cards_team_cards_name_no_server_variable"),
        "{message}"
    );
}

/// Lists a card straight into Postgres, as if its host had passed the listing check and its name
/// was re-pointed afterwards (DNS rebinding), or as the operator lists its own.
async fn insert_card(
    db: &sqlx::PgPool,
    slug: &str,
    team: Option<i64>,
    judge: Value,
    sealed_key: Option<Vec<u8>>,
    price: i64,
) -> Result<i64, sqlx::Error> {
    let mut tx = db.begin().await?;
    let account: i64 = sqlx::query_scalar(
        "INSERT INTO ledger_accounts (name, kind, team_id) VALUES ($1, 'card_owner', $2)
         RETURNING id",
    )
    .bind(format!("card/{slug}"))
    .bind(team)
    .fetch_one(&mut *tx)
    .await?;
    let id = sqlx::query_scalar(
        "INSERT INTO agent_cards (slug, name, specialties, price, owner_team, account_id, judge,
                                  judge_key)
         VALUES ($1, $1, ARRAY['comfort'], $2, $3, $4, $5, $6) RETURNING id",
    )
    .bind(slug)
    .bind(price)
    .bind(team)
    .bind(account)
    .bind(judge)
    .bind(sealed_key)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(id)
}

async fn funded_budget(ledger: &Ledger, name: &str, micro: i64) -> AccountId {
    let budget = ledger
        .account(name, AccountKind::Budget, None, None)
        .await
        .unwrap();
    ledger
        .fund(&format!("fund/{name}"), budget, MicroUsdc(micro))
        .await
        .unwrap();
    budget
}

fn task() -> CatTask {
    let data = lachesis::envs::cat_caretaker::data::CatData::builtin().unwrap();
    let scenario = data.scenarios[0].clone();
    CatTask {
        observed: Vec::new(),
        scenario,
    }
}

/// One bandit round over the market as it stands; the slugs it paid.
async fn round(ledger: &Ledger, judges: &Judges, budget: AccountId, key: &str) -> Vec<String> {
    let market = Market::load(ledger.pool(), judges).await.unwrap();
    let available = ledger.balance(budget).await.unwrap().available.0;
    let chosen = market.bandit_pick(8, available);
    let task = task();
    let answers = vec!["Fresh water and a vet visit.".to_string()];
    let round = Round {
        key,
        budget,
        task: &task,
        answers: &answers,
    };
    let config = PanelConfig {
        run: "hostile".into(),
        panel: 8,
        cost_weight: 0.0,
    };
    let outcome = judge_round(
        ledger,
        &Settler::Simulated,
        judges,
        &market,
        &round,
        chosen,
        PanelChoice::Bandit,
        &config,
    )
    .await
    .unwrap();
    match outcome {
        RoundOutcome::Judged(result) => result.slugs(),
        RoundOutcome::Skipped { .. } => Vec::new(),
    }
}

#[tokio::test]
async fn a_team_endpoint_re_pointed_at_this_machine_is_never_called_and_drops_out() {
    let url = fresh_database().await;
    let db = lachesis::db::connect(&url, 4).await.unwrap();
    lachesis::db::migrate(&db).await.unwrap();
    lachesis::marketplace::cards::seed(&db).await.unwrap();
    let secrets = SecretsKey::random();
    let listener = Listener::start(Arc::new(
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{}".to_vec(),
    ))
    .await;
    let team: i64 =
        sqlx::query_scalar("INSERT INTO teams (name) VALUES ('mallory-inc') RETURNING id")
            .fetch_one(&db)
            .await
            .unwrap();
    let port = listener.port;
    for (slug, base) in [
        ("rebound-name", format!("https://localhost:{port}/v1")),
        ("rebound-ip", format!("https://127.0.0.1:{port}/v1")),
        (
            "rebound-mapped",
            format!("https://[::ffff:127.0.0.1]:{port}/v1"),
        ),
    ] {
        let sealed = secrets.seal(slug, "sk-mallory").unwrap();
        insert_card(
            &db,
            slug,
            Some(team),
            json!({"kind": "openai", "base_url": base, "model": "m", "system_prompt": "judge"}),
            Some(sealed),
            500,
        )
        .await
        .unwrap();
    }
    let ledger = Ledger::new(db.clone());
    let budget = funded_budget(&ledger, "budget/hostile/agent", 10_000_000).await;
    let judges = Judges::new(None)
        .with_secrets(Some(secrets))
        .with_probation(ProbationRules {
            evaluations: 2,
            ..ProbationRules::default()
        });

    for i in 0..8 {
        let untried: Vec<String> = sqlx::query_scalar(
            "SELECT slug FROM agent_cards c WHERE owner_team IS NOT NULL
             AND NOT EXISTS (SELECT 1 FROM card_evaluations e WHERE e.card_id = c.id)",
        )
        .fetch_all(&db)
        .await
        .unwrap();
        let paid = round(&ledger, &judges, budget, &format!("hostile/{i}")).await;
        let first_tries: Vec<&String> = paid.iter().filter(|s| untried.contains(s)).collect();
        assert!(
            first_tries.len() <= 1,
            "round {i} tried {first_tries:?}: at most one untried team card per round"
        );
    }
    assert_eq!(
        listener.connections(),
        0,
        "the server never connected to its own machine"
    );
    assert!(listener.received.lock().unwrap().is_empty());
    // Each was tried (its verdicts unreadable: refused at connect time) until its probation
    // ended, and then never again.
    let unreadable: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT c.slug, count(e.id), count(e.id) FILTER (WHERE e.score IS NULL)
         FROM agent_cards c JOIN card_evaluations e ON e.card_id = c.id
         WHERE c.owner_team IS NOT NULL GROUP BY c.slug ORDER BY c.slug",
    )
    .fetch_all(&db)
    .await
    .unwrap();
    assert_eq!(unreadable.len(), 3, "{unreadable:?}");
    for (slug, evaluations, none) in &unreadable {
        assert_eq!(evaluations, none, "{slug}: every verdict unreadable");
        assert_eq!(*evaluations, 2, "{slug}: dropped after its probation");
    }
    let market = Market::load(&db, &judges).await.unwrap();
    assert!(market.cards.iter().all(|c| c.owner_team.is_none()));
}

#[tokio::test]
async fn an_oversized_judge_answer_is_cut_off_unread() {
    let url = fresh_database().await;
    let db = lachesis::db::connect(&url, 4).await.unwrap();
    lachesis::db::migrate(&db).await.unwrap();
    // An operator's card on this machine (allowed: a local vLLM is normal) whose endpoint floods.
    let mut flood = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n".to_vec();
    flood.extend(std::iter::repeat_n(b' ', 4 * 1024 * 1024));
    flood.extend_from_slice(br#"{"choices":[{"message":{"content":"\\boxed{1}"}}]}"#);
    let listener = Listener::start(Arc::new(flood)).await;
    insert_card(
        &db,
        "operator-remote",
        None,
        json!({"kind": "openai", "base_url": format!("http://127.0.0.1:{}/v1", listener.port),
               "model": "m", "system_prompt": "judge"}),
        None,
        1_000,
    )
    .await
    .unwrap();
    let ledger = Ledger::new(db.clone());
    let budget = funded_budget(&ledger, "budget/flood/agent", 1_000_000).await;
    let judges = Judges::new(None).with_limits(OutboundLimits {
        max_response_bytes: 64 * 1024,
        ..OutboundLimits::default()
    });
    let paid = round(&ledger, &judges, budget, "flood/0").await;
    assert_eq!(paid, vec!["operator-remote".to_string()]);
    assert_eq!(
        listener.connections(),
        1,
        "the operator's endpoint was called"
    );
    let score: Option<f64> = sqlx::query_scalar("SELECT score FROM card_evaluations")
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(score, None, "an answer over the cap is not read");
}

#[tokio::test]
async fn budgets_cannot_be_farmed_with_many_dear_cards() {
    let url = fresh_database().await;
    let mut config = config_for(&url);
    config.auth = true;
    config.hosting.team_card_limit = 4;
    let app = TestApp::spawn_with(config).await;
    let _owner = sign_up(&app, "/api/auth/setup", "ada", "cats-inc").await;
    let mallory = sign_up(&app, "/api/auth/register", "mallory", "mallory-inc").await;
    let rubric = |slug: &str, price: i64| {
        json!({"slug": slug, "name": slug, "specialties": ["comfort"], "price": price,
               "team": "mallory-inc", "judge": {"kind": "rubric"}})
    };
    // Three cards at the 100 USDC maximum, one cheap one; the fifth listing passes the limit.
    for (slug, price) in [
        ("dear-1", 100_000_000),
        ("dear-2", 100_000_000),
        ("dear-3", 100_000_000),
        ("cheap", 900),
    ] {
        let (status, body) = app
            .call(
                Caller::Session(&mallory),
                Method::POST,
                "/api/marketplace/cards",
                Some(rubric(slug, price)),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{slug}: {body}");
    }
    let (status, body) = app
        .call(
            Caller::Session(&mallory),
            Method::POST,
            "/api/marketplace/cards",
            Some(rubric("dear-4", 100_000_000)),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");

    let db = lachesis::db::connect(&url, 4).await.unwrap();
    let ledger = Ledger::new(db.clone());
    let budget = funded_budget(&ledger, "budget/farm/agent", 500_000_000).await;
    let judges = Judges::new(None);
    let mut paid_team = Vec::new();
    for i in 0..6 {
        paid_team.extend(
            round(&ledger, &judges, budget, &format!("farm/{i}"))
                .await
                .into_iter()
                .filter(|s| s.starts_with("dear") || s == "cheap"),
        );
    }
    assert!(
        !paid_team.iter().any(|s| s.starts_with("dear")),
        "{paid_team:?}"
    );
    assert!(
        paid_team.contains(&"cheap".to_string()),
        "a cheap new card is tried"
    );
    let spent = 500_000_000 - ledger.balance(budget).await.unwrap().available.0;
    assert!(spent < 1_000_000, "six rounds cost {spent} micro-USDC");

    // The platform's showcase never pays a team's card, however good.
    let showcase = Judges::new(None).platform_cards_only();
    let showcase_budget = funded_budget(&ledger, "budget/showcase/agent", 10_000_000).await;
    for i in 0..3 {
        let paid = round(
            &ledger,
            &showcase,
            showcase_budget,
            &format!("showcase/{i}"),
        )
        .await;
        assert!(!paid.is_empty());
        assert!(!paid.contains(&"cheap".to_string()), "{paid:?}");
    }
}

#[tokio::test]
async fn a_ledger_that_lost_its_owner_lock_pays_nothing_on_chain_until_it_holds_it_again() {
    let url = fresh_database().await;
    let db = lachesis::db::connect(&url, 4).await.unwrap();
    lachesis::db::migrate(&db).await.unwrap();
    let ledger = Ledger::with_owner(db.clone()).await.unwrap();
    let key = ledger.owner_key().unwrap();
    let payer = funded_budget(&ledger, "budget/lock/agent", 1_000_000).await;
    let payee = ledger
        .account("card/lock-judge", AccountKind::CardOwner, None, None)
        .await
        .unwrap();
    let holder = "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
                  AND ((classid::bigint << 32) | objid::bigint) = $1";
    let first: i32 = sqlx::query_scalar(holder)
        .bind(key)
        .fetch_one(&db)
        .await
        .unwrap();

    // Postgres drops the lock's connection (a restart, an idle cut); a rival takes the key, as
    // another instance's recovery does for a moment to prove an owner gone.
    let killed: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(first)
        .fetch_one(&db)
        .await
        .unwrap();
    assert!(killed);
    let mut rival = db.acquire().await.unwrap().detach();
    let mut taken = false;
    for _ in 0..50 {
        taken = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
            .bind(key)
            .fetch_one(&mut rival)
            .await
            .unwrap();
        if taken {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(taken, "the key is free once its connection is gone");
    assert!(
        !ledger.check_owner().await,
        "the ledger knows it lost the lock"
    );
    let transfer = |key: &'static str| lachesis::ledger::Transfer {
        key,
        payer,
        payee,
        amount: MicroUsdc(1_000),
        memo: "judge card",
    };
    let refused = ledger.hold(&transfer("lock/1"), true).await;
    assert!(
        matches!(refused, Err(lachesis::ledger::LedgerError::OwnerLost)),
        "{refused:?}"
    );
    let holds: i64 = sqlx::query_scalar("SELECT count(*) FROM ledger_holds")
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(holds, 0, "nothing was held for a chain payment");

    // Once the key is free again the ledger takes it back on a new connection and pays.
    let _: bool = sqlx::query_scalar("SELECT pg_advisory_unlock($1)")
        .bind(key)
        .fetch_one(&mut rival)
        .await
        .unwrap();
    assert!(ledger.check_owner().await);
    let second: i32 = sqlx::query_scalar(holder)
        .bind(key)
        .fetch_one(&db)
        .await
        .unwrap();
    assert_ne!(first, second);
    let hold = ledger.hold(&transfer("lock/2"), true).await.unwrap();
    assert!(ledger.release(hold.id, "test over").await.unwrap());
}
