//! The built-in solver: proves generated tasks solvable without seeing the planted solution.
//!
//! For each movable object in turn it searches placements on the ground (or on its support, for
//! a stacking goal) against the pure scorer: random samples, then local refinement, preferring
//! spots that still satisfy every goal a few centimetres away (so physics' small settling moves
//! do not break them) and that keep clear of other objects (so nothing is knocked over). Then it
//! runs the real physics on the resulting actions and scores the final poses; a placement that
//! scores below the bar after physics is searched again with another random stream.

use lachesis_shared::spatial::{
    ARENA_HALF_SIZE, Action, Constraint, ObjectPose, Pose, Task, score,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::physics::simulate;

/// A task counts as solved at this score or more.
pub const SOLVED_AT: f32 = 0.95;
const SAMPLES: usize = 600;
const REFINEMENTS: usize = 300;
const TRIES: u64 = 4;
/// Offsets at which a candidate must keep its credit: robustness against settling.
const PROBE: f32 = 0.06;
/// Free space wanted around a placed object (m).
const CLEARANCE: f32 = 0.12;

/// What the solver found.
#[derive(Debug, Clone, PartialEq)]
pub struct Solution {
    pub actions: Vec<Action>,
    /// The score after the physics ran to rest.
    pub score: f32,
}

fn horizontal(a: [f32; 3], b: [f32; 3]) -> f32 {
    ((a[0] - b[0]).powi(2) + (a[2] - b[2]).powi(2)).sqrt()
}

/// The best actions found for `task` (deterministic for a task).
pub fn solve(task: &Task) -> Solution {
    let mut best: Option<Solution> = None;
    for attempt in 0..TRIES {
        let mut rng = StdRng::seed_from_u64(task.seed ^ (attempt << 48) ^ 0x5EED);
        let actions = plan(task, &mut rng);
        let settled = simulate(&task.objects, &actions, 0);
        let final_poses = settled.recording.frames.last().cloned().unwrap_or_default();
        let verdict = score(task, &final_poses);
        let solution = Solution {
            actions,
            score: verdict.score,
        };
        if solution.score >= SOLVED_AT {
            return solution;
        }
        if best.as_ref().is_none_or(|b| solution.score > b.score) {
            best = Some(solution);
        }
    }
    best.expect("at least one try")
}

/// Intended placements for every movable object, as actions.
fn plan(task: &Task, rng: &mut StdRng) -> Vec<Action> {
    let mut poses = task.start_poses();
    let mut actions = Vec::new();
    for id in &task.movable {
        let Some(spec) = task.object(id) else {
            continue;
        };
        let own_goals: Vec<_> = task
            .goals
            .iter()
            .filter(|g| g.constraint.subject() == id)
            .cloned()
            .collect();
        let sub_task = Task {
            goals: own_goals.clone(),
            ..task.clone()
        };
        let pose_of = |poses: &[ObjectPose], other: &str| {
            poses.iter().find(|p| p.id == other).map(|p| p.pose)
        };
        // A yaw goal fixes the yaw; a stacking goal fixes the spot.
        let mut yaw = spec.yaw_deg;
        for goal in &own_goals {
            if let Constraint::RelativeYaw {
                reference, degrees, ..
            } = &goal.constraint
                && let Some(r) = pose_of(&poses, reference)
            {
                yaw = r.yaw_deg() + degrees;
            }
        }
        let stacked_on = own_goals.iter().find_map(|g| match &g.constraint {
            Constraint::Stacked { support, .. } => pose_of(&poses, support),
            _ => None,
        });
        let radius = spec.shape.footprint_radius();
        let others: Vec<(usize, [f32; 3], f32)> = task
            .objects
            .iter()
            .enumerate()
            .filter(|(_, o)| o.id != *id)
            .filter_map(|(i, o)| {
                pose_of(&poses, &o.id).map(|p| (i, p.position, o.shape.footprint_radius()))
            })
            .collect();
        let evaluate = |poses: &mut Vec<ObjectPose>, x: f32, z: f32| -> f32 {
            let mut total = 0.0;
            for (dx, dz) in [
                (0.0, 0.0),
                (PROBE, 0.0),
                (-PROBE, 0.0),
                (0.0, PROBE),
                (0.0, -PROBE),
            ] {
                set_pose(poses, id, [x + dx, spec.shape.half_height(), z + dz], yaw);
                total += score(&sub_task, poses).score;
            }
            let crowding: f32 = others
                .iter()
                .map(|(_, c, r)| (radius + r + CLEARANCE - horizontal(*c, [x, 0.0, z])).max(0.0))
                .sum();
            total / 5.0 - crowding * 2.0
        };
        let (x, z) = if let Some(support) = stacked_on {
            (support.position[0], support.position[2])
        } else {
            let limit = ARENA_HALF_SIZE - radius;
            let mut best = (spec.position[0], spec.position[2]);
            let mut best_value = evaluate(&mut poses, best.0, best.1);
            for _ in 0..SAMPLES {
                let candidate = (
                    rng.random_range(-limit..limit),
                    rng.random_range(-limit..limit),
                );
                let value = evaluate(&mut poses, candidate.0, candidate.1);
                if value > best_value {
                    (best, best_value) = (candidate, value);
                }
            }
            let mut step = 0.5;
            for _ in 0..REFINEMENTS {
                let candidate = (
                    (best.0 + rng.random_range(-step..step)).clamp(-limit, limit),
                    (best.1 + rng.random_range(-step..step)).clamp(-limit, limit),
                );
                let value = evaluate(&mut poses, candidate.0, candidate.1);
                if value > best_value {
                    (best, best_value) = (candidate, value);
                } else {
                    step = (step * 0.99).max(0.02);
                }
            }
            best
        };
        let y = stacked_on.map(|s| s.position[1]);
        set_pose(
            &mut poses,
            id,
            [x, y.unwrap_or(0.0) + spec.shape.half_height(), z],
            yaw,
        );
        if (yaw - spec.yaw_deg).abs() > f32::EPSILON {
            actions.push(Action::Rotate {
                object: id.clone(),
                yaw_deg: yaw,
            });
        }
        actions.push(Action::Move {
            object: id.clone(),
            x,
            z,
            y: None,
        });
    }
    actions
}

fn set_pose(poses: &mut [ObjectPose], id: &str, position: [f32; 3], yaw: f32) {
    if let Some(p) = poses.iter_mut().find(|p| p.id == id) {
        p.pose = Pose::from_yaw(position, yaw);
    }
}

/// Solves `tasks` tasks per difficulty from `seed` on: (solved, total) per difficulty.
pub fn solve_rate(difficulty: u8, tasks: u64, seed: u64) -> (u64, u64) {
    let solved = (0..tasks)
        .filter(|i| {
            let task = super::generate::generate(seed.wrapping_add(*i), difficulty);
            solve(&task).score >= SOLVED_AT
        })
        .count() as u64;
    (solved, tasks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_solver_solves_nearly_every_task_at_every_difficulty() {
        for difficulty in 1..=4u8 {
            let (solved, total) = solve_rate(difficulty, 20, 1_000);
            assert!(
                solved * 100 >= total * 95,
                "difficulty {difficulty}: {solved}/{total}"
            );
        }
    }

    #[test]
    fn solutions_only_touch_movable_objects() {
        let task = super::super::generate::generate(5, 4);
        let solution = solve(&task);
        assert!(solution.actions.iter().all(|a| task.is_movable(a.object())));
        assert!(solution.score >= SOLVED_AT, "{solution:?}");
    }
}
