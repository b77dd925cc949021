//! The figures `/status-env` reports to an environment worker, computed as atroposlib 0.4.0 does
//! (`get_status_env` in `atroposlib/api/server.py`). Workers size their rollout pools from these, so
//! the arithmetic (integer divisions, the 0.01 weight floor, packs per env) is kept exactly.

use lachesis_shared::atropos::StatusEnv;

/// Below this, an env's share of the rollout budget is raised: no env starves completely.
pub const MIN_ENV_WEIGHT: f64 = 0.01;

#[derive(Debug, Clone, PartialEq)]
pub struct EnvFigures {
    pub env_id: i64,
    pub max_context_len: i64,
    pub weight: f64,
    pub group_size: i64,
    pub min_batch_allocation: Option<f64>,
    pub connected: bool,
}

/// The queued groups of one env (or of none), summed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueuedByEnv {
    pub env_id: Option<i64>,
    pub sequences: i64,
    pub largest_group: i64,
}

/// `/status-env` for `env` (which must be in `envs`), and the env's group size as it should be
/// stored afterwards: atroposlib raises it to the largest group that env has queued.
pub fn status_env(
    env: &EnvFigures,
    envs: &[EnvFigures],
    queue: &[QueuedByEnv],
    current_step: i64,
    batch_size: i64,
) -> (StatusEnv, i64) {
    let total: f64 = envs
        .iter()
        .filter(|e| e.connected)
        .map(|e| e.max_context_len as f64 * e.weight.max(0.0))
        .sum();
    // atroposlib divides by zero here (HTTP 500) when no connected env has weight; we floor instead.
    let share = if total > 0.0 {
        env.max_context_len as f64 * env.weight / total
    } else {
        0.0
    };
    let env_weight = share.max(MIN_ENV_WEIGHT);

    let total_min: f64 = envs
        .iter()
        .filter(|e| e.connected)
        .filter_map(|e| e.min_batch_allocation)
        .sum();
    let unallocated_fraction = 1.0 - total_min.min(1.0);

    let mut max_group_size = 1;
    let mut env_group_size = env.group_size;
    let mut self_sequences = 0;
    for q in queue {
        max_group_size = max_group_size.max(q.largest_group);
        if q.env_id == Some(env.env_id) {
            env_group_size = env_group_size.max(q.largest_group);
            self_sequences += q.sequences;
        }
    }

    let min_sequences = |id: Option<i64>| -> i64 {
        envs.iter()
            .filter(|e| e.connected && Some(e.env_id) == id)
            .filter_map(|e| e.min_batch_allocation)
            .map(|share| (batch_size as f64 * share).trunc() as i64)
            .next_back()
            .unwrap_or(0)
    };
    // Sequences of other envs, packed, beyond their reserved minimums: this env competes for those.
    let mut available_from_others = 0;
    if max_group_size > 1 {
        for q in queue.iter().filter(|q| q.env_id != Some(env.env_id)) {
            let packs = (q.sequences + max_group_size - 1) / max_group_size;
            available_from_others += (packs * max_group_size - min_sequences(q.env_id)).max(0);
        }
    }
    let env_queue_size = self_sequences + available_from_others;
    // Registration rejects group sizes below 1, so these divisions are safe.
    let divisor = env_group_size.max(1);
    let figures = StatusEnv {
        current_step,
        queue_size: env_queue_size.div_euclid(divisor),
        unallocated_fraction,
        self_queue_size: self_sequences.div_euclid(divisor),
        max_group_size,
        env_weight,
    };
    (figures, env_group_size)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(env_id: i64, ctx: i64, weight: f64, group_size: i64, min: Option<f64>) -> EnvFigures {
        EnvFigures {
            env_id,
            max_context_len: ctx,
            weight,
            group_size,
            min_batch_allocation: min,
            connected: true,
        }
    }

    fn by_env(env_id: Option<i64>, sequences: i64, largest_group: i64) -> QueuedByEnv {
        QueuedByEnv {
            env_id,
            sequences,
            largest_group,
        }
    }

    #[test]
    fn weight_is_the_share_of_context_times_weight() {
        let envs = [env(0, 1000, 1.0, 4, None), env(1, 3000, 1.0, 4, None)];
        let (figures, _) = status_env(&envs[0], &envs, &[], 7, 16);
        assert_eq!(figures.env_weight, 0.25);
        assert_eq!(figures.current_step, 7);
        assert_eq!(figures.unallocated_fraction, 1.0);
        assert_eq!(figures.max_group_size, 1);
    }

    #[test]
    fn a_tiny_env_still_gets_the_floor_weight() {
        let envs = [env(0, 1, 0.001, 4, None), env(1, 100_000, 1.0, 4, None)];
        let (figures, _) = status_env(&envs[0], &envs, &[], 0, 16);
        assert_eq!(figures.env_weight, MIN_ENV_WEIGHT);
    }

    #[test]
    fn queue_sizes_count_own_groups_and_packed_groups_of_others() {
        let envs = [env(0, 10, 1.0, 4, None), env(1, 10, 1.0, 2, Some(0.25))];
        // Own: 4+4 sequences. Env 1: 2+2+2 = 6 -> 2 packs of 4 = 8, minus its minimum of 16*0.25=4.
        let queue = [by_env(Some(0), 8, 4), by_env(Some(1), 6, 2)];
        let (figures, group_size) = status_env(&envs[0], &envs, &queue, 0, 16);
        assert_eq!(figures.self_queue_size, 2);
        assert_eq!(figures.queue_size, (8 + 4) / 4);
        assert_eq!(figures.max_group_size, 4);
        assert_eq!(figures.unallocated_fraction, 0.75);
        assert_eq!(group_size, 4);
    }

    #[test]
    fn an_env_sending_bigger_groups_has_its_group_size_raised() {
        let envs = [env(0, 10, 1.0, 4, None)];
        let (figures, group_size) = status_env(&envs[0], &envs, &[by_env(Some(0), 8, 8)], 0, 16);
        assert_eq!(group_size, 8);
        assert_eq!(figures.self_queue_size, 1);
    }

    #[test]
    fn no_weighted_env_floors_instead_of_failing() {
        let mut lonely = env(0, 10, 0.0, 4, None);
        lonely.connected = false;
        let (figures, _) = status_env(&lonely, std::slice::from_ref(&lonely), &[], 0, 16);
        assert_eq!(figures.env_weight, MIN_ENV_WEIGHT);
    }
}
