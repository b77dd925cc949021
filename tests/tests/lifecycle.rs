//! Several instances, restarts and outages: instances racing at start, Postgres going away and
//! coming back, the health endpoints, SIGTERM with a deadline, and the schema the migrations make
//! against what the compile-time checked queries were built for.

use std::time::Duration;

use lachesis::app::lifecycle::Lifecycle;
use lachesis::ledger::Ledger;
use lachesis_shared::health::{Readiness, ReadinessCheck};
use lachesis_shared::ledger::{AccountKind, MicroUsdc};
use lachesis_tests::private_postgres::PrivatePostgres;
use lachesis_tests::{
    ServerProcess, TestApp, client, config_for, env_registration, fresh_database, group, markers,
    registration,
};
use reqwest::StatusCode;
use serde_json::Value;
use sqlx::{Connection, PgConnection};

/// Instances started at once (migrations, seeded cards, ledger owners and recovery all racing)
/// all come up and serve: on a fresh database, then on that same database again beside them.
#[tokio::test(flavor = "multi_thread")]
async fn instances_started_together_all_come_up() {
    for round in 0..3 {
        let url = fresh_database().await;
        let mut running = Vec::new();
        for wave in ["fresh", "existing"] {
            let starts = (0..4).map(|_| ServerProcess::start_with(&url, &["--no-embedded-model"]));
            for (i, server) in futures::future::join_all(starts)
                .await
                .into_iter()
                .enumerate()
            {
                let server = server
                    .unwrap_or_else(|e| panic!("round {round}, {wave} database, #{i}: {e:#}"));
                let (status, readiness) = ready(&server.base).await;
                assert_eq!(status, StatusCode::OK, "round {round}, {wave}, #{i}");
                assert!(readiness.ready && readiness.failed.is_empty());
                running.push(server);
            }
        }
        // Every instance's card seeding and accounts met: one of each, not one per instance.
        let mut db = PgConnection::connect(&url).await.unwrap();
        let (cards, accounts): (i64, i64) = sqlx::query_as(
            "SELECT (SELECT count(*) FROM agent_cards),
                    (SELECT count(*) FROM ledger_accounts WHERE name LIKE 'card/%')",
        )
        .fetch_one(&mut db)
        .await
        .unwrap();
        assert!(
            cards > 0 && cards == accounts,
            "round {round}: {cards} cards, {accounts} accounts"
        );
    }
}

/// The ledger's get-or-create, raced: every caller gets the one account, none an error.
#[tokio::test(flavor = "multi_thread")]
async fn racing_callers_of_one_new_account_all_get_it() {
    let url = fresh_database().await;
    let db = lachesis::db::connect(&url, 16).await.unwrap();
    lachesis::db::migrate(&db).await.unwrap();
    let ledger = Ledger::new(db);
    for round in 0..20 {
        let name = format!("card/race-{round}");
        let racers = (0..16).map(|_| ledger.account(&name, AccountKind::CardOwner, None, None));
        let ids: Vec<_> = futures::future::join_all(racers)
            .await
            .into_iter()
            .map(|id| id.unwrap_or_else(|e| panic!("round {round}: {e}")))
            .collect();
        assert!(ids.iter().all(|id| *id == ids[0]), "round {round}: {ids:?}");
    }
}

#[tokio::test]
async fn health_endpoints_need_no_credentials_and_say_what_failed() {
    // Accounts on: every API route wants a credential, the health endpoints none.
    let url = fresh_database().await;
    let mut config = config_for(&url);
    config.auth = true;
    config.api_token = Some("admin-token".into());
    let app = TestApp::spawn_with(config).await;
    let (status, _) = app
        .call(
            lachesis_tests::Caller::Nobody,
            reqwest::Method::GET,
            "/status",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let live = app
        .client
        .get(app.url("/health/live"))
        .send()
        .await
        .unwrap();
    assert_eq!(live.status(), StatusCode::OK);
    assert_eq!(live.headers()["cache-control"], "no-store");
    assert_eq!(
        live.json::<Value>().await.unwrap(),
        serde_json::json!({"live": true})
    );
    let (status, readiness) = ready(&app.base).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        readiness,
        Readiness {
            ready: true,
            failed: Vec::new()
        }
    );

    // Accounts off: the loopback guard still stands before them.
    let local = TestApp::spawn().await;
    let (status, _) = ready(&local.base).await;
    assert_eq!(status, StatusCode::OK);
    let foreign = local
        .client
        .get(local.url("/health/ready"))
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), StatusCode::FORBIDDEN);
}

/// While Postgres is down requests are answered 503 with Retry-After (after the short acquire
/// timeout, not the 30 s of old); once it is back, ingest resumes by itself and every group that
/// was acknowledged, before or after, is served.
#[tokio::test(flavor = "multi_thread")]
async fn requests_fail_fast_while_postgres_is_away_and_ingest_resumes() {
    let pg = PrivatePostgres::start().await;
    let mut config = config_for(&pg.url());
    config.lifecycle = Lifecycle {
        db_acquire_timeout: Duration::from_millis(300),
        ready_timeout: Duration::from_millis(300),
        ..Lifecycle::default()
    };
    let app = TestApp::spawn_with(config).await;
    app.post("/register", &registration(24)).await;
    app.get("/batch").await;
    app.post("/register-env", &env_registration("outage", 4))
        .await;
    for marker in 1..=3 {
        app.post("/scored_data", &group(marker, 4, Some(0))).await;
    }

    pg.stop().await;
    let refused = app
        .client
        .post(app.url("/scored_data"))
        .json(&group(99, 4, Some(0)))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(refused.headers().contains_key("retry-after"));
    let api = app
        .client
        .get(app.url("/api/marketplace/cards"))
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(api.headers().contains_key("retry-after"));
    let (status, readiness) = ready(&app.base).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{readiness:?}");
    assert!(readiness.failed.contains(&ReadinessCheck::Database));
    let live = app
        .client
        .get(app.url("/health/live"))
        .send()
        .await
        .unwrap();
    assert_eq!(live.status(), StatusCode::OK);

    pg.start_again().await;
    // Ready again once the pool reconnects and the ledger owner lock is taken again.
    wait_for_ready(&app.base, StatusCode::OK).await;
    for marker in 4..=6 {
        app.post("/scored_data", &group(marker, 4, Some(0))).await;
    }
    let mut served = markers(&app.get("/batch").await);
    served.sort_unstable();
    assert_eq!(
        served,
        vec![1, 2, 3, 4, 5, 6],
        "acknowledged groups, and only those"
    );
}

/// SIGTERM with a request in flight: readiness turns 503 at once and new work is refused, the
/// request in flight is finished and acknowledged, and the process exits cleanly.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_finishes_requests_in_flight_and_exits_cleanly() {
    let url = fresh_database().await;
    let server = ServerProcess::start_with(
        &url,
        &["--no-embedded-model", "--shutdown-timeout-s", "120"],
    )
    .await
    .unwrap();
    register(&server.base).await;
    let blocker = hold_ingest(&url).await;
    let in_flight = post_group(&server.base, 1);
    wait_until_blocked(&url).await;

    server.sigterm();
    let readiness = wait_for_ready(&server.base, StatusCode::SERVICE_UNAVAILABLE).await;
    assert!(readiness.failed.contains(&ReadinessCheck::ShuttingDown));
    let refused = client()
        .get(format!("{}/status", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(refused.headers().contains_key("retry-after"));

    blocker.release().await;
    let (status, body) = in_flight.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "received");
    let exit = wait_for_exit(server).await;
    assert!(exit.success(), "{exit}");
    assert_eq!(
        groups_stored(&url).await,
        1,
        "the acknowledged group is stored"
    );
}

/// SIGTERM with a request stuck past the deadline: the request is handed back (503), this
/// instance's open holds are released, another live owner's are not, and the process exits cleanly.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_exits_by_its_deadline_when_a_request_is_stuck() {
    let url = fresh_database().await;
    let server =
        ServerProcess::start_with(&url, &["--no-embedded-model", "--shutdown-timeout-s", "2"])
            .await
            .unwrap();
    register(&server.base).await;
    let holds = OpenHolds::make(&url).await;
    let blocker = hold_ingest(&url).await;
    let in_flight = post_group(&server.base, 1);
    wait_until_blocked(&url).await;

    server.sigterm();
    let exit = wait_for_exit(server).await;
    assert!(exit.success(), "{exit}");
    let (status, body) = in_flight.await.unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    blocker.release().await;
    assert_eq!(holds.states().await, ("released".into(), "held".into()));
}

// ---- helpers ----

async fn ready(base: &str) -> (StatusCode, Readiness) {
    let response = client()
        .get(format!("{base}/health/ready"))
        .send()
        .await
        .expect("the server answers");
    let status = response.status();
    (status, response.json().await.expect("a readiness body"))
}

/// Polls readiness until it answers `want` (a hang guard bounds it, not a timing claim).
async fn wait_for_ready(base: &str, want: StatusCode) -> Readiness {
    for _ in 0..600 {
        if let Ok(response) = client().get(format!("{base}/health/ready")).send().await
            && response.status() == want
        {
            return response.json().await.expect("a readiness body");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("/health/ready never answered {want}");
}

async fn wait_for_exit(mut server: ServerProcess) -> std::process::ExitStatus {
    tokio::time::timeout(Duration::from_secs(120), server.child.wait())
        .await
        .expect("the server exits after SIGTERM")
        .expect("wait for the server")
}

async fn register(base: &str) {
    let http = client();
    for (path, body) in [
        ("/register", registration(8)),
        ("/register-env", env_registration("drain", 4)),
    ] {
        http.post(format!("{base}{path}"))
            .json(&body)
            .send()
            .await
            .unwrap()
            .error_for_status()
            .unwrap();
        if path == "/register" {
            http.get(format!("{base}/batch")).send().await.unwrap();
        }
    }
}

fn post_group(base: &str, marker: i64) -> tokio::task::JoinHandle<(StatusCode, Value)> {
    let url = format!("{base}/scored_data");
    tokio::spawn(async move {
        let response = client()
            .post(url)
            .json(&group(marker, 4, Some(0)))
            .send()
            .await
            .expect("an answer, even while shutting down");
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    })
}

/// A transaction that keeps every group insert waiting: a request made slow on purpose.
struct IngestBlocker(PgConnection);

async fn hold_ingest(url: &str) -> IngestBlocker {
    let mut connection = PgConnection::connect(url).await.unwrap();
    sqlx::raw_sql("BEGIN; LOCK TABLE groups IN EXCLUSIVE MODE")
        .execute(&mut connection)
        .await
        .unwrap();
    IngestBlocker(connection)
}

impl IngestBlocker {
    async fn release(mut self) {
        sqlx::raw_sql("ROLLBACK")
            .execute(&mut self.0)
            .await
            .unwrap();
    }
}

/// Waits until a server backend waits on the blocker's lock: the request is truly in flight.
async fn wait_until_blocked(url: &str) {
    let mut db = PgConnection::connect(url).await.unwrap();
    for _ in 0..600 {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(&mut db)
        .await
        .unwrap();
        if waiting > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the request never reached the database");
}

async fn groups_stored(url: &str) -> i64 {
    let mut db = PgConnection::connect(url).await.unwrap();
    sqlx::query_scalar("SELECT count(*) FROM groups")
        .fetch_one(&mut db)
        .await
        .unwrap()
}

/// Two open holds: one of the server's (its owner key read from its advisory lock), one of a
/// live owner elsewhere (this test's connection holding its own key).
struct OpenHolds {
    db: sqlx::PgPool,
    _elsewhere: PgConnection,
}

impl OpenHolds {
    const ELSEWHERE_KEY: i64 = 0x00de_ad00_beef;

    async fn make(url: &str) -> Self {
        let db = lachesis::db::connect(url, 4).await.unwrap();
        let server_key: i64 = sqlx::query_scalar(
            "SELECT (classid::bigint << 32) | objid::bigint FROM pg_locks l
             JOIN pg_database d ON d.oid = l.database
             WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
               AND d.datname = current_database()",
        )
        .fetch_one(&db)
        .await
        .expect("the server holds its ledger owner lock");
        let mut elsewhere = PgConnection::connect(url).await.unwrap();
        sqlx::query("SELECT pg_advisory_lock($1)")
            .bind(Self::ELSEWHERE_KEY)
            .execute(&mut elsewhere)
            .await
            .unwrap();
        let ledger = Ledger::new(db.clone());
        let payer = ledger
            .account("budget/drill", AccountKind::Budget, None, None)
            .await
            .unwrap();
        let payee = ledger
            .account("card/drill", AccountKind::CardOwner, None, None)
            .await
            .unwrap();
        ledger
            .fund("drill-fund", payer, MicroUsdc(1_000_000))
            .await
            .unwrap();
        for (key, owner) in [("mine", server_key), ("elsewhere", Self::ELSEWHERE_KEY)] {
            sqlx::query("SELECT * FROM ledger_hold($1, $2, $3, 1000, 'drill', 'simulated', $4)")
                .bind(key)
                .bind(payer.0)
                .bind(payee.0)
                .bind(owner)
                .execute(&db)
                .await
                .unwrap();
        }
        Self {
            db,
            _elsewhere: elsewhere,
        }
    }

    /// The states of the server's hold and of the other owner's.
    async fn states(&self) -> (String, String) {
        let state = |key: &'static str| {
            sqlx::query_scalar::<_, String>(
                "SELECT state FROM ledger_holds WHERE idempotency_key = $1",
            )
            .bind(key)
            .fetch_one(&self.db)
        };
        (
            state("mine").await.unwrap(),
            state("elsewhere").await.unwrap(),
        )
    }
}

/// `backend/.sqlx` is what the compile-time checked queries were built against: each stored query
/// is described again by a database the migrations made, and must still read the same columns,
/// types and nullability and take the same parameters. A migration that changes any of them
/// without `make sqlx-prepare` fails here, not in production.
#[tokio::test]
async fn checked_queries_match_the_schema_the_migrations_make() {
    let database_url = fresh_database().await;
    let db = lachesis::db::connect(&database_url, 2).await.unwrap();
    lachesis::db::migrate(&db).await.unwrap();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../backend/.sqlx");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).expect("backend/.sqlx is committed") {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !(name.starts_with("query-") && name.ends_with(".json")) {
            continue;
        }
        let stored: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let sql = stored["query"].as_str().expect("a query text");
        let described = sqlx::Executor::describe(&db, sql)
            .await
            .unwrap_or_else(|e| panic!("{name} no longer prepares: {e}\n{sql}"));
        assert_eq!(
            serde_json::to_value(&described).unwrap(),
            stored["describe"],
            "{name}: the schema changed under this query; run `make sqlx-prepare`\n{sql}"
        );
        checked += 1;
    }
    assert!(checked > 0, "no checked queries found in {}", dir.display());
}
