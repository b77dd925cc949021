//! One drill from start to report: the stage (cluster, instances, proxy), the workload started on
//! it, faults the test injects and notes, and at the end the drain, the checks and the figures.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::checks::{self, Findings};
use super::fleet::{self, Instance, ReadyProbe, START_BOUND};
use super::journal::{Activity, describe};
use super::postgres::PrivatePostgres;
use super::proxy::Proxy;
use super::workload::{self, Workload};
use super::{Plan, secs};

/// The cluster, one database on it, the instances serving it and the proxy in front.
pub struct Stage {
    pub postgres: Arc<PrivatePostgres>,
    pub database_url: String,
    pub instances: Vec<Instance>,
    pub proxy: Proxy,
    /// For readiness probes, straight to an instance.
    pub http: reqwest::Client,
    /// Which endpoint answered the last successful readiness probe.
    pub probe: Option<ReadyProbe>,
    started: usize,
}

impl Stage {
    /// A new database `database` on the cluster, no instances yet, the proxy with no backends.
    pub async fn new(postgres: Arc<PrivatePostgres>, database: &str) -> anyhow::Result<Self> {
        let database_url = postgres.create_database(database)?;
        Ok(Self {
            postgres,
            database_url,
            instances: Vec::new(),
            proxy: Proxy::start(Vec::new()).await?,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()?,
            probe: None,
            started: 0,
        })
    }

    fn next_name(&mut self) -> String {
        self.started += 1;
        format!("s{}", self.started)
    }

    /// Starts `count` instances (all at the same moment when `together`, else one after another)
    /// and waits until each is ready; returns why each one that did not come up failed.
    pub async fn start_instances(&mut self, count: usize, together: bool) -> Vec<String> {
        let names: Vec<String> = (0..count).map(|_| self.next_name()).collect();
        let started = if together {
            let postgres = self.postgres.clone();
            fleet::start_together(&self.database_url, &names, |n| postgres.log_path(n)).await
        } else {
            let mut started = Vec::new();
            for name in &names {
                let log = self.postgres.log_path(name);
                started.push(Instance::start(name, &self.database_url, log).await);
            }
            started
        };
        let mut errors = Vec::new();
        for result in started {
            match result {
                Ok(mut instance) => {
                    match fleet::wait_ready(&self.http, &mut instance, START_BOUND).await {
                        Ok((probe, _)) => {
                            self.probe = Some(probe);
                            self.instances.push(instance);
                        }
                        Err(e) => errors.push(format!("{e:#}")),
                    }
                }
                Err(e) => errors.push(format!("{e:#}")),
            }
        }
        self.sync_proxy();
        errors
    }

    /// Starts one more instance, waits until it is ready and puts it behind the proxy; its name
    /// and how long it took to be ready from the start of the process.
    pub async fn add_instance(&mut self) -> anyhow::Result<(String, Duration)> {
        let began = Instant::now();
        let name = self.next_name();
        let mut instance =
            Instance::start(&name, &self.database_url, self.postgres.log_path(&name)).await?;
        let (probe, _) = fleet::wait_ready(&self.http, &mut instance, START_BOUND).await?;
        self.probe = Some(probe);
        self.instances.push(instance);
        self.sync_proxy();
        Ok((name, began.elapsed()))
    }

    /// Takes instance `index` out of the stage. The proxy keeps offering its address until the
    /// next `sync_proxy`, as a load balancer that has not noticed yet (it skips refusals).
    pub fn remove_instance(&mut self, index: usize) -> Instance {
        self.instances.remove(index)
    }

    pub fn sync_proxy(&self) {
        self.proxy
            .set_backends(self.instances.iter().map(|i| i.addr).collect());
    }

    /// Waits until every instance is ready again (after a Postgres restart); how long it took, or
    /// what was still wrong.
    pub async fn wait_all_ready(&mut self, bound: Duration) -> Result<Duration, Vec<String>> {
        let began = Instant::now();
        let mut errors = Vec::new();
        for instance in &mut self.instances {
            let left = bound.saturating_sub(began.elapsed());
            if let Err(e) = fleet::wait_ready(&self.http, instance, left).await {
                errors.push(format!("{e:#}"));
            }
        }
        if errors.is_empty() {
            Ok(began.elapsed())
        } else {
            Err(errors)
        }
    }

    /// Instances that do not say they are ready (one probe each).
    pub async fn not_ready(&self) -> Vec<String> {
        let mut not_ready = Vec::new();
        for instance in &self.instances {
            if let Err(why) = fleet::probe_ready(&self.http, &instance.base).await {
                not_ready.push(format!(
                    "{} is not ready at the end of the drill: {why}",
                    instance.name
                ));
            }
        }
        not_ready
    }

    /// Instances that exited although no one stopped them.
    pub fn unexpected_exits(&mut self) -> Vec<String> {
        let mut exits = Vec::new();
        for instance in &mut self.instances {
            if let Some(status) = instance.exited() {
                exits.push(format!(
                    "{} exited on its own ({status}); its log:\n{}",
                    instance.name,
                    instance.log_tail(30)
                ));
            }
        }
        exits
    }
}

/// What a drill prints: what was injected, the figures, and the invariants it found broken.
pub struct Report {
    pub title: String,
    pub lines: Vec<String>,
    pub violations: Vec<String>,
}

impl Report {
    pub fn new(title: &str) -> Self {
        Self {
            title: title.to_string(),
            lines: Vec::new(),
            violations: Vec::new(),
        }
    }

    pub fn absorb(&mut self, findings: Findings) {
        self.lines.extend(findings.lines);
        self.violations.extend(findings.violations);
    }

    pub fn print(&self) {
        println!("\n=== drill {} ===", self.title);
        for line in &self.lines {
            println!("  {line}");
        }
        if self.violations.is_empty() {
            println!("  invariants: all held");
        }
        for violation in &self.violations {
            println!("  VIOLATED: {violation}");
        }
    }

    /// Prints the report and fails the test if any invariant broke.
    pub fn assert_held(&self) {
        self.print();
        assert!(
            self.violations.is_empty(),
            "drill {}: {} invariants broken:\n{}",
            self.title,
            self.violations.len(),
            self.violations.join("\n")
        );
    }
}

/// When a fault began and when it was lifted (the same moment for one that is not held).
struct FaultWindow {
    label: String,
    injected: Instant,
    lifted: Instant,
}

/// A stage with the workload running on it.
pub struct Drill {
    pub plan: Plan,
    pub stage: Stage,
    pub workload: Workload,
    pub report: Report,
    faults: Vec<FaultWindow>,
}

impl Drill {
    /// Starts the run and the workload through the proxy, and lets it run for one phase.
    pub async fn begin(report: Report, stage: Stage, plan: Plan) -> anyhow::Result<Self> {
        let base = stage.proxy.base();
        workload::start_run(&workload::http_client(), &base).await?;
        let workload = Workload::start(&base, &stage.proxy.ws_url(), &stage.database_url).await?;
        let drill = Self {
            plan,
            stage,
            workload,
            report,
            faults: Vec::new(),
        };
        drill.load().await;
        Ok(drill)
    }

    /// Lets the workload run for one phase.
    pub async fn load(&self) {
        tokio::time::sleep(self.plan.phase).await;
    }

    pub fn note(&mut self, line: String) {
        self.report.lines.push(line);
    }

    pub fn violation(&mut self, what: String) {
        self.report.violations.push(what);
    }

    /// Records a fault's window; its figures are computed at the end, once recovery is known.
    pub fn fault(&mut self, label: &str, injected: Instant, lifted: Instant) {
        self.faults.push(FaultWindow {
            label: label.to_string(),
            injected,
            lifted,
        });
    }

    /// Stops the workload, drains the queue, runs every check and returns the report.
    pub async fn finish(mut self) -> anyhow::Result<Report> {
        let exits = self.stage.unexpected_exits();
        self.report.violations.extend(exits);
        self.workload.stop().await;
        let journal = self.workload.journal.clone();
        for window in &self.faults {
            let recovered = journal.first_ack_after(window.lifted);
            let until = recovered.unwrap_or_else(Instant::now);
            let failed = |a| journal.failures_between(a, window.injected, until);
            let recovery = match recovered {
                Some(at) => format!(
                    "first acknowledged ingest {} after the fault ({} after it was lifted)",
                    secs(at - window.injected),
                    secs(at.saturating_duration_since(window.lifted))
                ),
                None => {
                    self.report.violations.push(format!(
                        "{}: no ingest was acknowledged after the fault",
                        window.label
                    ));
                    "never recovered".into()
                }
            };
            self.report.lines.push(format!(
                "{}: requests failed until recovered: ingest {}, /batch {}, payments {}; {recovery}",
                window.label,
                describe(&failed(Activity::Ingest)),
                describe(&failed(Activity::Pull)),
                describe(&failed(Activity::Payment)),
            ));
        }
        let given_up = (
            self.workload
                .groups_given_up
                .load(std::sync::atomic::Ordering::Relaxed),
            self.workload
                .payments_given_up
                .load(std::sync::atomic::Ordering::Relaxed),
        );
        if given_up != (0, 0) {
            self.report.violations.push(format!(
                "after the stop, {} groups and {} payments were still refused after {:?} of retries",
                given_up.0,
                given_up.1,
                workload::STOP_GRACE
            ));
        }
        let base = self.stage.proxy.base();
        let (drained, fillers) = checks::drain(&workload::http_client(), &base, &journal).await?;
        let db = sqlx::PgPool::connect(&self.stage.database_url).await?;
        let stored = checks::stored_groups(&db).await?;
        self.report.absorb(checks::check_groups(&journal, &stored));
        self.report.lines.push(format!(
            "drain: {drained} batches pulled after the load, {fillers} filler groups"
        ));
        let ledger =
            checks::check_ledger(&journal, &self.workload.payments, &self.stage.database_url)
                .await?;
        self.report.absorb(ledger);
        let watchers = checks::check_watchers(
            &mut self.workload.watchers,
            &journal,
            &stored,
            Duration::from_secs(30),
        )
        .await;
        self.report.absorb(watchers);
        let counts = self.stage.proxy.counts();
        let probe = self.stage.probe.map_or("none", ReadyProbe::path);
        self.report.lines.push(format!(
            "proxy: {} connections relayed, {} backend connects refused, {} clients dropped with \
             no backend; readiness via {probe}",
            counts.relayed, counts.refused, counts.dropped
        ));
        let exits = self.stage.unexpected_exits();
        self.report.violations.extend(exits);
        let not_ready = self.stage.not_ready().await;
        self.report.violations.extend(not_ready);
        db.close().await;
        Ok(self.report)
    }
}
