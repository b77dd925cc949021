//! The drills' own PostgreSQL cluster. Drills stop and restart it, so it is never the shared test
//! cluster: it lives in a directory of its own under /var/tmp, on a port `scripts/pg.sh freeport`
//! picks, and is stopped and deleted when dropped.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

/// A private cluster driven through `scripts/pg.sh` (initdb once, start, stop, createdb).
pub struct PrivatePostgres {
    /// The directory holding the data dir (`pg/`) and the instances' logs.
    pub dir: PathBuf,
    data: PathBuf,
    pub port: u16,
}

fn pg_sh() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/pg.sh")
}

fn run_pg_sh(args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(pg_sh())
        .args(args)
        .output()
        .with_context(|| format!("running scripts/pg.sh {}", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "scripts/pg.sh {} failed: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn start_cluster(data: &Path, port: u16) -> anyhow::Result<()> {
    let (data, port) = (data.to_string_lossy(), port.to_string());
    run_pg_sh(&["start", &data, &port, "--fsync", "off"]).map(drop)
}

impl PrivatePostgres {
    /// Initialises and starts a cluster (fsync off: drills stop it cleanly, never crash it, so
    /// nothing acknowledged depends on fsync). Retries with a new port when another process took
    /// the one `freeport` offered in the meantime.
    pub fn start() -> anyhow::Result<Self> {
        let dir = PathBuf::from(format!(
            "/var/tmp/lachesis-drill-{:016x}",
            super::random_u64()
        ));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let data = dir.join("pg");
        let mut last_error = None;
        for _ in 0..3 {
            let port: u16 = run_pg_sh(&["freeport"])?
                .parse()
                .context("pg.sh freeport printed no port")?;
            match start_cluster(&data, port) {
                Ok(()) => return Ok(Self { dir, data, port }),
                Err(e) => last_error = Some(e),
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        Err(last_error.unwrap_or_else(|| anyhow::anyhow!("no attempt made")))
    }

    /// Starts the (stopped) cluster on the same directory and port.
    pub fn start_again(&self) -> anyhow::Result<()> {
        start_cluster(&self.data, self.port)
    }

    /// Fast shutdown: Postgres disconnects every client and writes a checkpoint.
    pub fn stop(&self) -> anyhow::Result<()> {
        run_pg_sh(&["stop", &self.data.to_string_lossy()]).map(drop)
    }

    pub fn admin_url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Creates database `name` and returns its URL.
    pub fn create_database(&self, name: &str) -> anyhow::Result<String> {
        run_pg_sh(&["createdb", &self.port.to_string(), name])?;
        Ok(format!(
            "postgres://postgres@127.0.0.1:{}/{name}",
            self.port
        ))
    }

    /// Where an instance of this cluster's drills writes its log.
    pub fn log_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.log"))
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let _ = self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Terminates every backend whose last statement was a `LISTEN` (the instances' live bridges);
/// returns how many were terminated.
pub async fn terminate_listeners(database_url: &str) -> anyhow::Result<i64> {
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(database_url).await?;
    let terminated: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity
         WHERE query ILIKE 'LISTEN%' AND pid <> pg_backend_pid()) t WHERE done",
    )
    .fetch_one(&mut conn)
    .await?;
    Ok(terminated)
}

/// How many backends are listening (their last statement a `LISTEN`) right now.
pub async fn count_listeners(database_url: &str) -> anyhow::Result<i64> {
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(database_url).await?;
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'LISTEN%' AND pid <> pg_backend_pid()",
    )
    .fetch_one(&mut conn)
    .await?)
}
