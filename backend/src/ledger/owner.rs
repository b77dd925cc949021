//! The ledger's owner lock, watched: see [`OwnerLock`].

use std::sync::atomic::{AtomicBool, Ordering};

use super::{Ledger, LedgerError};

/// A session advisory lock on the owner key, held as long as its connection lives. The connection
/// can die under us (a Postgres restart, a proxy's idle cut): the lock is then gone, and another
/// process's recovery may take our holds for abandoned. [`Ledger::check_owner`] notices, and takes
/// the lock again on a new connection; until then no chain payment starts.
pub(super) struct OwnerLock {
    pub(super) key: i64,
    connection: tokio::sync::Mutex<Option<sqlx::PgConnection>>,
    held: AtomicBool,
}

impl OwnerLock {
    pub(super) fn new(key: i64, connection: sqlx::PgConnection) -> Self {
        Self {
            key,
            connection: tokio::sync::Mutex::new(Some(connection)),
            held: AtomicBool::new(true),
        }
    }

    pub(super) fn is_held(&self) -> bool {
        self.held.load(Ordering::SeqCst)
    }
}

impl Ledger {
    /// This process's owner key, if it has one.
    pub fn owner_key(&self) -> Option<i64> {
        self.owner.as_ref().map(|owner| owner.key)
    }

    /// Whether this process still holds its owner lock, taking it again on a fresh connection if
    /// the old one died. `true` for a ledger without an owner.
    pub async fn check_owner(&self) -> bool {
        let Some(owner) = &self.owner else {
            return true;
        };
        let mut connection = owner.connection.lock().await;
        if let Some(alive) = connection.as_mut()
            && sqlx::query("SELECT 1").execute(&mut *alive).await.is_err()
        {
            *connection = None;
        }
        if connection.is_none() {
            owner.held.store(false, Ordering::SeqCst);
            let relocked = async {
                let mut fresh = self.db.acquire().await?.detach();
                let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
                    .bind(owner.key)
                    .fetch_one(&mut fresh)
                    .await?;
                Ok::<_, sqlx::Error>(locked.then_some(fresh))
            }
            .await;
            match relocked {
                Ok(Some(fresh)) => {
                    tracing::info!(key = owner.key, "ledger owner lock taken again");
                    *connection = Some(fresh);
                }
                Ok(None) => tracing::warn!(key = owner.key, "ledger owner lock held elsewhere"),
                Err(e) => tracing::warn!(error = %e, "ledger owner lock cannot be taken again"),
            }
        }
        let held = connection.is_some();
        owner.held.store(held, Ordering::SeqCst);
        held
    }

    /// Whether this process holds its owner lock as last checked (by [`Ledger::watch_owner`] or a
    /// payment), without a round trip: what readiness reports. `true` without an owner.
    pub fn owner_held(&self) -> bool {
        self.owner.as_ref().is_none_or(|owner| owner.is_held())
    }

    /// Releases the simulated holds this process still has open, at the end of a clean shutdown:
    /// the payments they belonged to were cut off, and a simulated hold never moved money. Chain
    /// holds stay for the next start's recovery, which asks the chain whether their transfer ran.
    pub async fn release_own_holds(&self) -> Result<usize, LedgerError> {
        let Some(owner) = &self.owner else {
            return Ok(0);
        };
        let holds: Vec<i64> = sqlx::query_scalar(
            "SELECT id FROM ledger_holds
             WHERE state = 'held' AND settlement = 'simulated' AND owner = $1 ORDER BY id",
        )
        .bind(owner.key)
        .fetch_all(&self.db)
        .await?;
        let mut released = 0;
        for hold in holds {
            // A payment finishing meanwhile may have captured it: that one is settled, not lost.
            match self.release(hold, "released at shutdown").await {
                Ok(true) => released += 1,
                Ok(false) | Err(LedgerError::HoldResolved(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(released)
    }

    /// Checks the owner lock every `every` until the process ends.
    pub fn watch_owner(&self, every: std::time::Duration) -> Option<tokio::task::JoinHandle<()>> {
        self.owner.as_ref()?;
        let ledger = self.clone();
        Some(tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if !ledger.check_owner().await {
                    tracing::error!("ledger owner lock lost: chain payments wait until it is back");
                }
            }
        }))
    }
}
