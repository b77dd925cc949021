//! The runner's decisions as pure functions, ported from atroposlib 0.4.0's `env_manager`,
//! `add_train_workers` and `handle_send_to_api`: when to stop, when to pause, how many `collect`
//! calls to keep in flight, and which finished groups to send.

use lachesis_shared::atropos::{ScoredData, StatusEnv};

/// The limits one poll's decision depends on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub group_size: i64,
    /// The trainer's batch size; non-positive while unknown.
    pub batch_size: i64,
    pub max_batches_offpolicy: i64,
    pub min_batch_allocation: Option<f64>,
    pub max_workers: usize,
    pub total_steps: i64,
}

/// What to do after reading `/status-env`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    Stop,
    /// Cancel in-flight work (its items go to the backlog) and add none: the data would be stale.
    Pause,
    /// Keep this many `collect` calls in flight.
    Workers(usize),
}

/// `env_manager`'s decision, with `queue_size` counted in groups of this env's size.
pub fn plan(status: &StatusEnv, limits: &Limits) -> Plan {
    let Limits {
        group_size,
        batch_size,
        max_batches_offpolicy: offpolicy,
        ..
    } = *limits;
    let group_size = group_size.max(1);
    if batch_size <= 0 {
        return Plan::Pause;
    }
    let queued = status.queue_size.saturating_mul(group_size);
    if limits.total_steps > 0 && status.current_step + queued / batch_size > limits.total_steps {
        return Plan::Stop;
    }
    let own_quota_met = limits.min_batch_allocation.is_none_or(|share| {
        let max_group = status.max_group_size.max(1);
        let packs = (share * batch_size as f64 * offpolicy as f64 / max_group as f64).ceil();
        packs * (max_group / group_size) as f64 - status.self_queue_size as f64 <= 0.0
    });
    if offpolicy > 0 && queued >= offpolicy.saturating_mul(batch_size) && own_quota_met {
        return Plan::Pause;
    }
    Plan::Workers(worker_budget(status, limits))
}

/// `add_train_workers`' bound: the off-policy budget left, in groups, topped up to fill this env's
/// minimum allocation. atroposlib gives no workers at all when `max_batches_offpolicy` is 0; here
/// 0 means "no off-policy bound" instead.
pub fn worker_budget(status: &StatusEnv, limits: &Limits) -> usize {
    let group_size = limits.group_size.max(1);
    let batch_size = limits.batch_size.max(0) as f64;
    let fraction = status.unallocated_fraction + limits.min_batch_allocation.unwrap_or(0.0);
    let derived_batch = (batch_size * fraction).trunc() as i64;
    let mut budget = if limits.max_batches_offpolicy > 0 {
        (limits.max_batches_offpolicy * derived_batch / group_size - status.queue_size)
            .min(limits.max_workers as i64)
    } else {
        limits.max_workers as i64
    };
    if let Some(share) = limits.min_batch_allocation {
        // Ported as atroposlib writes it (`math.ceil`, `//` with a float divisor).
        let (max_group, gs) = (status.max_group_size.max(1) as f64, group_size as f64);
        let packs = (share * batch_size * limits.max_batches_offpolicy as f64 / max_group).ceil();
        let wanted = (packs + (max_group / gs).floor()) * max_group;
        let have = (max_group * status.self_queue_size as f64 / (max_group / gs)).floor();
        let fill = ((wanted - have) / gs).ceil().max(0.0) as i64;
        budget = budget.max(fill);
    }
    budget.max(0) as usize
}

/// Why a finished group is not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Send,
    WrongSize { expected: usize, actual: usize },
    SameScores,
    TooLong { longest: usize, limit: i64 },
}

/// `handle_send_to_api`'s checks. The size expected is `group_overrides.group_size` when set.
/// A sequence of `max_token_len` tokens or more is too long (atroposlib's `>=`); a non-positive
/// `max_token_len` means the trainer set no limit.
pub fn check_group(
    group: &ScoredData,
    group_size: usize,
    ensure_scores_are_not_same: bool,
    max_token_len: i64,
) -> Verdict {
    let expected = group
        .group_overrides
        .as_ref()
        .and_then(|o| o.get("group_size"))
        .and_then(serde_json::Value::as_u64)
        .map_or(group_size, |n| n as usize);
    let actual = group.tokens.len();
    if actual != expected || group.scores.len() != actual || group.masks.len() != actual {
        return Verdict::WrongSize { expected, actual };
    }
    let first = group.scores.first().copied();
    if ensure_scores_are_not_same && actual > 1 && group.scores.iter().all(|&s| Some(s) == first) {
        return Verdict::SameScores;
    }
    let longest = group.tokens.iter().map(Vec::len).max().unwrap_or(0);
    if max_token_len > 0 && longest as i64 >= max_token_len {
        return Verdict::TooLong {
            longest,
            limit: max_token_len,
        };
    }
    Verdict::Send
}

#[cfg(test)]
#[path = "pacing_tests.rs"]
mod tests;
