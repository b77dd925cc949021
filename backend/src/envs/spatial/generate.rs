//! The task generator: a seed and a difficulty give one task, always the same.
//!
//! Every task is built around a planted solution: the generator first decides where each movable
//! object should end (clear of everything, or on top of its support), then writes goals that this
//! placement satisfies with a margin. So every task is solvable by construction; the solver
//! ([`super::solve`]) proves it by finding a solution without seeing the planted one.
//!
//! Difficulty levels:
//! 1. one movable object, one goal: a distance to another object, a region, or a distance to a plane;
//! 2. one movable object, two goals: conditional positioning (which side of a plane, depending on
//!    where a reference object is) and a distance;
//! 3. two movable objects, three goals: side and distance for the first; stacking or relative
//!    orientation for the second;
//! 4. two movable objects, five weighted goals mixing all of the above.

use lachesis_shared::spatial::{
    ARENA_HALF_SIZE, Constraint, Goal, ObjectSpec, Plane, Shape, Task, Vec3,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const COLORS: [(&str, [f32; 3]); 8] = [
    ("red", [0.85, 0.12, 0.10]),
    ("blue", [0.12, 0.30, 0.90]),
    ("green", [0.10, 0.70, 0.20]),
    ("yellow", [0.95, 0.80, 0.10]),
    ("purple", [0.55, 0.20, 0.75]),
    ("orange", [0.95, 0.45, 0.05]),
    ("cyan", [0.10, 0.75, 0.80]),
    ("white", [0.90, 0.90, 0.88]),
];
/// Objects start and goals are planted within this half size, inside the arena.
const PLACEMENT_HALF_SIZE: f32 = ARENA_HALF_SIZE - 0.8;
/// Free space kept between two objects' footprints (m).
const CLEARANCE: f32 = 0.35;
/// Goals are planted at least this far (m) from both planes, so sides are never borderline.
const PLANE_MARGIN: f32 = 0.4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Distance,
    PlaneDistance,
    Region,
    Side,
    RelativeYaw,
    Stacked,
}

/// What one movable object is asked to do.
struct Plan {
    kinds: Vec<Kind>,
}

fn plans(difficulty: u8, rng: &mut StdRng) -> Vec<Plan> {
    let one_of = |rng: &mut StdRng, kinds: &[Kind]| kinds[rng.random_range(0..kinds.len())];
    match difficulty {
        1 => vec![Plan {
            kinds: vec![one_of(
                rng,
                &[Kind::Distance, Kind::Region, Kind::PlaneDistance],
            )],
        }],
        2 => vec![Plan {
            kinds: vec![
                Kind::Side,
                one_of(rng, &[Kind::Distance, Kind::PlaneDistance, Kind::Region]),
            ],
        }],
        3 => vec![
            Plan {
                kinds: vec![Kind::Side, Kind::Distance],
            },
            Plan {
                kinds: vec![one_of(rng, &[Kind::Stacked, Kind::RelativeYaw])],
            },
        ],
        _ => vec![
            Plan {
                kinds: vec![Kind::Distance, Kind::Side, Kind::RelativeYaw],
            },
            Plan {
                kinds: vec![Kind::Stacked, Kind::Distance],
            },
        ],
    }
}

fn round_to(v: f32, step: f32) -> f32 {
    (v / step).round() * step
}

fn horizontal_distance(a: Vec3, b: Vec3) -> f32 {
    ((a[0] - b[0]).powi(2) + (a[2] - b[2]).powi(2)).sqrt()
}

fn random_shape(rng: &mut StdRng) -> Shape {
    match rng.random_range(0..3) {
        0 => Shape::Cube {
            size: round_to(rng.random_range(0.4..0.8), 0.05),
        },
        1 => Shape::Sphere {
            radius: round_to(rng.random_range(0.2..0.35), 0.05),
        },
        _ => Shape::Cylinder {
            radius: round_to(rng.random_range(0.2..0.3), 0.05),
            height: round_to(rng.random_range(0.4..0.8), 0.05),
        },
    }
}

/// A point on the ground clear of `taken` (centre, footprint radius) pairs, away from the planes.
fn free_spot(rng: &mut StdRng, radius: f32, taken: &[(Vec3, f32)]) -> Option<[f32; 2]> {
    for _ in 0..500 {
        let x = rng.random_range(-PLACEMENT_HALF_SIZE..PLACEMENT_HALF_SIZE);
        let z = rng.random_range(-PLACEMENT_HALF_SIZE..PLACEMENT_HALF_SIZE);
        if x.abs() < PLANE_MARGIN || z.abs() < PLANE_MARGIN {
            continue;
        }
        let clear = taken
            .iter()
            .all(|(c, r)| horizontal_distance(*c, [x, 0.0, z]) >= radius + r + CLEARANCE);
        if clear {
            return Some([round_to(x, 0.05), round_to(z, 0.05)]);
        }
    }
    None
}

/// The task for `seed` at `difficulty` (clamped to 1..=4).
pub fn generate(seed: u64, difficulty: u8) -> Task {
    let difficulty = difficulty.clamp(1, 4);
    // Retry with derived seeds in the rare case a layout does not fit; still a pure function.
    (0u64..)
        .find_map(|attempt| try_generate(seed, difficulty, attempt))
        .expect("an unbounded search over layouts finds one")
}

fn try_generate(seed: u64, difficulty: u8, attempt: u64) -> Option<Task> {
    let mix = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(u64::from(difficulty) << 56)
        .wrapping_add(attempt.wrapping_mul(0xD1B5_4A32_D192_ED03));
    let mut rng = StdRng::seed_from_u64(mix);
    let plans = plans(difficulty, &mut rng);
    let count = usize::from(difficulty) + 2;

    // Shapes: movables first (a cube when it must match an orientation, a cube or cylinder when it
    // is stacked), then the fixed objects, including the cubes those goals need as references.
    let mut shapes: Vec<Shape> = Vec::with_capacity(count);
    for plan in &plans {
        let shape = if plan.kinds.contains(&Kind::RelativeYaw) {
            Shape::Cube {
                size: round_to(rng.random_range(0.4..0.6), 0.05),
            }
        } else if plan.kinds.contains(&Kind::Stacked) {
            Shape::Cylinder {
                radius: 0.2,
                height: round_to(rng.random_range(0.3..0.5), 0.05),
            }
        } else {
            random_shape(&mut rng)
        };
        shapes.push(shape);
    }
    let needs_cube_reference = plans.iter().any(|p| p.kinds.contains(&Kind::RelativeYaw));
    let needs_support = plans.iter().any(|p| p.kinds.contains(&Kind::Stacked));
    if needs_cube_reference {
        shapes.push(Shape::Cube {
            size: round_to(rng.random_range(0.4..0.7), 0.05),
        });
    }
    if needs_support {
        shapes.push(Shape::Cube {
            size: round_to(rng.random_range(0.6..0.8), 0.05),
        });
    }
    while shapes.len() < count {
        shapes.push(random_shape(&mut rng));
    }
    let movable_count = plans.len();
    let cube_reference = needs_cube_reference.then_some(movable_count);
    let support = needs_support.then_some(movable_count + usize::from(needs_cube_reference));

    let mut colors: Vec<usize> = (0..COLORS.len()).collect();
    let mut objects = Vec::with_capacity(count);
    let mut taken: Vec<(Vec3, f32)> = Vec::new();
    for shape in shapes {
        let color = colors.remove(rng.random_range(0..colors.len()));
        let [x, z] = free_spot(&mut rng, shape.footprint_radius(), &taken)?;
        let position = [x, shape.half_height(), z];
        taken.push((position, shape.footprint_radius()));
        let (name, rgb) = COLORS[color];
        objects.push(ObjectSpec {
            id: format!("{name}_{}", shape.noun()),
            shape,
            color: rgb,
            mass: round_to(rng.random_range(0.5..3.0), 0.1),
            friction: round_to(rng.random_range(0.5..0.9), 0.05),
            restitution: round_to(rng.random_range(0.0..0.3), 0.05),
            position,
            yaw_deg: round_to(rng.random_range(-45.0..45.0), 5.0),
        });
    }

    // Plant each movable object's goal pose, then write goals it satisfies.
    let fixed: Vec<usize> = (movable_count..count).collect();
    let mut goals = Vec::new();
    for (index, plan) in plans.iter().enumerate() {
        let shape = objects[index].shape;
        let id = objects[index].id.clone();
        let goal_xz = if plan.kinds.contains(&Kind::Stacked) {
            let s = &objects[support?];
            [s.position[0], s.position[2]]
        } else {
            // Clear of every start but its own, and of goals planted before.
            let others: Vec<(Vec3, f32)> = taken
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != index)
                .map(|(_, t)| *t)
                .collect();
            free_spot(&mut rng, shape.footprint_radius(), &others)?
        };
        let goal = [goal_xz[0], 0.0, goal_xz[1]];
        if !plan.kinds.contains(&Kind::Stacked) {
            taken.push((goal, shape.footprint_radius()));
        }
        // References are fixed objects: they stay where they are unless something hits them.
        let mut references: Vec<usize> = fixed
            .iter()
            .copied()
            .filter(|&i| Some(i) != support || !plan.kinds.contains(&Kind::Stacked))
            .collect();
        let mut pick = |rng: &mut StdRng| references.remove(rng.random_range(0..references.len()));
        for &kind in &plan.kinds {
            let constraint = match kind {
                Kind::Distance => {
                    let r = &objects[pick(&mut rng)];
                    let d = horizontal_distance(goal, r.position);
                    let half_band = round_to(rng.random_range(0.2..0.35), 0.05);
                    Constraint::Distance {
                        object: id.clone(),
                        reference: r.id.clone(),
                        min: (round_to(d, 0.05) - half_band).max(0.0),
                        max: round_to(d, 0.05) + half_band,
                    }
                }
                Kind::PlaneDistance => {
                    let plane = if rng.random_bool(0.5) {
                        Plane::Yz
                    } else {
                        Plane::Xy
                    };
                    let d = plane.coordinate(goal).abs();
                    let half_band = round_to(rng.random_range(0.2..0.35), 0.05);
                    Constraint::PlaneDistance {
                        object: id.clone(),
                        plane,
                        min: (round_to(d, 0.05) - half_band).max(0.0),
                        max: round_to(d, 0.05) + half_band,
                    }
                }
                Kind::Region => {
                    let radius = round_to(rng.random_range(0.45..0.7), 0.05);
                    let offset = radius * 0.3;
                    Constraint::Region {
                        object: id.clone(),
                        center: [
                            round_to(goal[0] + rng.random_range(-offset..offset), 0.05),
                            round_to(goal[2] + rng.random_range(-offset..offset), 0.05),
                        ],
                        radius,
                    }
                }
                Kind::Side => {
                    let r = &objects[pick(&mut rng)];
                    let plane = if rng.random_bool(0.5) {
                        Plane::Yz
                    } else {
                        Plane::Xy
                    };
                    let same =
                        plane.coordinate(goal).signum() == plane.coordinate(r.position).signum();
                    Constraint::Side {
                        object: id.clone(),
                        reference: r.id.clone(),
                        plane,
                        same,
                    }
                }
                Kind::RelativeYaw => {
                    let r = &objects[cube_reference?];
                    Constraint::RelativeYaw {
                        object: id.clone(),
                        reference: r.id.clone(),
                        degrees: 15.0 * f32::from(rng.random_range(0u8..6)),
                        tolerance: 8.0,
                    }
                }
                Kind::Stacked => Constraint::Stacked {
                    object: id.clone(),
                    support: objects[support?].id.clone(),
                },
            };
            goals.push(constraint);
        }
    }

    let weighted = difficulty >= 4;
    let goals = goals
        .into_iter()
        .map(|constraint| Goal {
            weight: if weighted {
                f32::from(rng.random_range(1u8..=3))
            } else {
                1.0
            },
            constraint,
        })
        .collect();
    Some(Task {
        id: format!("d{difficulty}-s{seed}"),
        seed,
        difficulty,
        movable: objects[..movable_count]
            .iter()
            .map(|o| o.id.clone())
            .collect(),
        objects,
        goals,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lachesis_shared::spatial::{describe_task, score};

    #[test]
    fn a_seed_and_a_difficulty_always_give_the_same_task() {
        for difficulty in 1..=4 {
            assert_eq!(generate(42, difficulty), generate(42, difficulty));
            assert_ne!(generate(42, difficulty), generate(43, difficulty));
        }
    }

    #[test]
    fn tasks_grow_with_difficulty_and_only_start_at_rest_apart() {
        for seed in 0..50 {
            for difficulty in 1..=4u8 {
                let task = generate(seed, difficulty);
                assert_eq!(task.objects.len(), usize::from(difficulty) + 2);
                let expected_goals = [1, 2, 3, 5][usize::from(difficulty) - 1];
                assert_eq!(task.goals.len(), expected_goals, "{task:?}");
                for (i, a) in task.objects.iter().enumerate() {
                    assert!((a.position[1] - a.shape.half_height()).abs() < 1e-6);
                    for b in &task.objects[i + 1..] {
                        let d = horizontal_distance(a.position, b.position);
                        assert!(d >= a.shape.footprint_radius() + b.shape.footprint_radius());
                    }
                }
                for goal in &task.goals {
                    assert!(task.is_movable(goal.constraint.subject()));
                    if let Some(reference) = goal.constraint.reference() {
                        assert!(!task.is_movable(reference), "references stay put");
                    }
                }
            }
        }
    }

    #[test]
    fn the_start_is_not_already_a_solution() {
        let unsolved = (0..100)
            .filter(|&seed| {
                let task = generate(seed, 2);
                score(&task, &task.start_poses()).score < 0.95
            })
            .count();
        assert!(unsolved >= 90, "{unsolved} of 100 start unsolved");
    }

    #[test]
    fn the_text_states_every_goal_with_its_numbers() {
        let task = generate(7, 4);
        let text = describe_task(&task);
        for object in &task.objects {
            assert!(text.contains(&object.id));
        }
        for goal in &task.goals {
            assert!(text.contains(&format!("(weight {})", goal.weight)));
            if let Constraint::Distance { min, max, .. } = &goal.constraint {
                assert!(text.contains(&format!("between {min:.2} m and {max:.2} m")));
            }
        }
    }
}
