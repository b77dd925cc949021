//! Fault drills against a hosted-style deployment: three `lachesis serve` processes on one private
//! Postgres behind a round-robin proxy, under a workload of ingest, batch pulls, ledger payments
//! and WebSocket watchers. Each drill injects one fault under load, then checks that every
//! acknowledged group was served exactly once, that no payment doubled and the ledger reconciles,
//! and that every watcher saw every event or was told it lagged. Run with `--nocapture` for the
//! figures; `make drills` runs the long version (`LACHESIS_DRILL_SECONDS`).
//!
//! The drills run one at a time (they share two cores), each on a cluster of its own.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lachesis_tests::drills::postgres::{PrivatePostgres, count_listeners, terminate_listeners};
use lachesis_tests::drills::{Drill, Plan, Report, Stage, secs};

/// Drills measure recovery: running two at once would measure each other.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const INSTANCES: usize = 3;
/// How long a SIGTERMed instance may take to exit before the drill calls its shutdown hung.
const SHUTDOWN_BOUND: Duration = Duration::from_secs(30);
/// How long the instances may take to be ready again once Postgres is back.
const READY_AGAIN_BOUND: Duration = Duration::from_secs(60);

fn cluster() -> Arc<PrivatePostgres> {
    Arc::new(PrivatePostgres::start().expect("start the drills' own Postgres"))
}

/// A cluster and three instances started one after another (start-up races are drill a's
/// subject, not the others').
async fn staged() -> Stage {
    let mut stage = Stage::new(cluster(), "drill").await.expect("a stage");
    let errors = stage.start_instances(INSTANCES, false).await;
    assert!(
        errors.is_empty(),
        "instances did not come up:\n{}",
        errors.join("\n")
    );
    stage
}

async fn run(drill: Drill) {
    drill.finish().await.expect("the checks ran").assert_held();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_instances_start_together_on_a_fresh_database() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let plan = Plan::from_env();
    let mut report = Report::new("a: three instances started at once on a fresh database");
    let postgres = cluster();
    // Several fresh databases: a start-up race shows only now and then.
    let rounds = 2 * plan.rounds + 1;
    let mut last = None;
    for round in 0..rounds {
        let mut stage = Stage::new(postgres.clone(), &format!("fresh_{round}"))
            .await
            .expect("a stage");
        let began = Instant::now();
        let errors = stage.start_instances(INSTANCES, true).await;
        report.lines.push(format!(
            "injected: {INSTANCES} instances started at the same moment on fresh database #{round}: \
             {}/{INSTANCES} ready after {}",
            stage.instances.len(),
            secs(began.elapsed())
        ));
        for error in errors {
            report.violations.push(format!(
                "fresh database #{round}: an instance did not come up: {error}"
            ));
        }
        last = Some(stage);
    }
    // The last fleet carries the workload: instances that raced at start-up must serve correctly.
    let stage = last.expect("at least one round");
    if stage.instances.is_empty() {
        report.assert_held();
        return;
    }
    let drill = Drill::begin(report, stage, plan)
        .await
        .expect("the workload");
    for _ in 0..plan.rounds {
        drill.load().await;
    }
    run(drill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b_sigkill_one_instance_under_load() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let plan = Plan::from_env();
    let report = Report::new("b: SIGKILL one instance under load, then start a replacement");
    let mut drill = Drill::begin(report, staged().await, plan)
        .await
        .expect("the workload");
    for _ in 0..plan.rounds {
        // A crash gives the proxy no notice: it keeps offering the dead address (and skips it
        // when refused) until the replacement is put in its place.
        let victim = drill.stage.remove_instance(0);
        let name = victim.name.clone();
        let killed = Instant::now();
        victim.kill9().await;
        drill.fault(&format!("SIGKILL {name}"), killed, killed);
        // The survivors carry the load alone for a phase.
        drill.load().await;
        match drill.stage.add_instance().await {
            Ok((new, took)) => drill.note(format!(
                "injected: SIGKILL {name} under load; replacement {new} ready {} after its start",
                secs(took)
            )),
            Err(e) => drill.violation(format!("the replacement for {name} did not come up: {e:#}")),
        }
        drill.load().await;
    }
    run(drill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c_postgres_restart_under_load() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let plan = Plan::from_env();
    let report = Report::new("c: restart Postgres under load");
    let mut drill = Drill::begin(report, staged().await, plan)
        .await
        .expect("the workload");
    for _ in 0..plan.rounds {
        let postgres = drill.stage.postgres.clone();
        let stopped = Instant::now();
        tokio::task::spawn_blocking(move || postgres.stop())
            .await
            .expect("pg.sh stop")
            .expect("stop Postgres");
        tokio::time::sleep(plan.outage).await;
        let postgres = drill.stage.postgres.clone();
        tokio::task::spawn_blocking(move || postgres.start_again())
            .await
            .expect("pg.sh start")
            .expect("start Postgres again");
        let back = Instant::now();
        drill.fault("Postgres restart", stopped, back);
        let ready = drill.stage.wait_all_ready(READY_AGAIN_BOUND).await;
        match ready {
            Ok(took) => drill.note(format!(
                "injected: Postgres stopped (fast shutdown) for {}, started on the same dir and \
                 port; all {INSTANCES} instances ready {} after it was back",
                secs(back - stopped),
                secs(took)
            )),
            Err(errors) => drill.violation(format!(
                "instances not ready after Postgres came back:\n{}",
                errors.join("\n")
            )),
        }
        drill.load().await;
    }
    run(drill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d_live_listener_connections_dropped() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let plan = Plan::from_env();
    let report = Report::new("d: drop the live bridges' LISTEN connections under load");
    let mut drill = Drill::begin(report, staged().await, plan)
        .await
        .expect("the workload");
    let url = drill.stage.database_url.clone();
    for _ in 0..plan.rounds {
        let cut = Instant::now();
        let terminated = terminate_listeners(&url)
            .await
            .expect("pg_terminate_backend");
        drill.fault("LISTEN connections terminated", cut, cut);
        drill.note(format!(
            "injected: pg_terminate_backend on {terminated} LISTEN connections ({INSTANCES} instances)"
        ));
        if terminated < INSTANCES as i64 {
            drill.violation(format!(
                "only {terminated} of {INSTANCES} instances had a LISTEN connection to cut"
            ));
        }
        drill.load().await;
        let listening = count_listeners(&url).await.expect("pg_stat_activity");
        drill.note(format!(
            "after a phase of load: {listening} LISTEN connections"
        ));
        if listening < INSTANCES as i64 {
            drill.violation(format!(
                "only {listening} of {INSTANCES} instances listen again after the cut"
            ));
        }
    }
    run(drill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e_rolling_restart_under_load() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let plan = Plan::from_env();
    let report = Report::new("e: rolling restart (SIGTERM, wait for exit, start a new one)");
    let mut drill = Drill::begin(report, staged().await, plan)
        .await
        .expect("the workload");
    for _ in 0..plan.rounds {
        let began = Instant::now();
        for _ in 0..INSTANCES {
            // The oldest goes; the proxy keeps offering it until it exits (it must refuse new
            // connections and finish those it has).
            let old = drill.stage.remove_instance(0);
            let name = old.name.clone();
            let result = old.terminate(SHUTDOWN_BOUND).await;
            drill.stage.sync_proxy();
            match result {
                Ok((status, took)) => {
                    drill.note(format!(
                        "SIGTERM {name}: exited ({status}) after {}",
                        secs(took)
                    ));
                    if !status.success() {
                        drill.violation(format!("{name} exited with {status} after SIGTERM"));
                    }
                }
                Err(e) => drill.violation(format!("{e:#}")),
            }
            match drill.stage.add_instance().await {
                Ok((new, took)) => drill.note(format!(
                    "  replaced by {new}, ready {} after its start",
                    secs(took)
                )),
                Err(e) => {
                    drill.violation(format!("the replacement for {name} did not come up: {e:#}"))
                }
            }
        }
        drill.fault("rolling restart", began, Instant::now());
        drill.load().await;
    }
    run(drill).await;
}
