//! Settles the items of people's rounds that died with their process (a crash, `kill -9`) and
//! that no run replays: every so often, an item whose deadline passed that long ago and that
//! nobody settled is closed and its verdicts paid on the terms its round stored with it, under the
//! keys the round would have used. Whoever settles first (the round, a replay, this sweep, another
//! server's sweep) pays; the others find the keys taken.

use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::human::settle_item;
use crate::app::AppState;
use crate::feedback::store as queue_store;
use crate::settlement::Settler;

/// Seconds between sweeps, and how long past its deadline an item is left to its own round.
pub const DEFAULT_SWEEP: Duration = Duration::from_secs(30);
/// Items one sweep settles; the rest wait for the next.
const ITEMS_PER_SWEEP: i64 = 100;

/// Sweeps every `every` until `shutdown`, supervised.
pub fn spawn_sweep(
    state: &AppState,
    every: Duration,
    shutdown: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let sweep = move |state: AppState| async move {
        let items = settle_unsettled(&state, every).await?;
        if items > 0 {
            tracing::info!(items, "people's items settled after their round died");
        }
        Ok(())
    };
    let tasks = &state.tasks;
    tasks.spawn_every("people-items-sweep", every, shutdown, state.clone(), sweep)
}

/// Settles the items whose deadline passed more than `grace` ago and that nobody settled; gives
/// how many it settled.
pub async fn settle_unsettled(state: &AppState, grace: Duration) -> anyhow::Result<usize> {
    let items = queue_store::unsettled_items(&state.db, grace, ITEMS_PER_SWEEP).await?;
    for item in &items {
        // People's rounds run only where payments settle in the ledger alone.
        settle_item(&state.ledger, &Settler::Simulated, &item.pay, item.id).await?;
    }
    Ok(items.len())
}
