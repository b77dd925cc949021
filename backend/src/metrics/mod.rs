//! Prometheus metrics in the text exposition format, kept in memory per process.
//!
//! Counters and the latency histogram are cheap (one short std mutex section per event, never held
//! across an await); queue depths are read from Postgres at scrape time, so every instance reports the
//! shared truth.

use std::collections::BTreeMap;
use std::fmt::{Display, Write as _};
use std::sync::Mutex;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::app::AppState;
use crate::trajectory::store::{self, Ingested};

const LATENCY_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

#[derive(Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// (metric name, run) -> count
    counters: BTreeMap<(&'static str, String), u64>,
    /// (method, route, status) -> latency histogram
    latency: BTreeMap<(String, String, u16), Histogram>,
    /// hosted environment -> showcase attempts started
    showcase_attempts: BTreeMap<String, u64>,
}

#[derive(Default, Clone)]
struct Histogram {
    buckets: [u64; LATENCY_BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Metrics {
    fn add(&self, name: &'static str, run: &str, by: u64) {
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *inner.counters.entry((name, run.to_string())).or_default() += by;
    }

    pub fn group_received(&self, run: &str, outcome: Ingested) {
        self.add("lachesis_groups_received_total", run, 1);
        if let Ingested::Buffered { .. } = outcome {
            self.add("lachesis_groups_buffered_total", run, 1);
        }
    }

    pub fn batch_formed(&self, run: &str, groups: usize) {
        self.add("lachesis_batches_formed_total", run, 1);
        self.add("lachesis_groups_batched_total", run, groups as u64);
    }

    pub fn batch_served(&self, run: &str) {
        self.add("lachesis_batches_served_total", run, 1);
    }

    /// A hosted environment's showcase started an attempt (one completion of the model).
    pub fn showcase_attempt(&self, env: &str) {
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *inner.showcase_attempts.entry(env.to_string()).or_default() += 1;
    }

    fn observe(&self, method: &str, route: &str, status: u16, seconds: f64) {
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let h = inner
            .latency
            .entry((method.to_string(), route.to_string(), status))
            .or_default();
        for (bucket, bound) in h.buckets.iter_mut().zip(LATENCY_BUCKETS) {
            if seconds <= bound {
                *bucket += 1;
            }
        }
        h.count += 1;
        h.sum += seconds;
    }

    /// The exposition text; `depths` are (run, queued groups, buffered groups).
    pub fn render(&self, depths: &[(String, i64, i64)]) -> String {
        let inner = self
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut out = String::new();
        let help = [
            (
                "lachesis_groups_received_total",
                "Scored groups acknowledged (queued or buffered).",
            ),
            (
                "lachesis_groups_buffered_total",
                "Groups held back because their size differs from the env's.",
            ),
            (
                "lachesis_groups_batched_total",
                "Groups placed into batches.",
            ),
            ("lachesis_batches_formed_total", "Batches formed."),
            (
                "lachesis_batches_served_total",
                "Batches handed to a trainer.",
            ),
        ];
        for (name, text) in help {
            header(&mut out, name, "counter", text);
            for ((metric, run), value) in &inner.counters {
                if *metric == name {
                    sample(&mut out, name, "run", run, value);
                }
            }
        }
        let name = "lachesis_queue_depth";
        let text = "Groups waiting in the run's queue.";
        header(&mut out, name, "gauge", text);
        for (run, queued, _) in depths {
            sample(&mut out, name, "run", run, queued);
        }
        let name = "lachesis_buffered_groups";
        let text = "Groups waiting for partners of their env.";
        header(&mut out, name, "gauge", text);
        for (run, _, buffered) in depths {
            sample(&mut out, name, "run", run, buffered);
        }
        let name = "lachesis_showcase_attempts_total";
        let text = "Attempts a hosted environment made only to be watched.";
        header(&mut out, name, "counter", text);
        for (env, value) in &inner.showcase_attempts {
            sample(&mut out, name, "env", env, value);
        }
        let name = "lachesis_http_request_duration_seconds";
        header(&mut out, name, "histogram", "HTTP request latency.");
        for ((method, route, status), h) in &inner.latency {
            let labels = format!(
                "method=\"{method}\",route=\"{}\",status=\"{status}\"",
                escape(route)
            );
            for (count, bound) in h.buckets.iter().zip(LATENCY_BUCKETS) {
                let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{bound}\"}} {count}");
            }
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", h.count);
            let _ = writeln!(out, "{name}_sum{{{labels}}} {}", h.sum);
            let _ = writeln!(out, "{name}_count{{{labels}}} {}", h.count);
        }
        out
    }
}

/// The supervised tasks (`crate::supervisor`): restarts so far, and whether each is running now.
pub fn render_tasks(tasks: &[lachesis_shared::system::TaskStatus]) -> String {
    let mut out = String::new();
    let name = "lachesis_task_restarts_total";
    let text = "Times a server task failed and was started again.";
    header(&mut out, name, "counter", text);
    for task in tasks {
        sample(&mut out, name, "task", &task.name, task.restarts);
    }
    let name = "lachesis_task_up";
    let text = "1 while a server task runs, 0 while it backs off or has stopped.";
    header(&mut out, name, "gauge", text);
    for task in tasks {
        let up = u8::from(task.state == lachesis_shared::system::TaskState::Running);
        sample(&mut out, name, "task", &task.name, up);
    }
    out
}

/// The `# HELP` and `# TYPE` lines that open the family `name` of the given type.
fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// One sample of `name` with a single label, `label="value of label"`.
fn sample(out: &mut String, name: &str, label: &str, label_value: &str, value: impl Display) {
    let _ = writeln!(out, "{name}{{{label}=\"{}\"}} {value}", escape(label_value));
}

fn escape(label: &str) -> String {
    label
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Middleware: times every request under its route template (never the raw path, which would let
/// clients grow the label set without bound).
pub async fn track(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().to_string();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string());
    let response = next.run(req).await;
    let route = route.unwrap_or_else(|| "unmatched".into());
    state.metrics.observe(
        &method,
        &route,
        response.status().as_u16(),
        started.elapsed().as_secs_f64(),
    );
    response
}

/// `GET /metrics`.
pub async fn handler(State(state): State<AppState>) -> Response {
    match store::depth_by_run(&state.db).await {
        Ok(depths) => (
            [(
                axum::http::header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            state.metrics.render(&depths) + &render_tasks(&state.tasks.snapshot()),
        )
            .into_response(),
        Err(err) => err.into_response(),
    }
}
