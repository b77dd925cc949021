//! `lachesis serve` instances as child processes on one database: started (alone or several at
//! once), probed for readiness, killed with SIGKILL or stopped with SIGTERM. Each writes its log
//! to a file, so a drill that fails can show what the server said.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::lachesis_bin;

/// How long a process may take to print its address, or to become ready, before the drill calls
/// it a failed start. Generous: a debug build on two busy cores migrates slowly.
pub const START_BOUND: Duration = Duration::from_secs(90);

/// One `lachesis serve` process.
pub struct Instance {
    pub name: String,
    pub addr: SocketAddr,
    pub base: String,
    pub log: PathBuf,
    child: tokio::process::Child,
}

impl Instance {
    /// Starts `lachesis serve` on a free loopback port and waits for its address line. No model
    /// (the drills never call it and three copies would not fit two cores), no static files (so
    /// an unknown path such as a missing `/health/ready` is a real 404, not the app's page).
    pub async fn start(name: &str, database_url: &str, log: PathBuf) -> anyhow::Result<Self> {
        // Append mode: stderr and the relayed stdout share the file without overwriting each other.
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .with_context(|| format!("creating the log {}", log.display()))?;
        let mut child = tokio::process::Command::new(lachesis_bin())
            .args(["serve", "--host", "127.0.0.1", "--port", "0"])
            .arg("--no-embedded-model")
            .env("DATABASE_URL", database_url)
            .env(
                "RUST_LOG",
                std::env::var("LACHESIS_DRILL_LOG").unwrap_or_else(|_| "info,sqlx=warn".into()),
            )
            // A failed start's log then ends with its error, not a page of backtrace.
            .env("RUST_BACKTRACE", "0")
            .env("RUST_LIB_BACKTRACE", "0")
            .env_remove("LACHESIS_API_TOKEN")
            .env_remove("LACHESIS_STATIC_DIR")
            .env_remove("LACHESIS_MODEL")
            .env_remove("LACHESIS_ENVS")
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log_file.try_clone()?))
            .kill_on_drop(true)
            .spawn()
            .context("starting lachesis serve")?;
        let stdout = child.stdout.take().context("child stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(START_BOUND, lines.next_line()).await;
        let line = match first {
            Ok(Ok(Some(line))) => line,
            Ok(Ok(None)) | Ok(Err(_)) => {
                let status = child.wait().await.ok();
                bail!(
                    "{name} exited before serving ({status:?}); its log:\n{}",
                    log_tail(&log, 30)
                );
            }
            Err(_) => bail!(
                "{name} printed no address in {START_BOUND:?}; its log:\n{}",
                log_tail(&log, 30)
            ),
        };
        let Some(base) = line.split_whitespace().find(|w| w.starts_with("http://")) else {
            bail!("{name}: unexpected first line {line:?}");
        };
        let addr: SocketAddr = base
            .trim_start_matches("http://")
            .parse()
            .with_context(|| format!("{name}: no address in {line:?}"))?;
        // The rest of stdout goes to the log too: an undrained pipe would block the server.
        let mut sink = tokio::fs::File::from_std(log_file);
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let _ = sink
                    .write_all(format!("[stdout] {line}\n").as_bytes())
                    .await;
            }
        });
        Ok(Self {
            name: name.to_string(),
            addr,
            base: base.to_string(),
            log,
            child,
        })
    }

    /// The exit status, if the process has ended (without waiting).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGKILL: no shutdown at all, as a crashed machine.
    pub async fn kill9(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }

    /// SIGTERM, then waits up to `bound` for the process to exit. A process still running then is
    /// killed and reported as an error (a shutdown that never ends).
    pub async fn terminate(mut self, bound: Duration) -> anyhow::Result<(ExitStatus, Duration)> {
        let pid = self.child.id().context("the process already exited")?;
        let sent = Instant::now();
        let status = tokio::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .await?;
        if !status.success() {
            bail!("kill -TERM {pid} failed");
        }
        match tokio::time::timeout(bound, self.child.wait()).await {
            Ok(status) => Ok((status?, sent.elapsed())),
            Err(_) => {
                let _ = self.child.start_kill();
                let _ = self.child.wait().await;
                bail!(
                    "{} did not exit within {bound:?} of SIGTERM (killed); its log:\n{}",
                    self.name,
                    log_tail(&self.log, 30)
                )
            }
        }
    }

    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log, lines)
    }
}

/// The last `lines` lines of a log file.
pub fn log_tail(path: &std::path::Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Which endpoint says an instance is ready: `/health/ready` once the server has it, else
/// `/api/auth/state` (answered from the database's settings, so it needs a working server).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadyProbe {
    HealthReady,
    AuthState,
}

impl ReadyProbe {
    pub fn path(self) -> &'static str {
        match self {
            ReadyProbe::HealthReady => "/health/ready",
            ReadyProbe::AuthState => "/api/auth/state",
        }
    }
}

/// One readiness probe: `Ok(probe used)` when the instance says it is ready.
pub async fn probe_ready(http: &reqwest::Client, base: &str) -> Result<ReadyProbe, String> {
    let answer = http.get(format!("{base}/health/ready")).send().await;
    match answer {
        Ok(resp) if resp.status().is_success() => return Ok(ReadyProbe::HealthReady),
        Ok(resp) if resp.status() != reqwest::StatusCode::NOT_FOUND => {
            return Err(format!("/health/ready answered {}", resp.status()));
        }
        Ok(_) => {}
        Err(e) => return Err(format!("/health/ready: {e}")),
    }
    match http.get(format!("{base}/api/auth/state")).send().await {
        Ok(resp) if resp.status().is_success() => Ok(ReadyProbe::AuthState),
        Ok(resp) => Err(format!("/api/auth/state answered {}", resp.status())),
        Err(e) => Err(format!("/api/auth/state: {e}")),
    }
}

/// Probes until the instance is ready (every 100 ms, up to `bound`); the time it took.
pub async fn wait_ready(
    http: &reqwest::Client,
    instance: &mut Instance,
    bound: Duration,
) -> anyhow::Result<(ReadyProbe, Duration)> {
    let began = Instant::now();
    loop {
        let last = match probe_ready(http, &instance.base).await {
            Ok(probe) => return Ok((probe, began.elapsed())),
            Err(why) => why,
        };
        if let Some(status) = instance.exited() {
            bail!(
                "{} exited ({status}) while waiting to be ready; its log:\n{}",
                instance.name,
                instance.log_tail(30)
            );
        }
        if began.elapsed() > bound {
            bail!(
                "{} not ready within {bound:?} (last probe: {last}); its log:\n{}",
                instance.name,
                instance.log_tail(30)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Starts `names.len()` instances at the same moment on one database: each result on its own, so
/// a drill can tell how many came up and show why the others did not.
pub async fn start_together(
    database_url: &str,
    names: &[String],
    log_for: impl Fn(&str) -> PathBuf,
) -> Vec<anyhow::Result<Instance>> {
    let starts = names
        .iter()
        .map(|name| Instance::start(name, database_url, log_for(name)));
    futures::future::join_all(starts).await
}
