use super::*;
use proptest::prelude::*;

fn queue_of(sizes: &[usize]) -> Vec<QueuedGroup> {
    sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| QueuedGroup {
            id: i as i64,
            env_id: Some(0),
            n_seqs: n,
        })
        .collect()
}

fn ids(groups: &[QueuedGroup]) -> Vec<i64> {
    groups.iter().map(|g| g.id).collect()
}

#[test]
fn equal_groups_fill_batches_in_queue_order() {
    let (batches, rest) = form_batches(queue_of(&[4, 4, 4, 4, 4]), 8, &[]);
    assert_eq!(
        batches.iter().map(|b| ids(b)).collect::<Vec<_>>(),
        vec![vec![0, 1], vec![2, 3]]
    );
    assert_eq!(ids(&rest), vec![4]);
}

#[test]
fn small_groups_are_bundled_into_packs_of_the_largest_size() {
    // Sizes 2,4,2: the two 2s form a pack of 4 only once the second arrives, so the 4 goes first.
    let picked = grab_exact(&queue_of(&[2, 4, 2]), 4).unwrap();
    assert_eq!(picked, vec![1]);
    let picked = grab_exact(&queue_of(&[2, 4, 2]), 8).unwrap();
    assert_eq!(picked, vec![1, 0, 2]);
}

#[test]
fn a_group_that_cannot_complete_a_pack_never_leaves() {
    // 3 never multiplies up to 4, so only the 4s are batchable.
    let (batches, rest) = form_batches(queue_of(&[3, 4, 4]), 4, &[]);
    assert_eq!(batches.len(), 2);
    assert_eq!(ids(&rest), vec![0]);
}

#[test]
fn too_few_sequences_form_no_batch() {
    assert_eq!(grab_exact(&queue_of(&[4, 4]), 16), None);
    assert_eq!(grab_exact(&[], 4), None);
}

#[test]
fn a_pack_larger_than_the_batch_is_not_split() {
    assert_eq!(grab_exact(&queue_of(&[8, 8]), 4), None);
}

#[test]
fn fifo_subset_is_preferred_for_buffered_groups() {
    assert_eq!(find_groups_summing_to_target(&[2, 2, 4], 4), vec![0, 1]);
    // FIFO takes 3 then cannot reach 4 with 2; the search finds 2+2.
    assert_eq!(find_groups_summing_to_target(&[3, 2, 2], 4), vec![1, 2]);
    assert!(find_groups_summing_to_target(&[3, 3], 4).is_empty());
    assert!(find_groups_summing_to_target(&[], 4).is_empty());
}

fn two_envs(min0: Option<f64>, min1: Option<f64>) -> Vec<EnvShare> {
    vec![
        EnvShare {
            env_id: 0,
            connected: true,
            min_batch_allocation: min0,
        },
        EnvShare {
            env_id: 1,
            connected: true,
            min_batch_allocation: min1,
        },
    ]
}

fn env_queue(spec: &[(i64, usize)]) -> Vec<QueuedGroup> {
    spec.iter()
        .enumerate()
        .map(|(i, &(env, n))| QueuedGroup {
            id: i as i64,
            env_id: Some(env),
            n_seqs: n,
        })
        .collect()
}

#[test]
fn minimum_allocation_reserves_a_share_for_a_slow_env() {
    // Env 0 floods the queue; env 1 asks for at least half of every batch.
    let queue = env_queue(&[(0, 2), (0, 2), (0, 2), (0, 2), (1, 2), (1, 2)]);
    let picked = grab_with_minimum_allocations(&queue, 4, &two_envs(None, Some(0.5))).unwrap();
    assert_eq!(picked, vec![4, 0]);
}

#[test]
fn an_env_with_a_minimum_and_nothing_queued_blocks_batches() {
    let queue = env_queue(&[(0, 2), (0, 2)]);
    assert_eq!(
        grab_with_minimum_allocations(&queue, 4, &two_envs(None, Some(0.5))),
        None
    );
}

#[test]
fn disconnected_minimums_fall_back_to_exact_packing() {
    let mut envs = two_envs(None, Some(0.5));
    envs[1].connected = false;
    let queue = env_queue(&[(0, 2), (0, 2)]);
    assert_eq!(
        grab_with_minimum_allocations(&queue, 4, &envs),
        Some(vec![0, 1])
    );
}

#[test]
fn groups_without_env_are_not_packed_under_minimums() {
    let mut queue = env_queue(&[(0, 2), (1, 2), (1, 2)]);
    queue[0].env_id = None;
    let picked = grab_with_minimum_allocations(&queue, 4, &two_envs(None, Some(0.5))).unwrap();
    assert_eq!(picked, vec![1, 2]);
}

fn assert_conserved(original: &[QueuedGroup], batches: &[Vec<QueuedGroup>], rest: &[QueuedGroup]) {
    let mut seen: Vec<i64> = batches.iter().flatten().map(|g| g.id).collect();
    seen.extend(rest.iter().map(|g| g.id));
    seen.sort_unstable();
    let mut expected = ids(original);
    expected.sort_unstable();
    assert_eq!(
        seen, expected,
        "every group is batched once or stays queued"
    );
    let kept: Vec<i64> = original
        .iter()
        .map(|g| g.id)
        .filter(|id| rest.iter().any(|r| r.id == *id))
        .collect();
    assert_eq!(ids(rest), kept, "what stays queued keeps its order");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn batches_hold_exactly_batch_size_and_lose_nothing(
        sizes in prop::collection::vec(prop::sample::select(vec![1usize, 2, 4, 8, 16]), 0..120),
        batch_exp in 0u32..6,
    ) {
        let batch_size = 1usize << batch_exp;
        let queue = queue_of(&sizes);
        let (batches, rest) = form_batches(queue.clone(), batch_size, &[]);
        for batch in &batches {
            prop_assert_eq!(batch.iter().map(|g| g.n_seqs).sum::<usize>(), batch_size);
        }
        assert_conserved(&queue, &batches, &rest);
        // Uniform groups that divide the batch leave less than one batch behind.
        if let Some(&first) = sizes.first()
            && sizes.iter().all(|&s| s == first)
            && first <= batch_size
        {
            prop_assert!(rest.iter().map(|g| g.n_seqs).sum::<usize>() < batch_size);
        }
    }

    #[test]
    fn minimum_allocations_also_hold_exactly_batch_size(
        spec in prop::collection::vec((0i64..3, prop::sample::select(vec![1usize, 2, 4])), 0..80),
        shares in prop::collection::vec(prop::option::of(0.0f64..0.8), 3),
        batch_exp in 1u32..5,
    ) {
        let batch_size = 1usize << batch_exp;
        let queue = env_queue(&spec);
        let envs: Vec<EnvShare> = shares
            .iter()
            .enumerate()
            .map(|(i, &s)| EnvShare { env_id: i as i64, connected: true, min_batch_allocation: s })
            .collect();
        let (batches, rest) = form_batches(queue.clone(), batch_size, &envs);
        for batch in &batches {
            prop_assert_eq!(batch.iter().map(|g| g.n_seqs).sum::<usize>(), batch_size);
        }
        assert_conserved(&queue, &batches, &rest);
    }

    #[test]
    fn buffered_subsets_sum_exactly_or_none_exists(
        sizes in prop::collection::vec(1usize..9, 0..12),
        target in 1usize..17,
    ) {
        let picked = find_groups_summing_to_target(&sizes, target);
        if picked.is_empty() {
            // Brute force: no subset of the buffer sums to the target.
            let n = sizes.len();
            for mask in 1u32..(1 << n) {
                let sum: usize = (0..n).filter(|i| mask & (1 << i) != 0).map(|i| sizes[i]).sum();
                prop_assert_ne!(sum, target);
            }
        } else {
            prop_assert!(picked.windows(2).all(|w| w[0] < w[1]));
            prop_assert_eq!(picked.iter().map(|&i| sizes[i]).sum::<usize>(), target);
        }
    }
}
