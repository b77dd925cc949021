//! Batch formation, as atroposlib 0.4.0 does it (`atroposlib/api/utils.py`), as pure functions over
//! group metadata. The database layer feeds these the queue in order and stores what they decide.
//!
//! The rules, kept exactly so that trainers see the same batches as with Atropos:
//! - A group is never split. Groups are bundled into "packs" of `max_group_size` sequences (groups of
//!   one size, in queue order, until they fill the largest group size present), and a batch takes whole
//!   packs in the order they completed until it holds exactly `batch_size` sequences.
//! - With minimum allocations, each env's minimum share is filled from its own packable groups first,
//!   then the rest of the batch from packable groups of any env, in queue order.
//! - A group whose size differs from its env's `group_size` waits in a per-env buffer until some
//!   buffered groups sum exactly to `group_size` (FIFO first, then any subset).

/// What batch formation needs to know about a queued group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueuedGroup {
    pub id: i64,
    pub env_id: Option<i64>,
    pub n_seqs: usize,
}

/// What batch formation needs to know about a registered env.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EnvShare {
    pub env_id: i64,
    pub connected: bool,
    pub min_batch_allocation: Option<f64>,
}

/// Indices (into `sizes`) of buffered groups that together hold exactly `target` sequences, in FIFO
/// order; empty when no subset fits. FIFO greedy first, then a subset-sum search.
pub fn find_groups_summing_to_target(sizes: &[usize], target: usize) -> Vec<usize> {
    if sizes.is_empty() {
        return Vec::new();
    }
    let mut sum = 0;
    let mut fifo = Vec::new();
    for (i, &size) in sizes.iter().enumerate() {
        if sum + size <= target {
            fifo.push(i);
            sum += size;
            if sum == target {
                return fifo;
            }
        }
    }
    // reachable[i][j]: some subset of the first i groups holds exactly j sequences.
    let n = sizes.len();
    let width = target + 1;
    let mut reachable = vec![false; (n + 1) * width];
    reachable[0] = true;
    for i in 1..=n {
        for j in 0..width {
            let skip = reachable[(i - 1) * width + j];
            let take = j >= sizes[i - 1] && reachable[(i - 1) * width + j - sizes[i - 1]];
            reachable[i * width + j] = skip || take;
        }
    }
    if !reachable[n * width + target] {
        return Vec::new();
    }
    let mut picked = Vec::new();
    let mut j = target;
    for i in (1..=n).rev() {
        if j >= sizes[i - 1] && reachable[(i - 1) * width + j - sizes[i - 1]] {
            picked.push(i - 1);
            j -= sizes[i - 1];
        }
    }
    picked.sort_unstable();
    picked
}

/// One batch of exactly `batch_size` sequences from the queue, without minimum allocations.
/// Returns indices into `queue`, in batch order, or `None` when no exact batch can be formed.
pub fn grab_exact(queue: &[QueuedGroup], batch_size: usize) -> Option<Vec<usize>> {
    if queue.is_empty() {
        return None;
    }
    let total: usize = queue.iter().map(|g| g.n_seqs).sum();
    let max_group_size = queue.iter().map(|g| g.n_seqs).max().unwrap_or(0);
    if total < batch_size {
        return None;
    }
    // Packs complete in queue order; the batch takes whole packs in completion order. Scanning can
    // stop once enough packs are complete: later packs only ever go after them.
    let mut open_packs: Vec<(usize, Vec<usize>)> = Vec::new();
    let mut batch = Vec::new();
    let mut running = 0;
    for (i, group) in queue.iter().enumerate() {
        let size = group.n_seqs;
        let slot = match open_packs.iter().position(|(s, _)| *s == size) {
            Some(slot) => slot,
            None => {
                open_packs.push((size, Vec::new()));
                open_packs.len() - 1
            }
        };
        let pack = &mut open_packs[slot].1;
        pack.push(i);
        if pack.len() * size == max_group_size {
            for idx in pack.drain(..) {
                batch.push(idx);
                running += queue[idx].n_seqs;
                if running == batch_size {
                    return Some(batch);
                }
                if running > batch_size {
                    // atroposlib gives up rather than split a pack across batches.
                    return None;
                }
            }
        }
    }
    None
}

/// One batch honouring each connected env's `min_batch_allocation`, as atroposlib's
/// `grab_batch_with_minimum_allocations`. Groups without an env id are never packed in this mode.
pub fn grab_with_minimum_allocations(
    queue: &[QueuedGroup],
    batch_size: usize,
    envs: &[EnvShare],
) -> Option<Vec<usize>> {
    if queue.is_empty() {
        return None;
    }
    // env id -> minimum share, in registration order (atroposlib iterates a dict built in that order).
    let mut min_shares: Vec<(i64, f64)> = Vec::new();
    for env in envs {
        if let (true, Some(share)) = (env.connected, env.min_batch_allocation) {
            match min_shares.iter_mut().find(|(id, _)| *id == env.env_id) {
                Some(entry) => entry.1 = share,
                None => min_shares.push((env.env_id, share)),
            }
        }
    }
    if min_shares.is_empty() {
        return grab_exact(queue, batch_size);
    }
    let max_group_size = queue.iter().map(|g| g.n_seqs).max().unwrap_or(0);

    // Per env (in first-seen order): open packs by size, and the groups of completed packs.
    struct EnvPacks {
        env_id: i64,
        open: Vec<(usize, Vec<usize>)>,
        packable: Vec<usize>,
    }
    let mut by_env: Vec<EnvPacks> = Vec::new();
    for (i, group) in queue.iter().enumerate() {
        let Some(env_id) = group.env_id else { continue };
        let slot = match by_env.iter().position(|e| e.env_id == env_id) {
            Some(slot) => slot,
            None => {
                by_env.push(EnvPacks {
                    env_id,
                    open: Vec::new(),
                    packable: Vec::new(),
                });
                by_env.len() - 1
            }
        };
        let env = &mut by_env[slot];
        let size = group.n_seqs;
        let pack_slot = match env.open.iter().position(|(s, _)| *s == size) {
            Some(p) => p,
            None => {
                env.open.push((size, Vec::new()));
                env.open.len() - 1
            }
        };
        let pack = &mut env.open[pack_slot].1;
        pack.push(i);
        if pack.len() * size == max_group_size {
            let done: Vec<usize> = std::mem::take(pack);
            env.packable.extend(done);
        }
    }
    let packs_of = |env_id: i64| by_env.iter().find(|e| e.env_id == env_id);

    let mut min_seqs: Vec<(i64, usize)> = Vec::new();
    let mut total_min = 0usize;
    for &(env_id, share) in &min_shares {
        // Python's int() truncates toward zero; negative shares ask for nothing.
        let wanted = (batch_size as f64 * share).trunc();
        if wanted >= 1.0 {
            let env = packs_of(env_id)?;
            if env.packable.is_empty() {
                return None;
            }
            let wanted = wanted.min(usize::MAX as f64) as usize;
            min_seqs.push((env_id, wanted));
            total_min = total_min.saturating_add(wanted);
        }
    }
    if total_min > batch_size {
        let scale = batch_size as f64 / total_min as f64;
        for (env_id, wanted) in min_seqs.iter_mut() {
            if let Some(env) = packs_of(*env_id).filter(|e| !e.packable.is_empty()) {
                let smallest = env
                    .packable
                    .iter()
                    .map(|&i| queue[i].n_seqs)
                    .min()
                    .unwrap_or(0);
                *wanted = smallest.max((*wanted as f64 * scale).trunc() as usize);
            }
        }
    }

    let mut taken = vec![false; queue.len()];
    let mut batch = Vec::new();
    let mut total = 0usize;
    for &(env_id, wanted) in &min_seqs {
        let Some(env) = packs_of(env_id) else {
            continue;
        };
        let mut from_env = 0usize;
        for &idx in &env.packable {
            if from_env >= wanted {
                break;
            }
            let size = queue[idx].n_seqs;
            if total + size <= batch_size {
                batch.push(idx);
                taken[idx] = true;
                from_env += size;
                total += size;
            }
        }
    }
    if total < batch_size {
        let mut packable = vec![false; queue.len()];
        for env in &by_env {
            for &idx in &env.packable {
                packable[idx] = true;
            }
        }
        for idx in 0..queue.len() {
            if taken[idx] || !packable[idx] {
                continue;
            }
            let size = queue[idx].n_seqs;
            if total + size <= batch_size {
                batch.push(idx);
                taken[idx] = true;
                total += size;
            }
            if total == batch_size {
                break;
            }
        }
    }
    (total == batch_size).then_some(batch)
}

/// Forms every batch the queue allows, as one `/batch` call does in atroposlib. Returns the batches
/// (groups in batch order) and what stays queued, in queue order.
pub fn form_batches(
    mut queue: Vec<QueuedGroup>,
    batch_size: usize,
    envs: &[EnvShare],
) -> (Vec<Vec<QueuedGroup>>, Vec<QueuedGroup>) {
    let mut batches = Vec::new();
    if batch_size == 0 {
        return (batches, queue);
    }
    // atroposlib switches mode when any env (connected or not) declared a minimum allocation.
    let with_minimums = envs.iter().any(|e| e.min_batch_allocation.is_some());
    loop {
        let picked = if with_minimums {
            grab_with_minimum_allocations(&queue, batch_size, envs)
        } else {
            grab_exact(&queue, batch_size)
        };
        let Some(indices) = picked else { break };
        let mut in_batch = vec![false; queue.len()];
        let batch: Vec<QueuedGroup> = indices
            .iter()
            .map(|&i| {
                in_batch[i] = true;
                queue[i]
            })
            .collect();
        let mut position = 0;
        queue.retain(|_| {
            let keep = !in_batch[position];
            position += 1;
            keep
        });
        batches.push(batch);
    }
    (batches, queue)
}

#[cfg(test)]
#[path = "packing_tests.rs"]
mod tests;
