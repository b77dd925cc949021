//! From a task and poses to what the viewer draws: objects, goal visuals, labels, grab handles.

use lachesis_shared::spatial::{
    ARENA_HALF_SIZE, Constraint, ObjectPose, Plane, Task, Verdict, score,
};

use super::render::{Drawn, Visual};
use super::viewer::{Grabbable, Label, SceneModel};

fn pose_of<'a>(poses: &'a [ObjectPose], id: &str) -> Option<&'a ObjectPose> {
    poses.iter().find(|p| p.id == id)
}

/// The scene for `task` at `poses`. Goal colours follow `verdict` when given (the server's), or
/// the shared scorer's preview of `poses` otherwise. `grab` lists the objects that may be dragged.
pub fn model(
    task: &Task,
    poses: &[ObjectPose],
    verdict: Option<&Verdict>,
    grab: bool,
    selected: Option<&str>,
) -> SceneModel {
    let preview;
    let verdict = match verdict {
        Some(v) => v,
        None => {
            preview = score(task, poses);
            &preview
        }
    };
    let mut m = SceneModel::default();
    for spec in &task.objects {
        let Some(p) = pose_of(poses, &spec.id) else {
            continue;
        };
        m.objects.push(Drawn {
            shape: spec.shape,
            color: spec.color,
            pose: p.pose,
            highlighted: selected == Some(spec.id.as_str()),
        });
        let [x, y, z] = p.pose.position;
        m.labels.push(Label {
            key: format!("label-{}", spec.id),
            text: spec.id.replace('_', " "),
            // The point under the object's centre where it stands: dragging that point onto a
            // goal's mark on the ground puts the object there (the label itself is drawn above).
            at: [x, y - spec.shape.half_height(), z],
        });
        if grab && task.is_movable(&spec.id) {
            m.grabbable.push(Grabbable {
                id: spec.id.clone(),
                center: [x, y, z],
                radius: spec.shape.footprint_radius().max(spec.shape.half_height()) + 0.05,
                half_height: spec.shape.half_height(),
            });
        }
    }
    for (i, goal) in task.goals.iter().enumerate() {
        let ok = verdict.goals.get(i).is_some_and(|g| g.satisfied);
        // Where the goal's object and the object it refers to stand (when they are in the scene).
        let at = |id: &str| pose_of(poses, id).map(|p| p.pose.position);
        let object = at(goal.constraint.subject());
        let reference = goal.constraint.reference().and_then(at);
        let number = format!("{}", i + 1);
        match &goal.constraint {
            Constraint::Region { center, radius, .. } => {
                m.visuals.push(Visual::Disc {
                    center: *center,
                    radius: *radius,
                    ok,
                });
                m.labels.push(Label {
                    key: format!("goal-{i}"),
                    text: number,
                    at: [center[0], 0.02, center[1]],
                });
            }
            Constraint::Distance { min, max, .. } => {
                if let (Some(a), Some(r)) = (object, reference) {
                    m.visuals.push(Visual::Ring {
                        center: [r[0], r[2]],
                        inner: *min,
                        outer: *max,
                        ok,
                    });
                    m.visuals.push(Visual::Line {
                        from: [a[0], 0.03, a[2]],
                        to: [r[0], 0.03, r[2]],
                        ok,
                    });
                    let mid = [(a[0] + r[0]) / 2.0, 0.05, (a[2] + r[2]) / 2.0];
                    m.labels.push(Label {
                        key: format!("goal-{i}"),
                        text: number,
                        at: mid,
                    });
                }
            }
            Constraint::PlaneDistance {
                plane, min, max, ..
            } => {
                let h = ARENA_HALF_SIZE;
                for sign in [-1.0f32, 1.0] {
                    let (a, b) = (sign * min, sign * max);
                    let (from, to) = match plane {
                        Plane::Yz => ([a.min(b), -h], [a.max(b), h]),
                        Plane::Xy => ([-h, a.min(b)], [h, a.max(b)]),
                    };
                    m.visuals.push(Visual::Patch { from, to, ok });
                }
                let at = match plane {
                    Plane::Yz => [(min + max) / 2.0, 0.02, 0.0],
                    Plane::Xy => [0.0, 0.02, (min + max) / 2.0],
                };
                m.labels.push(Label {
                    key: format!("goal-{i}"),
                    text: number,
                    at,
                });
            }
            Constraint::Side { plane, same, .. } => {
                if let Some(r) = reference {
                    let side = plane.coordinate(r).signum() * if *same { 1.0 } else { -1.0 };
                    let h = ARENA_HALF_SIZE;
                    let (from, to) = match plane {
                        Plane::Yz => ([0.0, -h], [side * h, h]),
                        Plane::Xy => ([-h, 0.0], [h, side * h]),
                    };
                    m.visuals.push(Visual::Patch { from, to, ok });
                    let at = match plane {
                        Plane::Yz => [side * h * 0.9, 0.02, -h * 0.9],
                        Plane::Xy => [-h * 0.9, 0.02, side * h * 0.9],
                    };
                    m.labels.push(Label {
                        key: format!("goal-{i}"),
                        text: number,
                        at,
                    });
                }
            }
            Constraint::Stacked { .. } => {
                if let (Some(a), Some(s)) = (object, reference) {
                    m.visuals.push(Visual::Line { from: a, to: s, ok });
                    m.labels.push(Label {
                        key: format!("goal-{i}"),
                        text: number,
                        at: s,
                    });
                }
            }
            Constraint::RelativeYaw { .. } => {
                if let Some(a) = object {
                    m.labels.push(Label {
                        key: format!("goal-{i}"),
                        text: format!("{number} ⟳"),
                        at: [a[0], 0.02, a[2]],
                    });
                }
            }
        }
    }
    m
}
