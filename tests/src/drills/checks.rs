//! The invariants checked after every drill, against what the clients saw (the journal) and what
//! the database holds:
//! - every acknowledged group is served by `/batch` exactly once: none missing, none twice;
//! - no payment doubled (begun = settled), the budget matches, `lachesis ledger reconcile` agrees;
//! - every watcher was shown every group committed while it was subscribed, or was told it lagged
//!   (or lost its connection, which a client notices just as well).
//!
//! Atropos has no idempotency key and no acknowledgement of batches, and the checks say where that
//! shows instead of calling it a server fault: a group whose first attempt failed may have been
//! stored anyway and then again by the retry (each copy is served once), and a batch whose answer
//! was lost is marked served in the database but never reached the trainer (there are at most as
//! many such batches as failed `/batch` calls). Anything beyond those bounds is a violation.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use lachesis::trajectory::store::decode_payload;
use serde_json::Value;

use super::journal::{Activity, Journal, MarkerLog, describe};
use super::payments::{FUNDED_MICROS, PAYMENT_MICROS, Payments};
use super::watchers::{Session, Watchers};
use super::workload::{RUN, post_until_acked, pull_batch, stop_pair};

/// Findings of one check: lines to print and broken invariants.
#[derive(Default)]
pub struct Findings {
    pub lines: Vec<String>,
    pub violations: Vec<String>,
}

/// One stored group, as the database has it after the drain.
pub struct StoredGroup {
    pub id: i64,
    pub marker: i64,
    pub state: String,
    pub batch_id: Option<i64>,
    pub batch_served: bool,
}

/// Pulls every batch left, filling the last one with filler groups (negative markers) when fewer
/// than a batch's sequences wait. Returns (batches drained, fillers posted).
pub async fn drain(
    http: &reqwest::Client,
    base: &str,
    journal: &Journal,
) -> anyhow::Result<(u64, i64)> {
    let (give_up, stop) = stop_pair();
    let _ = give_up.send(Some(Instant::now()));
    let (mut batches, mut fillers, mut failures) = (0, 0, 0);
    loop {
        match pull_batch(http, base).await {
            Ok(Some(served)) => {
                journal.batch_served(&served);
                batches += 1;
            }
            Ok(None) => {
                let status: Value = http
                    .get(format!("{base}/runs/{RUN}/status"))
                    .send()
                    .await?
                    .error_for_status()?
                    .json()
                    .await?;
                if status["queue_size"].as_i64().unwrap_or(0) == 0 {
                    return Ok((batches, fillers));
                }
                anyhow::ensure!(fillers < 5, "the queue never empties: {status}");
                fillers += 1;
                post_until_acked(http, base, -fillers, journal, &stop).await;
            }
            Err(e) => {
                journal.failed(Activity::Pull, e);
                failures += 1;
                anyhow::ensure!(failures < 100, "the drain's /batch keeps failing: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// A `groups` row: id, state, batch, whether that batch was handed out, payload.
type GroupRow = (i64, String, Option<i64>, bool, Vec<u8>);

pub async fn stored_groups(db: &sqlx::PgPool) -> anyhow::Result<Vec<StoredGroup>> {
    let rows: Vec<GroupRow> = sqlx::query_as(
        "SELECT g.id, g.state, g.batch_id, b.served_at IS NOT NULL, g.payload
         FROM groups g LEFT JOIN batches b ON b.id = g.batch_id WHERE g.run_id = $1",
    )
    .bind(RUN)
    .fetch_all(db)
    .await?;
    rows.into_iter()
        .map(|(id, state, batch_id, batch_served, payload)| {
            let group: Value = serde_json::from_slice(&decode_payload(&payload)?)?;
            let marker = group["tokens"][0][0]
                .as_i64()
                .ok_or_else(|| anyhow::anyhow!("group {id} has no marker"))?;
            Ok(StoredGroup {
                id,
                marker,
                state,
                batch_id,
                batch_served,
            })
        })
        .collect()
}

/// Acknowledged groups against `/batch` answers and the database.
pub fn check_groups(journal: &Journal, stored: &[StoredGroup]) -> Findings {
    let mut f = Findings::default();
    let markers = journal.markers();
    let served = journal.served();
    let failed_pulls = journal.failures_total(Activity::Pull).len();
    let mut copies: HashMap<i64, Vec<&StoredGroup>> = HashMap::new();
    for row in stored {
        copies.entry(row.marker).or_default().push(row);
    }
    let acked: Vec<i64> = markers
        .iter()
        .filter(|(_, log)| log.acked)
        .map(|(m, _)| *m)
        .collect();
    let mut lost_in_unanswered = 0;
    let mut unanswered_batches = HashSet::new();
    for marker in &acked {
        if served.get(marker).copied().unwrap_or(0) > 0 {
            continue;
        }
        let rows = copies.get(marker).map(Vec::as_slice).unwrap_or_default();
        let handed_out: Vec<i64> = rows
            .iter()
            .filter(|r| r.state == "batched" && r.batch_served)
            .filter_map(|r| r.batch_id)
            .collect();
        if handed_out.is_empty() {
            let states: Vec<&str> = rows.iter().map(|r| r.state.as_str()).collect();
            f.violations.push(format!(
                "acknowledged group {marker} was never served (stored {} times, states {states:?})",
                rows.len()
            ));
        } else {
            lost_in_unanswered += 1;
            unanswered_batches.extend(handed_out);
        }
    }
    if unanswered_batches.len() > failed_pulls {
        f.violations.push(format!(
            "{} batches were marked served but never reached the trainer, yet only {failed_pulls} \
             /batch calls failed",
            unanswered_batches.len()
        ));
    }
    let mut stored_again = 0;
    for (marker, rows) in &copies {
        let log = markers.get(marker);
        let times = served.get(marker).copied().unwrap_or(0) as usize;
        if log.is_none() {
            f.violations
                .push(format!("group {marker} is stored but was never sent"));
            continue;
        }
        let failed = log.map_or(0, |l: &MarkerLog| l.failed) as usize;
        stored_again += rows.len().saturating_sub(1);
        if rows.len() > 1 + failed {
            f.violations.push(format!(
                "group {marker} is stored {} times but was sent {} times",
                rows.len(),
                1 + failed
            ));
        }
        if times > rows.len() {
            f.violations.push(format!(
                "group {marker} was served {times} times but stored {} times: a stored group was \
                 handed out twice",
                rows.len()
            ));
        }
    }
    for marker in served.keys() {
        if !copies.contains_key(marker) {
            f.violations
                .push(format!("/batch served group {marker}, which is not stored"));
        }
    }
    let served_acked = acked
        .iter()
        .filter(|m| served.get(m).copied().unwrap_or(0) > 0)
        .count();
    let given_up = markers.values().filter(|l| !l.acked).count();
    f.lines.push(format!(
        "groups: acknowledged {}, served {served_acked} ({} batches); failed ingest attempts {}; \
         stored again by a retry after a failed attempt {stored_again}; lost with an unanswered \
         /batch {lost_in_unanswered} (failed /batch calls {failed_pulls}); never acknowledged \
         {given_up}",
        acked.len(),
        journal.batches(),
        describe(&journal.failures_total(Activity::Ingest)),
    ));
    f
}

/// Payments begun against what the ledger settled, and the CLI's reconciliation.
pub async fn check_ledger(
    journal: &Journal,
    payments: &Payments,
    database_url: &str,
) -> anyhow::Result<Findings> {
    let mut f = Findings::default();
    let (begun, confirmed, replays) = journal.payments();
    let (settled, doubled) = payments.settled().await?;
    let available = payments.budget_available().await?;
    if settled != begun.len() as i64 {
        f.violations.push(format!(
            "payments begun {} but settled {settled} (confirmed {})",
            begun.len(),
            confirmed.len()
        ));
    }
    if doubled > 0 {
        f.violations
            .push(format!("{doubled} payment keys are posted more than once"));
    }
    if available != FUNDED_MICROS - settled * PAYMENT_MICROS {
        f.violations.push(format!(
            "the budget has {available} micro-USDC available, expected {}",
            FUNDED_MICROS - settled * PAYMENT_MICROS
        ));
    }
    let out = tokio::process::Command::new(crate::lachesis_bin())
        .args(["ledger", "reconcile"])
        .env("DATABASE_URL", database_url)
        .output()
        .await?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let balanced = out.status.success() && stdout.contains("ledger balanced");
    if !balanced {
        f.violations.push(format!(
            "lachesis ledger reconcile: {}\n{stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    f.lines.push(format!(
        "payments: attempted {}, settled {settled}, confirmed on a retry {replays}, failed \
         attempts {}; reconcile: {}",
        begun.len(),
        describe(&journal.failures_total(Activity::Payment)),
        if balanced { "balanced" } else { "NOT balanced" }
    ));
    Ok(f)
}

/// The group ids a session must have been shown: those of groups first sent after it subscribed,
/// or after the last `lagged` notice it got. A session cut off owes nothing (its client knows).
fn owed(session: &Session, stored: &[StoredGroup], sent: &HashMap<i64, MarkerLog>) -> Vec<i64> {
    if session.cut_off.is_some() {
        return Vec::new();
    }
    let since = session
        .lags
        .iter()
        .map(|(at, _)| *at)
        .max()
        .unwrap_or(session.subscribed_at);
    stored
        .iter()
        .filter(|g| sent.get(&g.marker).is_some_and(|l| l.first_sent > since))
        .filter(|g| !session.groups.contains(&g.id))
        .map(|g| g.id)
        .collect()
}

/// True when every watcher's latest session is live and owed nothing.
fn settled(sessions: &[Session], stored: &[StoredGroup], sent: &HashMap<i64, MarkerLog>) -> bool {
    let mut latest: HashMap<usize, &Session> = HashMap::new();
    for session in sessions {
        latest.insert(session.watcher, session);
    }
    latest
        .values()
        .all(|s| s.cut_off.is_none() && owed(s, stored, sent).is_empty())
}

/// Waits (up to `bound`) until the open sessions have been shown every group they are owed, then
/// closes them and checks every session.
pub async fn check_watchers(
    watchers: &mut Watchers,
    journal: &Journal,
    stored: &[StoredGroup],
    bound: Duration,
) -> Findings {
    let mut f = Findings::default();
    let sent = journal.markers();
    let began = Instant::now();
    while began.elapsed() < bound && !settled(&watchers.sessions(), stored, &sent) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let sessions = watchers.stop().await;
    let watcher_count = sessions
        .iter()
        .map(|s| s.watcher)
        .max()
        .map_or(0, |w| w + 1);
    for watcher in 0..watcher_count {
        let last = sessions.iter().rfind(|s| s.watcher == watcher);
        if let Some(cut) = last.and_then(|s| s.cut_off.as_ref()) {
            f.violations.push(format!(
                "watcher {watcher} had no live connection at the end ({cut})"
            ));
        }
    }
    for (i, session) in sessions.iter().enumerate() {
        let missing = owed(session, stored, &sent);
        if !missing.is_empty() {
            f.violations.push(format!(
                "watcher {} (session {i}, {} lag notices) missed {} groups without being told, \
                 e.g. ids {:?}",
                session.watcher,
                session.lags.len(),
                missing.len(),
                &missing[..missing.len().min(5)]
            ));
        }
        if session.repeated > 0 {
            f.violations.push(format!(
                "watcher {} (session {i}) was shown {} groups twice",
                session.watcher, session.repeated
            ));
        }
    }
    let lags: usize = sessions.iter().map(|s| s.lags.len()).sum();
    let cut = sessions.iter().filter(|s| s.cut_off.is_some()).count();
    let events: u64 = sessions.iter().map(|s| s.events).sum();
    f.lines.push(format!(
        "watchers: {watcher_count} watchers, {} sessions ({cut} cut off and reconnected, {} failed \
         connects), {events} events, lag notices {lags}",
        sessions.len(),
        watchers.failed_connects()
    ));
    f
}
