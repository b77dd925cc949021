//! The task's text, written from the same goals the scorer judges, so the two cannot disagree.

use super::{Constraint, Goal, Plane, Task};

/// One goal in words. Every number the scorer uses appears in the sentence.
pub fn describe_goal(goal: &Constraint) -> String {
    match goal {
        Constraint::Distance {
            object,
            reference,
            min,
            max,
        } => format!(
            "Put {object} between {min:.2} m and {max:.2} m from {reference} \
             (centre to centre, measured along the ground)."
        ),
        Constraint::PlaneDistance {
            object,
            plane,
            min,
            max,
        } => format!(
            "Keep {object}'s centre between {min:.2} m and {max:.2} m from the {} \
             (|{}| between {min:.2} and {max:.2}).",
            plane.name(),
            plane.axis_name()
        ),
        Constraint::Side {
            object,
            reference,
            plane,
            same,
        } => describe_side(object, reference, *plane, *same),
        Constraint::Region {
            object,
            center,
            radius,
        } => format!(
            "Put {object} inside the circle of radius {radius:.2} m around x = {:.2}, z = {:.2}.",
            center[0], center[1]
        ),
        Constraint::RelativeYaw {
            object,
            reference,
            degrees,
            tolerance,
        } => format!(
            "Turn {object} so that its yaw minus {reference}'s yaw is {degrees:.0}° \
             (within {tolerance:.0}°; cubes repeat every 90°)."
        ),
        Constraint::Stacked { object, support } => {
            format!("Stack {object} on top of {support} so that it stays there.")
        }
    }
}

/// A conditional goal: which side the object must end on depends on where the reference ends.
fn describe_side(object: &str, reference: &str, plane: Plane, same: bool) -> String {
    let (positive, negative) = match plane {
        Plane::Yz => ("x > 0", "x < 0"),
        Plane::Xy => ("z > 0", "z < 0"),
    };
    let (if_pos, if_neg, relation) = if same {
        (positive, negative, format!("the same side as {reference}"))
    } else {
        (negative, positive, format!("the side opposite {reference}"))
    };
    format!(
        "If {reference} is on the {positive} side of the {}, put {object} at {if_pos}; \
         otherwise put it at {if_neg} ({relation}).",
        plane.name(),
    )
}

fn describe_weighted(goal: &Goal, show_weights: bool) -> String {
    let text = describe_goal(&goal.constraint);
    if show_weights {
        format!("{text} (weight {})", goal.weight)
    } else {
        text
    }
}

/// The whole task for a reader (the model or a person): the scene, what may move, the goals.
pub fn describe_task(task: &Task) -> String {
    let mut out = String::from(
        "Scene (metres; Y is up, the ground is y = 0; positions are object centres):\n",
    );
    for o in &task.objects {
        let size = match o.shape {
            super::Shape::Cube { size } => format!("edge {size:.2}"),
            super::Shape::Sphere { radius } => format!("radius {radius:.2}"),
            super::Shape::Cylinder { radius, height } => {
                format!("radius {radius:.2}, height {height:.2}")
            }
        };
        let [x, y, z] = o.position;
        out.push_str(&format!(
            "- {}: {} ({size}) at x = {x:.2}, y = {y:.2}, z = {z:.2}, yaw {:.0}°\n",
            o.id,
            o.shape.noun(),
            o.yaw_deg
        ));
    }
    out.push_str(&format!("You may move: {}.\n", task.movable.join(", ")));
    let weighted = task.goals.iter().any(|g| g.weight != 1.0);
    out.push_str("Goals:\n");
    for (i, goal) in task.goals.iter().enumerate() {
        out.push_str(&format!(
            "{}. {}\n",
            i + 1,
            describe_weighted(goal, weighted)
        ));
    }
    out
}
