//! `lachesis bench mcp`: MCP tool-call round trips through our client (`rmcp`, via
//! [`McpConnection`]) against the official Python SDK's client (`mcp`), on the same server
//! (`@modelcontextprotocol/server-everything`) and the same number of calls, in one run.
//!
//! Per transport, each client makes `calls` sequential `echo` calls after a warm-up and records
//! every round trip. Over stdio each client spawns its own server (that is what a stdio client
//! does); over streamable HTTP both talk to one server started here. The Python client
//! (`scripts/bench_mcp_client.py`) hands back its raw times, so the percentiles of both sides are
//! computed here by one function. `--episodes N` also times the scripted solver (ours only).

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Map, Value};
use tokio::process::{Child, Command};

use super::python_peer::{PythonPeerArgs, PythonPeerDefaults};
use crate::envs::EnvOptions;
use crate::envs::mcp_tools::client::{Endpoint, McpConnection};
use crate::envs::mcp_tools::sandbox::ServerPrograms;
use crate::envs::mcp_tools::{McpToolsEnv, solver};

/// The tool every round trip calls: the cheapest one server-everything has, so the figures are
/// the clients' and transports' cost rather than the tool's.
const TOOL: &str = "echo";
/// One call's limit; a healthy echo answers in milliseconds.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Starting a node server and completing the handshake.
const START_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, clap::Args)]
pub struct McpBenchArgs {
    /// Sequential timed calls per transport and client.
    #[arg(long, default_value_t = 2000)]
    pub calls: usize,
    /// Untimed calls first, on each connection.
    #[arg(long, default_value_t = 50)]
    pub warmup: usize,
    /// The official SDK's client (`--python`, `--client-script`).
    #[command(flatten)]
    pub sdk: PythonPeerArgs<Self>,
    /// Measure our client alone.
    #[arg(long)]
    pub no_python: bool,
    /// Also play N generated episodes with the scripted solver and report episodes/s (ours only).
    #[arg(long)]
    pub episodes: Option<usize>,
    /// Episodes played at once with `--episodes`.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Limit for one client's calls on one transport, warm-up included, in seconds.
    #[arg(long, default_value_t = 300)]
    pub timeout_secs: u64,
}

impl PythonPeerDefaults for McpBenchArgs {
    const PYTHON_ENV: &'static str = "LACHESIS_BENCH_PYTHON";
    const PYTHON: &'static str = ".venv/mcp-git/bin/python";
    const PYTHON_HELP: &'static str = "A Python with the official `mcp` SDK";
    const SCRIPT: &'static str = "scripts/bench_mcp_client.py";
    const SCRIPT_FLAG: &'static str = "client-script";
}

/// Figures for one client on one transport, from its raw round trips.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub mean_ms: f64,
    /// Calls over the wall time of the timed loop, as the client itself measured it.
    pub calls_per_sec: f64,
}

/// The nearest-rank percentile (the smallest sample with at least `q` of the samples at or below
/// it) of ascending `sorted`; 0 when empty. No interpolation, so the value is always a real sample.
pub fn percentile_ns(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Summarizes raw round trips (nanoseconds) and the loop's wall time (seconds).
pub fn summarize(times_ns: &[u64], wall_s: f64) -> Summary {
    let mut sorted = times_ns.to_vec();
    sorted.sort_unstable();
    let ms = |ns: u64| ns as f64 / 1e6;
    let mean_ms = if sorted.is_empty() {
        0.0
    } else {
        sorted.iter().map(|&ns| ns as f64).sum::<f64>() / sorted.len() as f64 / 1e6
    };
    Summary {
        p50_ms: ms(percentile_ns(&sorted, 0.50)),
        p99_ms: ms(percentile_ns(&sorted, 0.99)),
        mean_ms,
        calls_per_sec: if wall_s > 0.0 {
            sorted.len() as f64 / wall_s
        } else {
            0.0
        },
    }
}

/// `ours / theirs`, or None when there is nothing meaningful to divide by.
pub fn ratio(ours: f64, theirs: f64) -> Option<f64> {
    (theirs.is_finite() && theirs > 0.0 && ours.is_finite()).then(|| ours / theirs)
}

/// One row of the table.
#[derive(Debug, Clone)]
pub struct Row {
    pub transport: &'static str,
    pub client: String,
    pub summary: Summary,
}

#[derive(Debug, Clone, Default)]
pub struct McpBenchReport {
    pub calls: usize,
    pub warmup: usize,
    pub rows: Vec<Row>,
    /// (episodes, solved, seconds) of the scripted solver.
    pub episodes: Option<(usize, usize, f64)>,
}

const OURS: &str = "ours (rmcp)";

pub async fn run_mcp_bench(args: &McpBenchArgs) -> anyhow::Result<McpBenchReport> {
    let server = ServerPrograms::from_env()
        .npm_bin
        .join("mcp-server-everything");
    if !server.exists() {
        bail!(
            "{} is missing: run scripts/ensure-tools.sh (or set LACHESIS_MCP_BIN)",
            server.display()
        );
    }
    if !args.no_python && !args.sdk.python.exists() {
        bail!(
            "{} is missing: run scripts/ensure-mcp-servers.sh, pass --python, or use --no-python",
            args.sdk.python.display()
        );
    }
    let limit = Duration::from_secs(args.timeout_secs);
    let mut report = McpBenchReport {
        calls: args.calls,
        warmup: args.warmup,
        ..Default::default()
    };

    // stdio: each client spawns (and, when done, stops) a server of its own.
    let stdio = Endpoint::Stdio {
        program: server.clone(),
        args: Vec::new(),
        env: Vec::new(),
        cwd: None,
    };
    let (times, wall) = ours_round_trips(&stdio, args.calls, args.warmup, limit)
        .await
        .context("our client over stdio")?;
    report.rows.push(row("stdio", OURS.into(), &times, wall));
    if !args.no_python {
        let target = ["--server".to_string(), server.display().to_string()];
        let (sdk, times, wall) = python_round_trips(args, "stdio", &target, limit)
            .await
            .context("the Python client over stdio")?;
        report
            .rows
            .push(row("stdio", format!("Python mcp {sdk}"), &times, wall));
    }

    // Streamable HTTP: one server for both clients, each in a session of its own.
    let http = HttpServer::start(&server).await?;
    let endpoint = Endpoint::Http {
        url: http.url.clone(),
    };
    let (times, wall) = ours_round_trips(&endpoint, args.calls, args.warmup, limit)
        .await
        .context("our client over HTTP")?;
    report.rows.push(row("http", OURS.into(), &times, wall));
    if !args.no_python {
        let target = ["--url".to_string(), http.url.clone()];
        let (sdk, times, wall) = python_round_trips(args, "http", &target, limit)
            .await
            .context("the Python client over HTTP")?;
        report
            .rows
            .push(row("http", format!("Python mcp {sdk}"), &times, wall));
    }
    http.stop().await;

    if let Some(episodes) = args.episodes {
        let env = McpToolsEnv::new(&EnvOptions::default())?;
        // Discovery starts every server once; it is setup, not an episode.
        env.catalogue().await?;
        let started = Instant::now();
        let solved = solver::solve(&env, episodes, 1, args.concurrency).await?;
        report.episodes = Some((solved.total, solved.solved, started.elapsed().as_secs_f64()));
    }
    Ok(report)
}

fn row(transport: &'static str, client: String, times: &[u64], wall_s: f64) -> Row {
    Row {
        transport,
        client,
        summary: summarize(times, wall_s),
    }
}

/// Our client: connect, warm up, then `calls` timed calls. Returns the round trips (ns) and the
/// timed loop's wall seconds.
async fn ours_round_trips(
    endpoint: &Endpoint,
    calls: usize,
    warmup: usize,
    limit: Duration,
) -> anyhow::Result<(Vec<u64>, f64)> {
    let work = async {
        let connection = McpConnection::connect(endpoint, START_TIMEOUT).await?;
        for i in 0..warmup {
            let message = format!("warm {i}");
            let result = connection
                .call(TOOL, echo_arguments(&message), CALL_TIMEOUT)
                .await?;
            // Checked once: a server answering something else would make the figures meaningless.
            if i == 0 && result.text != format!("Echo: {message}") {
                bail!("echo answered {:?}", result.text);
            }
        }
        let mut times = Vec::with_capacity(calls);
        let started = Instant::now();
        for i in 0..calls {
            let arguments = echo_arguments(&format!("ping {i}"));
            let t0 = Instant::now();
            let result = connection.call(TOOL, arguments, CALL_TIMEOUT).await?;
            times.push(t0.elapsed().as_nanos() as u64);
            if result.is_error {
                bail!("echo failed: {}", result.text);
            }
        }
        let wall = started.elapsed().as_secs_f64();
        // Dropping the connection ends the session and kills a stdio child.
        drop(connection);
        Ok((times, wall))
    };
    tokio::time::timeout(limit, work)
        .await
        .with_context(|| format!("not done within {limit:?}"))?
}

fn echo_arguments(message: &str) -> Map<String, Value> {
    let mut arguments = Map::new();
    arguments.insert("message".into(), Value::String(message.into()));
    arguments
}

#[derive(serde::Deserialize)]
struct PythonReport {
    sdk: String,
    times_ns: Vec<u64>,
    wall_s: f64,
}

/// The Python SDK's client, run by `scripts/bench_mcp_client.py`; returns (SDK version, round
/// trips in ns, wall seconds).
async fn python_round_trips(
    args: &McpBenchArgs,
    transport: &str,
    target: &[String],
    limit: Duration,
) -> anyhow::Result<(String, Vec<u64>, f64)> {
    let mut command = Command::new(&args.sdk.python);
    command
        .arg(&args.sdk.script)
        .args(["--transport", transport, "--tool", TOOL])
        .args(["--calls", &args.calls.to_string()])
        .args(["--warmup", &args.warmup.to_string()])
        .args(target)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // A group of its own, so a timeout can stop the server a stdio client spawned as well.
        .process_group(0)
        .kill_on_drop(true);
    let child = command
        .spawn()
        .with_context(|| format!("starting {}", args.sdk.python.display()))?;
    let group = child.id();
    let output = match tokio::time::timeout(limit, child.wait_with_output()).await {
        Ok(output) => output?,
        Err(_) => {
            if let Some(group) = group {
                kill_group(group);
            }
            bail!("not done within {limit:?}");
        }
    };
    if !output.status.success() {
        bail!(
            "{} exited with {}: {}",
            args.sdk.script.display(),
            output.status,
            tail(&String::from_utf8_lossy(&output.stderr))
        );
    }
    let report: PythonReport = serde_json::from_slice(&output.stdout).with_context(|| {
        format!(
            "reading the Python client's output: {}",
            tail(&String::from_utf8_lossy(&output.stdout))
        )
    })?;
    if report.times_ns.len() != args.calls {
        bail!(
            "the Python client timed {} calls, not {}",
            report.times_ns.len(),
            args.calls
        );
    }
    Ok((report.sdk, report.times_ns, report.wall_s))
}

/// SIGKILL to a process group (the Python client and the server it spawned). Best effort: the
/// group may already be gone.
fn kill_group(group: u32) {
    let _ = std::process::Command::new("kill")
        .args(["-KILL", "--", &format!("-{group}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// The end of a long message, where a traceback's cause is.
fn tail(text: &str) -> &str {
    let start = text.len().saturating_sub(2000);
    let start = (start..text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len());
    &text[start..]
}

/// `mcp-server-everything streamableHttp` on a free port; killed when dropped.
struct HttpServer {
    child: Child,
    url: String,
}

impl HttpServer {
    async fn start(program: &Path) -> anyhow::Result<Self> {
        let port = free_port()?;
        let mut child = Command::new(program)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            // It logs every request; the log is not needed and a full pipe would stall it.
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {} streamableHttp", program.display()))?;
        let deadline = Instant::now() + START_TIMEOUT;
        // Answering means accepting a connection; the handshake itself is each client's to time.
        loop {
            if let Some(status) = child.try_wait()? {
                bail!("the HTTP server exited at start ({status})");
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                break;
            }
            if Instant::now() > deadline {
                bail!("the HTTP server did not listen on port {port} within {START_TIMEOUT:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(Self {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        })
    }

    async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// A port nothing listens on now (the OS picks it; there is a small window before the server
/// binds it, acceptable for a benchmark).
fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    Ok(listener.local_addr()?.port())
}

fn fmt_ratio(r: Option<f64>) -> String {
    r.map_or("n/a".into(), |r| format!("{r:.2}x"))
}

pub fn print_mcp_report(report: &McpBenchReport) {
    let build = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    println!(
        "MCP round trips: {} sequential `{TOOL}` calls per row after {} warm-up calls, \
         @modelcontextprotocol/server-everything ({build} build of ours; over stdio each client \
         spawns its own server, over HTTP both share one).",
        report.calls, report.warmup
    );
    println!(
        "| transport | client | p50 ms | p99 ms | mean ms | calls/s | p50 ours/Python | calls/s ours/Python |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for row in &report.rows {
        let s = &row.summary;
        // The ratios go on our row, against the Python row of the same transport.
        let peer = (row.client == OURS)
            .then(|| {
                report
                    .rows
                    .iter()
                    .find(|r| r.transport == row.transport && r.client != OURS)
            })
            .flatten();
        let (p50_ratio, rate_ratio) = match peer {
            Some(p) => (
                fmt_ratio(ratio(s.p50_ms, p.summary.p50_ms)),
                fmt_ratio(ratio(s.calls_per_sec, p.summary.calls_per_sec)),
            ),
            None => ("".into(), "".into()),
        };
        println!(
            "| {} | {} | {:.3} | {:.3} | {:.3} | {:.0} | {p50_ratio} | {rate_ratio} |",
            row.transport, row.client, s.p50_ms, s.p99_ms, s.mean_ms, s.calls_per_sec
        );
    }
    println!("(p50 ours/Python below 1 and calls/s ours/Python above 1 mean ours is faster.)");
    if let Some((total, solved, seconds)) = report.episodes {
        println!(
            "scripted solver (ours only; the Python SDK has no equivalent environment): \
             {total} episodes, {solved} solved, in {seconds:.1} s, {:.2} episodes/s",
            total as f64 / seconds.max(1e-9)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let sorted: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile_ns(&sorted, 0.50), 50);
        assert_eq!(percentile_ns(&sorted, 0.99), 99);
        assert_eq!(percentile_ns(&sorted, 1.0), 100);
        assert_eq!(percentile_ns(&sorted, 0.0), 1);
        // Four samples: the median is the second (no interpolation), p99 the largest.
        assert_eq!(percentile_ns(&[10, 20, 30, 40], 0.50), 20);
        assert_eq!(percentile_ns(&[10, 20, 30, 40], 0.99), 40);
        assert_eq!(percentile_ns(&[7], 0.5), 7);
        assert_eq!(percentile_ns(&[], 0.5), 0);
    }

    #[test]
    fn summary_of_unsorted_times() {
        // 1..=4 ms, shuffled, over a 0.5 s loop.
        let times = [3_000_000, 1_000_000, 4_000_000, 2_000_000];
        let s = summarize(&times, 0.5);
        assert_eq!(
            s,
            Summary {
                p50_ms: 2.0,
                p99_ms: 4.0,
                mean_ms: 2.5,
                calls_per_sec: 8.0,
            }
        );
        assert_eq!(summarize(&[], 0.0).calls_per_sec, 0.0);
        assert_eq!(summarize(&[], 0.0).p50_ms, 0.0);
    }

    #[test]
    fn ratios() {
        assert_eq!(ratio(1.0, 4.0), Some(0.25));
        assert_eq!(ratio(3000.0, 1500.0), Some(2.0));
        assert_eq!(ratio(1.0, 0.0), None);
        assert_eq!(ratio(f64::NAN, 1.0), None);
        assert_eq!(fmt_ratio(Some(0.25)), "0.25x");
        assert_eq!(fmt_ratio(None), "n/a");
    }
}
