//! The scorer: final poses in, a verdict out. Pure, so the browser previews with it and the
//! server judges with it.
//!
//! Each goal earns a credit in `0..=1`; the task's score is the weighted mean of the credits.
//! Partial credit, per kind of goal (every "excess" is how far outside the asked-for band the
//! measure is):
//! - distance, plane distance, region: 1 inside the band; otherwise `1 - excess / 1 m`, at least 0
//!   (half a metre off earns half);
//! - side of a plane: 1 or 0 (a side is right or wrong); an object within 2 cm of the plane is on
//!   neither side;
//! - relative yaw: 1 within the tolerance; otherwise `1 - excess / 30°`, at least 0;
//! - stacked: 1 when the object rests on the support's top face; otherwise up to 0.5 for being
//!   near it (`0.5 * (1 - horizontal distance / 2 m)`, at least 0).
//!
//! A goal naming an object that is not in the scene earns 0 (the verdict says why).

use serde::{Deserialize, Serialize};

use super::{Constraint, Goal, ObjectPose, Pose, Task, Vec3};

/// Credit falls to zero this far (metres) outside a distance band.
pub const DISTANCE_FALLOFF: f32 = 1.0;
/// Credit falls to zero this far (degrees) outside an orientation tolerance.
pub const YAW_FALLOFF: f32 = 30.0;
/// Objects this close to a plane (metres) are on neither side.
pub const SIDE_MARGIN: f32 = 0.02;
/// A stacked object's centre may sit this far (metres) above or below where resting exactly on
/// the support's top face puts it (contact slop, small tilts).
pub const STACK_HEIGHT_TOLERANCE: f32 = 0.08;

/// How one goal fared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConstraintVerdict {
    /// The goal's weight, copied from the task.
    pub weight: f32,
    /// 0..=1: partial credit falls off outside the wanted band.
    pub credit: f32,
    /// The goal holds exactly (full credit).
    pub satisfied: bool,
    /// What was measured, in words: `distance 1.42 m (wanted 1.20-1.60 m)`.
    pub detail: String,
}

/// The scorer's judgement of final poses against a task's goals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// The weighted mean of the credits, 0..=1.
    pub score: f32,
    /// One verdict per goal, in the task's order.
    pub goals: Vec<ConstraintVerdict>,
}

fn horizontal_distance(a: Vec3, b: Vec3) -> f32 {
    ((a[0] - b[0]).powi(2) + (a[2] - b[2]).powi(2)).sqrt()
}

fn band_credit(value: f32, min: f32, max: f32) -> (f32, bool) {
    let excess = if value < min {
        min - value
    } else if value > max {
        value - max
    } else {
        0.0
    };
    if excess <= 0.0 {
        (1.0, true)
    } else {
        ((1.0 - excess / DISTANCE_FALLOFF).max(0.0), false)
    }
}

/// The smallest angle between two yaws modulo a quarter turn, in degrees (0..=45).
pub fn quarter_turn_difference(a: f32, b: f32) -> f32 {
    let d = (a - b).rem_euclid(90.0);
    d.min(90.0 - d)
}

/// Judges final `poses` against the task's goals.
pub fn score(task: &Task, poses: &[ObjectPose]) -> Verdict {
    let pose_of = |id: &str| poses.iter().find(|p| p.id == id).map(|p| p.pose);
    let goals: Vec<ConstraintVerdict> = task
        .goals
        .iter()
        .map(|goal| judge(task, goal, &pose_of))
        .collect();
    let total_weight: f32 = goals.iter().map(|g| g.weight).sum();
    let score = if total_weight > 0.0 {
        goals.iter().map(|g| g.weight * g.credit).sum::<f32>() / total_weight
    } else {
        0.0
    };
    Verdict {
        score: score.clamp(0.0, 1.0),
        goals,
    }
}

fn judge(task: &Task, goal: &Goal, pose_of: &dyn Fn(&str) -> Option<Pose>) -> ConstraintVerdict {
    let (credit, satisfied, detail) = match judge_constraint(task, &goal.constraint, pose_of) {
        Ok(judged) => judged,
        Err(missing) => (0.0, false, format!("no object {missing:?} in the scene")),
    };
    ConstraintVerdict {
        weight: goal.weight,
        credit,
        satisfied,
        detail,
    }
}

fn judge_constraint(
    task: &Task,
    constraint: &Constraint,
    pose_of: &dyn Fn(&str) -> Option<Pose>,
) -> Result<(f32, bool, String), String> {
    let get = |id: &str| pose_of(id).ok_or_else(|| id.to_string());
    Ok(match constraint {
        Constraint::Distance {
            object,
            reference,
            min,
            max,
        } => {
            let d = horizontal_distance(get(object)?.position, get(reference)?.position);
            let (credit, ok) = band_credit(d, *min, *max);
            (
                credit,
                ok,
                format!("distance {d:.2} m (wanted {min:.2}-{max:.2} m)"),
            )
        }
        Constraint::PlaneDistance {
            object,
            plane,
            min,
            max,
        } => {
            let d = plane.coordinate(get(object)?.position).abs();
            let (credit, ok) = band_credit(d, *min, *max);
            (
                credit,
                ok,
                format!(
                    "{d:.2} m from the {} (wanted {min:.2}-{max:.2} m)",
                    plane.name()
                ),
            )
        }
        Constraint::Side {
            object,
            reference,
            plane,
            same,
        } => {
            let mine = plane.coordinate(get(object)?.position);
            let theirs = plane.coordinate(get(reference)?.position);
            let side = |v: f32| {
                if v > SIDE_MARGIN {
                    1
                } else if v < -SIDE_MARGIN {
                    -1
                } else {
                    0
                }
            };
            let wanted = if *same { side(theirs) } else { -side(theirs) };
            let ok = wanted != 0 && side(mine) == wanted;
            (
                if ok { 1.0 } else { 0.0 },
                ok,
                format!(
                    "{} = {mine:.2} m, {reference} at {} = {theirs:.2} m ({} side wanted)",
                    plane.axis_name(),
                    plane.axis_name(),
                    if *same { "same" } else { "opposite" }
                ),
            )
        }
        Constraint::Region {
            object,
            center,
            radius,
        } => {
            let p = get(object)?.position;
            let d = horizontal_distance(p, [center[0], 0.0, center[1]]);
            let (credit, ok) = band_credit(d, 0.0, *radius);
            (
                credit,
                ok,
                format!("{d:.2} m from the region's centre (radius {radius:.2} m)"),
            )
        }
        Constraint::RelativeYaw {
            object,
            reference,
            degrees,
            tolerance,
        } => {
            let relative = get(object)?.yaw_deg() - get(reference)?.yaw_deg();
            let error = quarter_turn_difference(relative, *degrees);
            let ok = error <= *tolerance;
            let credit = if ok {
                1.0
            } else {
                (1.0 - (error - tolerance) / YAW_FALLOFF).max(0.0)
            };
            (
                credit,
                ok,
                format!(
                    "turned {:.0}° relative (wanted {degrees:.0}° ± {tolerance:.0}°, modulo 90°)",
                    relative.rem_euclid(90.0)
                ),
            )
        }
        Constraint::Stacked { object, support } => {
            let top = get(object)?.position;
            let bottom = get(support)?.position;
            let shapes = task.object(object).zip(task.object(support));
            let (top_half, support_half, support_radius) = match shapes {
                Some((t, s)) => (
                    t.shape.half_height(),
                    s.shape.half_height(),
                    s.shape.top_support_radius(),
                ),
                None => return Err(object.clone()),
            };
            let h = horizontal_distance(top, bottom);
            let expected_y = bottom[1] + support_half + top_half;
            let on_top =
                (top[1] - expected_y).abs() <= STACK_HEIGHT_TOLERANCE && h <= support_radius;
            let credit = if on_top {
                1.0
            } else {
                0.5 * (1.0 - h / 2.0).max(0.0)
            };
            (
                credit,
                on_top,
                if on_top {
                    format!("resting on {support}")
                } else {
                    format!(
                        "not on {support}: {h:.2} m beside it, centre at y = {:.2} m (on top would be {expected_y:.2} m)",
                        top[1]
                    )
                },
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spatial::{ObjectSpec, Plane, Shape};

    fn cube(id: &str, x: f32, z: f32) -> ObjectSpec {
        ObjectSpec {
            id: id.into(),
            shape: Shape::Cube { size: 0.5 },
            color: [1.0, 0.0, 0.0],
            mass: 1.0,
            friction: 0.7,
            restitution: 0.1,
            position: [x, 0.25, z],
            yaw_deg: 0.0,
        }
    }

    fn task(goals: Vec<Goal>) -> Task {
        Task {
            id: "t".into(),
            seed: 0,
            difficulty: 1,
            objects: vec![cube("a", 1.0, 0.0), cube("b", -1.0, 0.0)],
            movable: vec!["a".into()],
            goals,
        }
    }

    fn at(id: &str, x: f32, y: f32, z: f32, yaw: f32) -> ObjectPose {
        ObjectPose {
            id: id.into(),
            pose: Pose::from_yaw([x, y, z], yaw),
        }
    }

    #[test]
    fn distance_credit_is_full_inside_and_falls_linearly_outside() {
        let t = task(vec![Goal {
            weight: 1.0,
            constraint: Constraint::Distance {
                object: "a".into(),
                reference: "b".into(),
                min: 1.0,
                max: 1.5,
            },
        }]);
        let b = at("b", 0.0, 0.25, 0.0, 0.0);
        let inside = score(&t, &[at("a", 1.2, 0.25, 0.0, 0.0), b.clone()]);
        assert_eq!(inside.score, 1.0);
        assert!(inside.goals[0].satisfied);
        // Height never counts: 1.2 m along the ground, high up, is still inside.
        let high = score(&t, &[at("a", 0.0, 3.0, 1.2, 0.0), b.clone()]);
        assert_eq!(high.score, 1.0);
        let half = score(&t, &[at("a", 2.0, 0.25, 0.0, 0.0), b]);
        assert!((half.score - 0.5).abs() < 1e-5, "{half:?}");
        assert!(!half.goals[0].satisfied);
    }

    #[test]
    fn side_goals_follow_the_reference_wherever_it_ends() {
        let t = task(vec![Goal {
            weight: 1.0,
            constraint: Constraint::Side {
                object: "a".into(),
                reference: "b".into(),
                plane: Plane::Yz,
                same: false,
            },
        }]);
        let opposite = [at("a", 1.0, 0.25, 0.0, 0.0), at("b", -1.0, 0.25, 0.0, 0.0)];
        assert_eq!(score(&t, &opposite).score, 1.0);
        let same = [at("a", -2.0, 0.25, 0.0, 0.0), at("b", -1.0, 0.25, 0.0, 0.0)];
        assert_eq!(score(&t, &same).score, 0.0);
        let moved_reference = [at("a", -2.0, 0.25, 0.0, 0.0), at("b", 1.0, 0.25, 0.0, 0.0)];
        assert_eq!(score(&t, &moved_reference).score, 1.0);
        let on_plane = [at("a", 0.0, 0.25, 0.0, 0.0), at("b", -1.0, 0.25, 0.0, 0.0)];
        assert_eq!(score(&t, &on_plane).score, 0.0);
    }

    #[test]
    fn yaw_is_compared_modulo_a_quarter_turn() {
        let t = task(vec![Goal {
            weight: 1.0,
            constraint: Constraint::RelativeYaw {
                object: "a".into(),
                reference: "b".into(),
                degrees: 30.0,
                tolerance: 5.0,
            },
        }]);
        let b = at("b", -1.0, 0.25, 0.0, 10.0);
        for yaw in [40.0, 130.0, -50.0, 220.0] {
            let v = score(&t, &[at("a", 1.0, 0.25, 0.0, yaw), b.clone()]);
            assert!(v.goals[0].satisfied, "yaw {yaw}: {v:?}");
        }
        let off = score(&t, &[at("a", 1.0, 0.25, 0.0, 55.0), b]);
        assert!((off.score - (1.0 - 10.0 / 30.0)).abs() < 1e-3, "{off:?}");
    }

    #[test]
    fn stacking_needs_the_object_on_the_support_and_weights_combine() {
        let t = task(vec![
            Goal {
                weight: 3.0,
                constraint: Constraint::Stacked {
                    object: "a".into(),
                    support: "b".into(),
                },
            },
            Goal {
                weight: 1.0,
                constraint: Constraint::Region {
                    object: "a".into(),
                    center: [3.0, 3.0],
                    radius: 0.5,
                },
            },
        ]);
        let stacked = [at("a", -1.0, 0.75, 0.1, 0.0), at("b", -1.0, 0.25, 0.0, 0.0)];
        let v = score(&t, &stacked);
        assert!(v.goals[0].satisfied);
        assert!(!v.goals[1].satisfied);
        assert!((v.score - 0.75).abs() < 1e-5, "{v:?}");
        let beside = [at("a", 0.0, 0.25, 0.0, 0.0), at("b", -1.0, 0.25, 0.0, 0.0)];
        let v = score(&t, &beside);
        assert!((v.goals[0].credit - 0.25).abs() < 1e-5, "{v:?}");
    }

    #[test]
    fn a_missing_object_earns_nothing_and_says_so() {
        let t = task(vec![Goal {
            weight: 1.0,
            constraint: Constraint::Region {
                object: "ghost".into(),
                center: [0.0, 0.0],
                radius: 1.0,
            },
        }]);
        let v = score(&t, &[at("a", 0.0, 0.25, 0.0, 0.0)]);
        assert_eq!(v.score, 0.0);
        assert!(v.goals[0].detail.contains("ghost"));
    }

    #[test]
    fn yaw_reads_back_from_the_quaternion() {
        for yaw in [-170.0, -45.0, 0.0, 30.0, 90.0, 179.0] {
            let pose = Pose::from_yaw([0.0; 3], yaw);
            assert!((pose.yaw_deg() - yaw).abs() < 1e-3, "{yaw}");
        }
    }
}
