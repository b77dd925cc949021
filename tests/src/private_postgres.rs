//! A Postgres cluster of a test's own (`scripts/pg.sh`), to stop and start again under a server.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

/// Clusters this process started, to keep their directories and ports apart.
static STARTED: AtomicU32 = AtomicU32::new(0);

/// Stopped (and its directory removed) when dropped.
pub struct PrivatePostgres {
    root: PathBuf,
    port: u16,
}

fn pg_sh(args: &[&str]) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/pg.sh");
    let out = std::process::Command::new("bash")
        .arg(script)
        .args(args)
        .output()
        .expect("run scripts/pg.sh");
    assert!(
        out.status.success(),
        "pg.sh {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A free port above `pg.sh freeport`'s range: while this cluster is down, a cluster that another
/// suite starts meanwhile must not take its port (and answer in its place).
fn private_port(nth: u32) -> u16 {
    let offset = (std::process::id().wrapping_add(nth * 37) % 1000) as u16;
    (0..1000)
        .map(|i| 56_432 + (offset + i) % 1000)
        .find(|port| {
            !std::path::Path::new(&format!("/tmp/.s.PGSQL.{port}")).exists()
                && std::net::TcpListener::bind(("127.0.0.1", *port)).is_ok()
        })
        .expect("a free port in 56432..57431")
}

impl PrivatePostgres {
    /// A new cluster (initdb) on a free port, started.
    pub async fn start() -> Self {
        let nth = STARTED.fetch_add(1, Ordering::SeqCst);
        let root = std::env::temp_dir().join(format!("lachesis-pg-{}-{nth}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let port = private_port(nth);
        let pg = Self { root, port };
        pg.start_again().await;
        pg
    }

    fn data(&self) -> String {
        self.root.join("pg").display().to_string()
    }

    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    pub async fn start_again(&self) {
        let (data, port) = (self.data(), self.port.to_string());
        tokio::task::spawn_blocking(move || pg_sh(&["start", &data, &port, "--fsync", "off"]))
            .await
            .unwrap();
    }

    pub async fn stop(&self) {
        let data = self.data();
        tokio::task::spawn_blocking(move || pg_sh(&["stop", &data]))
            .await
            .unwrap();
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/pg.sh");
        let _ = std::process::Command::new("bash")
            .args([script, "stop", &self.data()])
            .output();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}
