//! The Postgres pool and the embedded migrations.

use std::time::Duration;

use anyhow::Context;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

/// How long a request waits for a pooled connection before it is answered 503: a pool that cannot
/// hand one out (Postgres restarting, every connection busy) should say so in seconds, not hang.
pub const DEFAULT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// What a client told "the database is unavailable" should wait before retrying.
pub const UNAVAILABLE_RETRY_AFTER_S: u64 = 2;

pub async fn connect(url: &str, max_connections: u32) -> anyhow::Result<PgPool> {
    connect_with(url, max_connections, DEFAULT_ACQUIRE_TIMEOUT).await
}

/// A pool whose `acquire` gives up after `acquire_timeout` (with `sqlx::Error::PoolTimedOut`,
/// which [`is_unavailable`] recognises). The pool reconnects by itself once Postgres is back: each
/// connection is pinged before it is handed out and replaced when dead.
pub async fn connect_with(
    url: &str,
    max_connections: u32,
    acquire_timeout: Duration,
) -> anyhow::Result<PgPool> {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(acquire_timeout)
        .connect(url)
        .await
        .with_context(|| format!("cannot connect to Postgres at {}", redact(url)))
}

/// Whether `error` means Postgres cannot be reached right now (down, restarting, refusing
/// connections, the connection cut), as opposed to a query that is wrong: the boundaries answer it
/// 503 with `Retry-After` instead of a 500.
pub fn is_unavailable(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            // Class 08: connection exceptions; 57P01-57P03: the server shutting down, crashed,
            // or starting up; 53300: too many connections.
            code.starts_with("08") || matches!(&*code, "57P01" | "57P02" | "57P03" | "53300")
        }),
        _ => false,
    }
}

/// Serialises what instances do once at start (seeding, recovery) across every process on one
/// database: a session advisory lock on a connection of its own, freed when dropped or when the
/// process dies. Its two-key form lives apart from the one-key locks (ledger owners, migrations).
pub struct StartupLock(Option<sqlx::PgConnection>);

const STARTUP_LOCK: (i32, i32) = (0x4c61_6368, 1);

impl StartupLock {
    pub async fn take(db: &PgPool) -> anyhow::Result<Self> {
        let mut connection = db.acquire().await?.detach();
        sqlx::query("SELECT pg_advisory_lock($1, $2)")
            .bind(STARTUP_LOCK.0)
            .bind(STARTUP_LOCK.1)
            .execute(&mut connection)
            .await
            .context("taking the start-up lock")?;
        Ok(Self(Some(connection)))
    }

    /// Frees the lock now (closing the connection frees it too, which is all a failed start does).
    pub async fn release(mut self) {
        if let Some(connection) = self.0.take() {
            let _ = sqlx::Connection::close(connection).await;
        }
    }
}

pub async fn migrate(db: &PgPool) -> anyhow::Result<()> {
    sqlx::migrate!("../migrations")
        .run(db)
        .await
        .context("running migrations")?;
    Ok(())
}

/// The URL with any password replaced, for messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            match credentials.split_once(':') {
                Some((user, _)) => format!("{}{}:***{}", &url[..scheme + 3], user, &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn outages_are_unavailable_and_query_errors_are_not() {
        use std::io::{Error, ErrorKind};
        assert!(super::is_unavailable(&sqlx::Error::PoolTimedOut));
        assert!(super::is_unavailable(&sqlx::Error::Io(Error::from(
            ErrorKind::ConnectionRefused
        ))));
        assert!(!super::is_unavailable(&sqlx::Error::RowNotFound));
        assert!(!super::is_unavailable(&sqlx::Error::Protocol("bad".into())));
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            super::redact("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(super::redact("postgres://u@h/db"), "postgres://u@h/db");
    }
}
