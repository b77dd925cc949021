//! Settles the items of people's rounds that died with their process (a crash, `kill -9`) and
//! that no run replays: every so often, an item whose deadline passed that long ago and that
//! nobody settled is closed and its verdicts paid on the terms its round stored with it, under the
//! keys the round would have used. Whoever settles first (the round, a replay, this sweep, another
//! server's sweep) pays; the others find the keys taken.

use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::human::VerdictPay;
use crate::app::AppState;
use crate::feedback::store as queue_store;
use crate::ledger::AccountId;
use crate::settlement::Settler;

/// Seconds between sweeps, and how long past its deadline an item is left to its own round.
pub const DEFAULT_SWEEP: Duration = Duration::from_secs(30);
/// Items one sweep settles; the rest wait for the next.
const ITEMS_PER_SWEEP: i64 = 100;

/// Sweeps every `every` until `shutdown`.
pub fn spawn_sweep(
    state: &AppState,
    every: Duration,
    shutdown: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let swept = state.clone();
    state
        .tasks
        .spawn("people-items-sweep", shutdown.clone(), move || {
            sweep(swept.clone(), every, shutdown.clone())
        })
}

async fn sweep(
    state: AppState,
    every: Duration,
    mut shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => return Ok(()),
        }
        match settle_unsettled(&state, every).await {
            Ok(0) => {}
            Ok(items) => tracing::info!(items, "people's items settled after their round died"),
            Err(e) => tracing::warn!(error = %e, "settling people's items failed"),
        }
    }
}

/// Settles the items whose deadline passed more than `grace` ago and that nobody settled; gives
/// how many it settled.
pub async fn settle_unsettled(state: &AppState, grace: Duration) -> anyhow::Result<usize> {
    let items = queue_store::unsettled_items(&state.db, grace, ITEMS_PER_SWEEP).await?;
    for item in &items {
        let pay = VerdictPay {
            payer: AccountId(item.pay_from),
            each: item.pay_each,
            key: item.pay_key.clone(),
        };
        // People's rounds run only where payments settle in the ledger alone.
        pay.settle(&state.ledger, &Settler::Simulated, item.id)
            .await?;
    }
    Ok(items.len())
}
