//! The USDC ledger against a real Postgres: concurrent payers never overspend, retries charge once,
//! holds are captured, released and refunded under their rules, Postgres itself refuses whatever
//! would break an invariant, a crash between hold and capture is resolved when the server restarts,
//! and `lachesis ledger reconcile` says whether all of it holds.

use std::time::Duration;

use lachesis::ledger::{AccountId, HoldState, Ledger, LedgerError, Settlement, Transfer};
use lachesis_shared::ledger::{AccountKind, MicroUsdc};
use lachesis_tests::{ServerProcess, fresh_database, lachesis_bin};
use sqlx::PgPool;

async fn ledger() -> (Ledger, PgPool, String) {
    let url = fresh_database().await;
    let db = lachesis::db::connect(&url, 40).await.expect("connect");
    lachesis::db::migrate(&db).await.expect("migrate");
    (Ledger::new(db.clone()), db, url)
}

async fn funded_budget(ledger: &Ledger, name: &str, micros: i64) -> AccountId {
    let budget = ledger
        .account(name, AccountKind::Budget, None, None)
        .await
        .expect("budget");
    ledger
        .fund(&format!("fund/{name}"), budget, MicroUsdc(micros))
        .await
        .expect("fund");
    budget
}

async fn card(ledger: &Ledger, name: &str) -> AccountId {
    ledger
        .account(name, AccountKind::CardOwner, None, None)
        .await
        .expect("card account")
}

async fn available(ledger: &Ledger, account: AccountId) -> i64 {
    ledger.balance(account).await.expect("balance").available.0
}

fn transfer<'a>(key: &'a str, payer: AccountId, payee: AccountId, micros: i64) -> Transfer<'a> {
    Transfer {
        key,
        payer,
        payee,
        amount: MicroUsdc(micros),
        memo: "test",
    }
}

/// `lachesis ledger reconcile` on the database: (exit success, stdout).
fn reconcile_cli(url: &str) -> (bool, String) {
    let out = std::process::Command::new(lachesis_bin())
        .args(["ledger", "reconcile"])
        .env("DATABASE_URL", url)
        .output()
        .expect("run lachesis ledger reconcile");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_concurrent_episodes_never_overspend_one_budget() {
    let (ledger, db, url) = ledger().await;
    let budget = funded_budget(&ledger, "budget/run-1/agent", 1_000_000).await;
    let cards = [
        card(&ledger, "card/math").await,
        card(&ledger, "card/code").await,
    ];
    // 200 episodes each try to pay three judges 0.003 USDC: 1.8 USDC wanted from 1 USDC.
    let mut episodes = Vec::new();
    for episode in 0..200 {
        let ledger = ledger.clone();
        episodes.push(tokio::spawn(async move {
            let mut paid = 0;
            for judge in 0..3 {
                let key = format!("episode-{episode}/judge-{judge}");
                let payee = cards[(episode + judge) % 2];
                match ledger
                    .pay(
                        &transfer(&key, budget, payee, 3_000),
                        &Settlement::Simulated,
                    )
                    .await
                {
                    Ok(posted) => {
                        assert!(!posted.replayed);
                        paid += 1;
                    }
                    Err(LedgerError::InsufficientFunds { amount }) => assert_eq!(amount.0, 3_000),
                    Err(other) => panic!("unexpected ledger error: {other}"),
                }
            }
            paid
        }));
    }
    let mut paid = 0;
    for episode in episodes {
        paid += episode.await.expect("episode");
    }
    // Every payment that fit was made, none that did not: floor(1,000,000 / 3,000) = 333.
    assert_eq!(paid, 333);
    assert_eq!(available(&ledger, budget).await, 1_000_000 - 333 * 3_000);
    let earned = available(&ledger, cards[0]).await + available(&ledger, cards[1]).await;
    assert_eq!(earned, 333 * 3_000);
    let payments: i64 =
        sqlx::query_scalar("SELECT count(*) FROM ledger_transactions WHERE kind = 'payment'")
            .fetch_one(&db)
            .await
            .unwrap();
    assert_eq!(payments, 333);

    let report = lachesis::ledger::reconcile::reconcile(&db).await.unwrap();
    assert!(report.is_balanced(), "{report}");
    let (ok, stdout) = reconcile_cli(&url);
    assert!(ok, "reconcile failed:\n{stdout}");
    assert!(stdout.contains("ledger balanced"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_retried_payment_charges_once() {
    let (ledger, db, _url) = ledger().await;
    let budget = funded_budget(&ledger, "budget/run-2/agent", 100_000).await;
    let judge = card(&ledger, "card/judge").await;
    // Twenty retries of one payment race each other.
    let mut retries = Vec::new();
    for _ in 0..20 {
        let ledger = ledger.clone();
        retries.push(tokio::spawn(async move {
            ledger
                .pay(
                    &transfer("pay-once", budget, judge, 7_000),
                    &Settlement::Simulated,
                )
                .await
                .expect("a retry succeeds")
        }));
    }
    let mut posted = Vec::new();
    for retry in retries {
        posted.push(retry.await.unwrap());
    }
    assert_eq!(posted.iter().filter(|p| !p.replayed).count(), 1);
    assert!(posted.iter().all(|p| p.tx_id == posted[0].tx_id));
    assert_eq!(available(&ledger, budget).await, 93_000);
    assert_eq!(available(&ledger, judge).await, 7_000);

    // The key reused for another amount or payee is refused, and nothing moves.
    for conflicting in [
        transfer("pay-once", budget, judge, 8_000),
        transfer("pay-once", judge, budget, 7_000),
    ] {
        match ledger.pay(&conflicting, &Settlement::Simulated).await {
            Err(LedgerError::IdempotencyConflict(key)) => assert_eq!(key, "pay-once"),
            other => panic!("expected an idempotency conflict, got {other:?}"),
        }
    }
    assert_eq!(available(&ledger, budget).await, 93_000);
    let entries: i64 = sqlx::query_scalar("SELECT count(*) FROM ledger_entries")
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(entries, 4, "one deposit and one payment, two legs each");
}

#[tokio::test]
async fn holds_are_captured_or_released_and_payments_refunded_once() {
    let (ledger, db, _url) = ledger().await;
    let budget = funded_budget(&ledger, "budget/run-3/agent", 50_000).await;
    let judge = card(&ledger, "card/judge").await;

    // A hold beyond what is available is refused and reserves nothing.
    match ledger
        .hold(&transfer("too-much", budget, judge, 50_001), false)
        .await
    {
        Err(LedgerError::InsufficientFunds { amount }) => assert_eq!(amount.0, 50_001),
        other => panic!("expected insufficient funds, got {other:?}"),
    }
    assert_eq!(available(&ledger, budget).await, 50_000);

    let first = ledger
        .hold(&transfer("h1", budget, judge, 20_000), false)
        .await
        .unwrap();
    assert_eq!(first.state, HoldState::Held);
    let balance = ledger.balance(budget).await.unwrap();
    assert_eq!(
        (balance.balance.0, balance.held.0, balance.available.0),
        (50_000, 20_000, 30_000)
    );
    // The held money cannot be spent twice: a payment of more than what is left fails.
    assert!(matches!(
        ledger
            .pay(
                &transfer("p1", budget, judge, 30_001),
                &Settlement::Simulated
            )
            .await,
        Err(LedgerError::InsufficientFunds { .. })
    ));
    let retried = ledger
        .hold(&transfer("h1", budget, judge, 20_000), false)
        .await
        .unwrap();
    assert_eq!((retried.id, retried.replayed), (first.id, true));

    let payment = ledger.capture(first.id, None).await.unwrap();
    assert_eq!(
        ledger.capture(first.id, None).await.unwrap(),
        payment,
        "capture is idempotent"
    );
    let balance = ledger.balance(budget).await.unwrap();
    assert_eq!((balance.balance.0, balance.held.0), (30_000, 0));
    assert_eq!(available(&ledger, judge).await, 20_000);
    assert!(matches!(
        ledger.release(first.id, "late").await,
        Err(LedgerError::HoldResolved(id)) if id == first.id
    ));

    let second = ledger
        .hold(&transfer("h2", budget, judge, 10_000), false)
        .await
        .unwrap();
    assert!(
        ledger
            .release(second.id, "judge unavailable")
            .await
            .unwrap()
    );
    assert!(
        !ledger.release(second.id, "again").await.unwrap(),
        "a second release is a no-op"
    );
    assert!(matches!(
        ledger.capture(second.id, None).await,
        Err(LedgerError::HoldResolved(_))
    ));
    assert_eq!(available(&ledger, budget).await, 30_000);
    assert!(matches!(
        ledger.capture(999_999, None).await,
        Err(LedgerError::UnknownHold(999_999))
    ));

    // A refund reverses the captured payment, once.
    let refund = ledger.refund("refund-h1", payment).await.unwrap();
    assert!(!refund.replayed);
    assert_eq!(available(&ledger, budget).await, 50_000);
    assert_eq!(available(&ledger, judge).await, 0);
    let retried = ledger.refund("refund-h1", payment).await.unwrap();
    assert_eq!((retried.tx_id, retried.replayed), (refund.tx_id, true));
    assert!(matches!(
        ledger.refund("refund-again", payment).await,
        Err(LedgerError::NotRefundable(_, "already refunded"))
    ));
    assert!(matches!(
        ledger.refund("refund-a-refund", refund.tx_id).await,
        Err(LedgerError::NotRefundable(..))
    ));

    // Malformed payments are typed errors.
    assert!(matches!(
        ledger
            .pay(&transfer("zero", budget, judge, 0), &Settlement::Simulated)
            .await,
        Err(LedgerError::InvalidAmount(0))
    ));
    assert!(matches!(
        ledger
            .pay(&transfer("self", budget, budget, 5), &Settlement::Simulated)
            .await,
        Err(LedgerError::SameAccount)
    ));
    assert!(matches!(
        ledger
            .pay(
                &transfer("nobody", budget, AccountId(424_242), 5),
                &Settlement::Simulated
            )
            .await,
        Err(LedgerError::UnknownAccount(_))
    ));
    assert!(matches!(
        ledger
            .account("Bad Name", AccountKind::Budget, None, None)
            .await,
        Err(LedgerError::InvalidAccount(_))
    ));
    assert!(matches!(
        ledger
            .account("card/judge", AccountKind::Budget, None, None)
            .await,
        Err(LedgerError::InvalidAccount(_))
    ));
    let report = lachesis::ledger::reconcile::reconcile(&db).await.unwrap();
    assert!(report.is_balanced(), "{report}");
}

/// The database error's constraint name, for statements that must fail.
fn refused_by(result: Result<sqlx::postgres::PgQueryResult, sqlx::Error>) -> String {
    match result {
        Err(sqlx::Error::Database(db)) => db.constraint().unwrap_or(db.message()).to_string(),
        other => panic!("Postgres accepted a statement that breaks an invariant: {other:?}"),
    }
}

#[tokio::test]
async fn postgres_refuses_what_would_break_an_invariant_and_reconcile_sees_corruption() {
    let (ledger, db, url) = ledger().await;
    let budget = funded_budget(&ledger, "budget/run-4/agent", 10_000).await;
    let judge = card(&ledger, "card/judge").await;
    ledger
        .pay(&transfer("p", budget, judge, 4_000), &Settlement::Simulated)
        .await
        .unwrap();

    let set_balance = sqlx::query("UPDATE ledger_accounts SET balance = 1000000 WHERE id = $1")
        .bind(budget.0)
        .execute(&db)
        .await;
    assert_eq!(refused_by(set_balance), "ledger_accounts_derived");
    let edit_entry = sqlx::query("UPDATE ledger_entries SET amount = amount * 2")
        .execute(&db)
        .await;
    assert!(refused_by(edit_entry).contains("append-only"));
    let delete_tx = sqlx::query("DELETE FROM ledger_transactions")
        .execute(&db)
        .await;
    assert!(refused_by(delete_tx).contains("append-only"));

    // An unbalanced transaction is refused at commit, whatever its statements did before.
    let mut tx = db.begin().await.unwrap();
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO ledger_transactions (idempotency_key, kind) VALUES ('forged', 'payment') RETURNING id",
    )
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    sqlx::query("INSERT INTO ledger_entries (tx_id, account_id, amount) VALUES ($1, $2, 500)")
        .bind(id)
        .bind(judge.0)
        .execute(&mut *tx)
        .await
        .unwrap();
    match tx.commit().await {
        Err(sqlx::Error::Database(db)) => {
            assert_eq!(db.constraint(), Some("ledger_transaction_balanced"))
        }
        other => panic!("an unbalanced transaction committed: {other:?}"),
    }
    // A spend past the balance, written as raw entries, is refused by the account's CHECK.
    let mut tx = db.begin().await.unwrap();
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO ledger_transactions (idempotency_key, kind) VALUES ('raw', 'payment') RETURNING id",
    )
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    let overspend = sqlx::query(
        "INSERT INTO ledger_entries (tx_id, account_id, amount) VALUES ($1, $2, -6001), ($1, $3, 6001)",
    )
    .bind(id)
    .bind(budget.0)
    .bind(judge.0)
    .execute(&mut *tx)
    .await;
    assert_eq!(
        refused_by(overspend),
        "ledger_accounts_available_nonnegative"
    );
    drop(tx);
    assert_eq!(available(&ledger, budget).await, 6_000);
    let (ok, stdout) = reconcile_cli(&url);
    assert!(ok && stdout.contains("ledger balanced"), "{stdout}");

    // Corruption behind the triggers' backs (a superuser with triggers off) is found.
    let mut conn = db.acquire().await.unwrap();
    sqlx::query("SET session_replication_role = replica")
        .execute(&mut *conn)
        .await
        .unwrap();
    sqlx::query("UPDATE ledger_accounts SET balance = balance + 1 WHERE id = $1")
        .bind(budget.0)
        .execute(&mut *conn)
        .await
        .unwrap();
    sqlx::query("SET session_replication_role = origin")
        .execute(&mut *conn)
        .await
        .unwrap();
    drop(conn);
    let report = lachesis::ledger::reconcile::reconcile(&db).await.unwrap();
    assert!(!report.is_balanced());
    assert_eq!(report.findings.len(), 1, "{report}");
    assert_eq!(report.findings[0].check, "balances_match_entries");
    let (ok, stdout) = reconcile_cli(&url);
    assert!(!ok, "reconcile must fail on a corrupt ledger:\n{stdout}");
    assert!(
        stdout.contains("FAILED  balances_match_entries"),
        "{stdout}"
    );
}

/// Advisory locks held in this test's database (each live ledger owner holds one).
async fn owner_locks(db: &PgPool) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
         AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    .fetch_one(db)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_crash_between_hold_and_capture_is_resolved_when_the_server_restarts() {
    let (plain, db, url) = ledger().await;
    let budget = funded_budget(&plain, "budget/run-5/agent", 30_000).await;
    let judge = card(&plain, "card/judge").await;

    // A process holds money for a payment and is still settling it.
    let settling = Ledger::with_owner(db.clone()).await.unwrap();
    let hold = settling
        .hold(&transfer("in-flight", budget, judge, 12_000), false)
        .await
        .unwrap();
    assert_eq!(owner_locks(&db).await, 1);

    // A server starting meanwhile leaves a live process's hold alone.
    let server = ServerProcess::start(&url).await.expect("server starts");
    let state: String = sqlx::query_scalar("SELECT state FROM ledger_holds WHERE id = $1")
        .bind(hold.id)
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(state, "held");
    assert_eq!(available(&plain, budget).await, 18_000);
    server.kill9().await;

    // The settling process dies between hold and capture: its session, and its lock, end.
    drop(settling);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while owner_locks(&db).await > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the dead owner's lock lingers"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let server = ServerProcess::start(&url).await.expect("server restarts");
    let (state, reason): (String, Option<String>) =
        sqlx::query_as("SELECT state, release_reason FROM ledger_holds WHERE id = $1")
            .bind(hold.id)
            .fetch_one(&db)
            .await
            .unwrap();
    assert_eq!(state, "released");
    assert_eq!(reason.as_deref(), Some("recovered after a restart"));
    assert_eq!(
        available(&plain, budget).await,
        30_000,
        "nothing was charged"
    );
    assert_eq!(available(&plain, judge).await, 0);
    server.kill9().await;
    let (ok, stdout) = reconcile_cli(&url);
    assert!(ok, "{stdout}");
}
