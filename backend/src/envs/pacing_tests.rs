//! The runner's decisions: when to stop, pause, how many workers to keep, which groups to send.

use super::*;
use serde_json::json;

fn status(current_step: i64, queue_size: i64) -> StatusEnv {
    StatusEnv {
        current_step,
        queue_size,
        unallocated_fraction: 1.0,
        self_queue_size: queue_size,
        max_group_size: 4,
        env_weight: 1.0,
    }
}

fn limits() -> Limits {
    Limits {
        group_size: 4,
        batch_size: 16,
        max_batches_offpolicy: 3,
        min_batch_allocation: None,
        max_workers: 8,
        total_steps: 100,
    }
}

fn group(scores: &[f64], len: usize) -> ScoredData {
    ScoredData {
        tokens: vec![vec![1; len]; scores.len()],
        masks: vec![vec![-100; len]; scores.len()],
        scores: scores.to_vec(),
        ..ScoredData::default()
    }
}

#[test]
fn an_empty_queue_gets_all_the_workers_allowed() {
    assert_eq!(plan(&status(0, 0), &limits()), Plan::Workers(8));
}

#[test]
fn workers_are_bounded_by_the_off_policy_budget_left() {
    // 3 batches of 16 sequences = 12 groups of 4; 7 queued leaves room for 5.
    assert_eq!(plan(&status(0, 7), &limits()), Plan::Workers(5));
    assert_eq!(plan(&status(0, 11), &limits()), Plan::Workers(1));
}

#[test]
fn a_queue_holding_max_batches_offpolicy_batches_pauses_the_env() {
    // 12 groups of 4 = 48 sequences = 3 batches of 16.
    assert_eq!(plan(&status(0, 12), &limits()), Plan::Pause);
    assert_eq!(plan(&status(0, 30), &limits()), Plan::Pause);
}

#[test]
fn zero_max_batches_offpolicy_means_no_bound() {
    let unbounded = Limits {
        max_batches_offpolicy: 0,
        ..limits()
    };
    assert_eq!(plan(&status(0, 20), &unbounded), Plan::Workers(8));
}

#[test]
fn an_unknown_batch_size_pauses() {
    let unknown = Limits {
        batch_size: -1,
        ..limits()
    };
    assert_eq!(plan(&status(0, 0), &unknown), Plan::Pause);
}

#[test]
fn the_runner_stops_once_the_queued_steps_pass_total_steps() {
    // Step 99 with 2 batches queued is past step 100; step 100 with nothing queued is not.
    assert_eq!(plan(&status(99, 8), &limits()), Plan::Stop);
    assert_eq!(plan(&status(100, 0), &limits()), Plan::Workers(8));
    assert_eq!(plan(&status(101, 0), &limits()), Plan::Stop);
    let endless = Limits {
        total_steps: -1,
        ..limits()
    };
    assert_eq!(plan(&status(10_000, 0), &endless), Plan::Workers(8));
}

#[test]
fn a_minimum_allocation_keeps_workers_running_until_the_env_has_its_share() {
    let reserved = Limits {
        min_batch_allocation: Some(0.5),
        ..limits()
    };
    // The queue is full of other envs' groups and this env has none queued: keep filling.
    let mut s = status(0, 12);
    s.self_queue_size = 0;
    s.unallocated_fraction = 0.5;
    assert!(matches!(plan(&s, &reserved), Plan::Workers(n) if n > 0));
    // With its share (0.5 · 16 · 3 / 4 = 6 groups) queued, it pauses like everyone else.
    s.self_queue_size = 6;
    assert_eq!(plan(&s, &reserved), Plan::Pause);
}

#[test]
fn groups_with_identical_scores_are_dropped_unless_allowed() {
    assert_eq!(
        check_group(&group(&[1.0, 1.0], 8), 2, true, 100),
        Verdict::SameScores
    );
    assert_eq!(
        check_group(&group(&[0.0; 4], 8), 4, true, 100),
        Verdict::SameScores
    );
    assert_eq!(
        check_group(&group(&[1.0, 1.0], 8), 2, false, 100),
        Verdict::Send
    );
    assert_eq!(
        check_group(&group(&[1.0, 0.0], 8), 2, true, 100),
        Verdict::Send
    );
}

#[test]
fn a_group_of_one_is_never_dropped_for_equal_scores_atropos_issue_34() {
    assert_eq!(check_group(&group(&[1.0], 8), 1, true, 100), Verdict::Send);
}

#[test]
fn sequences_at_or_over_max_token_len_drop_the_group() {
    assert_eq!(
        check_group(&group(&[1.0, 0.0], 100), 2, true, 100),
        Verdict::TooLong {
            longest: 100,
            limit: 100
        }
    );
    assert_eq!(
        check_group(&group(&[1.0, 0.0], 99), 2, true, 100),
        Verdict::Send
    );
    // The trainer set no limit.
    assert_eq!(
        check_group(&group(&[1.0, 0.0], 10_000), 2, true, -1),
        Verdict::Send
    );
}

#[test]
fn the_group_size_is_checked_against_the_override_when_present() {
    assert_eq!(
        check_group(&group(&[1.0, 0.0, 0.5], 8), 4, true, 100),
        Verdict::WrongSize {
            expected: 4,
            actual: 3
        }
    );
    let mut overridden = group(&[1.0, 0.0, 0.5], 8);
    overridden.group_overrides = Some(serde_json::Map::from_iter([(
        "group_size".to_string(),
        json!(3),
    )]));
    assert_eq!(check_group(&overridden, 4, true, 100), Verdict::Send);
    let mut ragged = group(&[1.0, 0.0], 8);
    ragged.scores.pop();
    assert!(matches!(
        check_group(&ragged, 2, true, 100),
        Verdict::WrongSize { .. }
    ));
}
