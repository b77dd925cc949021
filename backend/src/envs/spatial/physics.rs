//! The physical world of a spatial task, over rapier3d: a fixed ground slab whose top is `y = 0`
//! and one dynamic body per object (cube, sphere, upright cylinder) with the object's mass,
//! friction and restitution. Y is up, as rapier's default gravity says.
//!
//! Actions teleport or push bodies; the world then runs to rest: it steps at 60 Hz until every
//! body is still for [`STILL_STEPS`] steps in a row (or rapier put it to sleep), or until the
//! step budget runs out. Nothing here reads a clock or a random source, and bodies are inserted
//! in the task's order, so a task and its actions always give the same final poses.

use lachesis_shared::spatial::{Action, ObjectPose, ObjectSpec, Pose, Recording, Shape};
use rapier3d::prelude::*;

/// Most steps one attempt may take to come to rest (15 s of simulated time).
pub const MAX_SETTLE_STEPS: u32 = 900;
/// A body counts as still below these speeds (m/s, rad/s)...
const STILL_LINEAR: f32 = 0.02;
const STILL_ANGULAR: f32 = 0.05;
/// ...for this many consecutive steps.
const STILL_STEPS: u32 = 10;
/// The fastest push accepted (m/s); faster ones are clamped.
pub const MAX_PUSH_SPEED: f32 = 5.0;
/// A moved object is put down this far (m) above its support, so it starts touching nothing.
const DROP_CLEARANCE: f32 = 0.002;
/// The ground slab's half extent: wider than the arena, so pushed objects do not fall off.
const GROUND_HALF_SIZE: f32 = 20.0;

struct Body {
    id: String,
    shape: Shape,
    handle: RigidBodyHandle,
}

pub struct World {
    physics: PhysicsWorld,
    bodies: Vec<Body>,
}

/// How running to rest went.
#[derive(Debug, Clone, PartialEq)]
pub struct Settled {
    pub steps: u32,
    /// False when the step budget ran out first.
    pub rested: bool,
    pub recording: Recording,
}

fn to_vec(v: [f32; 3]) -> Vector {
    Vector::new(v[0], v[1], v[2])
}

fn collider_for(shape: Shape) -> ColliderBuilder {
    match shape {
        Shape::Cube { size } => ColliderBuilder::cuboid(size / 2.0, size / 2.0, size / 2.0),
        Shape::Sphere { radius } => ColliderBuilder::ball(radius),
        Shape::Cylinder { radius, height } => ColliderBuilder::cylinder(height / 2.0, radius),
    }
}

impl World {
    /// The task's objects at their start poses.
    pub fn new(objects: &[ObjectSpec]) -> Self {
        let starts: Vec<ObjectPose> = objects
            .iter()
            .map(|o| ObjectPose {
                id: o.id.clone(),
                pose: Pose::from_yaw(o.position, o.yaw_deg),
            })
            .collect();
        Self::with_poses(objects, &starts)
    }

    /// The objects at their start poses, never put to sleep (the benchmark measures every body
    /// at every step, as PyBullet does with sleeping disabled).
    pub fn new_awake(objects: &[ObjectSpec]) -> Self {
        let mut world = Self::new(objects);
        for body in &world.bodies {
            *world.physics.bodies[body.handle].activation_mut() =
                RigidBodyActivation::cannot_sleep();
        }
        world
    }

    /// The task's objects at given poses (objects without one start where the spec says).
    pub fn with_poses(objects: &[ObjectSpec], poses: &[ObjectPose]) -> Self {
        let mut physics = PhysicsWorld::new();
        physics.insert(
            RigidBodyBuilder::fixed().translation(Vector::new(0.0, -0.5, 0.0)),
            ColliderBuilder::cuboid(GROUND_HALF_SIZE, 0.5, GROUND_HALF_SIZE).friction(0.8),
        );
        let mut bodies = Vec::with_capacity(objects.len());
        for object in objects {
            let pose = poses
                .iter()
                .find(|p| p.id == object.id)
                .map(|p| p.pose)
                .unwrap_or_else(|| Pose::from_yaw(object.position, object.yaw_deg));
            let [qx, qy, qz, qw] = pose.rotation;
            let rotation = Rotation::from_xyzw(qx, qy, qz, qw).normalize();
            let body = RigidBodyBuilder::dynamic()
                .pose(Pose3::from_parts(to_vec(pose.position), rotation))
                .ccd_enabled(true);
            let collider = collider_for(object.shape)
                .mass(object.mass)
                .friction(object.friction)
                .restitution(object.restitution);
            let (handle, _) = physics.insert(body, collider);
            bodies.push(Body {
                id: object.id.clone(),
                shape: object.shape,
                handle,
            });
        }
        Self { physics, bodies }
    }

    fn body(&self, id: &str) -> Option<&Body> {
        self.bodies.iter().find(|b| b.id == id)
    }

    /// Every object's pose, in the task's order.
    pub fn poses(&self) -> Vec<ObjectPose> {
        self.bodies
            .iter()
            .map(|b| {
                let rb = &self.physics.bodies[b.handle];
                let t = rb.translation();
                let r = rb.rotation();
                ObjectPose {
                    id: b.id.clone(),
                    pose: Pose {
                        position: [t.x, t.y, t.z],
                        rotation: [r.x, r.y, r.z, r.w],
                    },
                }
            })
            .collect()
    }

    /// The height of the highest thing under a footprint of `radius` around `[x, z]`, ignoring
    /// the body `except`: the ground (0) or the top of another object's bounding box.
    fn support_height(&self, x: f32, z: f32, radius: f32, except: RigidBodyHandle) -> f32 {
        let mut top: f32 = 0.0;
        for body in self.bodies.iter().filter(|b| b.handle != except) {
            let rb = &self.physics.bodies[body.handle];
            let Some(&collider) = rb.colliders().first() else {
                continue;
            };
            let aabb = self.physics.colliders[collider]
                .shape()
                .compute_aabb(rb.position());
            let overlaps = x + radius > aabb.mins.x
                && x - radius < aabb.maxs.x
                && z + radius > aabb.mins.z
                && z - radius < aabb.maxs.z;
            if overlaps {
                top = top.max(aabb.maxs.y);
            }
        }
        top
    }

    /// Applies one action. Unknown objects are ignored here: the parser and the HTTP layer
    /// refuse them before an action reaches the world.
    pub fn apply(&mut self, action: &Action) {
        let Some(body) = self.body(action.object()) else {
            return;
        };
        let (handle, shape) = (body.handle, body.shape);
        match *action {
            Action::Move { x, z, y, .. } => {
                let support = self.support_height(x, z, shape.footprint_radius(), handle);
                let resting = support + shape.half_height() + DROP_CLEARANCE;
                let height = y.map_or(resting, |y| y.max(resting));
                let rb = &mut self.physics.bodies[handle];
                rb.set_translation(Vector::new(x, height, z), true);
                rb.set_linvel(Vector::ZERO, true);
                rb.set_angvel(Vector::ZERO, true);
            }
            Action::Rotate { yaw_deg, .. } => {
                let half = yaw_deg.to_radians() / 2.0;
                let rb = &mut self.physics.bodies[handle];
                rb.set_rotation(Rotation::from_xyzw(0.0, half.sin(), 0.0, half.cos()), true);
                rb.set_angvel(Vector::ZERO, true);
            }
            Action::Push {
                direction, speed, ..
            } => {
                let [dx, dz] = direction;
                let length = (dx * dx + dz * dz).sqrt();
                if length > 1e-6 && speed.is_finite() {
                    let speed = speed.clamp(0.0, MAX_PUSH_SPEED);
                    let v = Vector::new(dx / length * speed, 0.0, dz / length * speed);
                    self.physics.bodies[handle].set_linvel(v, true);
                }
            }
        }
    }

    pub fn step(&mut self) {
        self.physics.step();
    }

    fn all_still(&self) -> bool {
        self.bodies.iter().all(|b| {
            let rb = &self.physics.bodies[b.handle];
            rb.is_sleeping()
                || (rb.linvel().length() < STILL_LINEAR && rb.angvel().length() < STILL_ANGULAR)
        })
    }

    /// Steps until everything is still (or `max_steps`), keeping a frame of poses every
    /// `steps_per_frame` steps (0: no frames but the first and the last).
    pub fn run_to_rest(&mut self, max_steps: u32, steps_per_frame: u32) -> Settled {
        let mut frames = vec![self.poses()];
        let mut still_for = 0;
        let mut steps = 0;
        let mut rested = false;
        while steps < max_steps {
            self.step();
            steps += 1;
            if steps_per_frame > 0 && steps % steps_per_frame == 0 {
                frames.push(self.poses());
            }
            if self.all_still() {
                still_for += 1;
                if still_for >= STILL_STEPS {
                    rested = true;
                    break;
                }
            } else {
                still_for = 0;
            }
        }
        let last = self.poses();
        if frames.last() != Some(&last) {
            frames.push(last);
        }
        Settled {
            steps,
            rested,
            recording: Recording {
                steps_per_frame,
                frames,
            },
        }
    }
}

/// Runs an attempt from the task's start: applies the actions in order, then runs to rest.
pub fn simulate(objects: &[ObjectSpec], actions: &[Action], steps_per_frame: u32) -> Settled {
    let mut world = World::new(objects);
    for action in actions {
        world.apply(action);
    }
    world.run_to_rest(MAX_SETTLE_STEPS, steps_per_frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(id: &str, shape: Shape, position: [f32; 3]) -> ObjectSpec {
        ObjectSpec {
            id: id.into(),
            shape,
            color: [0.5; 3],
            mass: 1.0,
            friction: 0.7,
            restitution: 0.1,
            position,
            yaw_deg: 0.0,
        }
    }

    fn pose<'a>(poses: &'a [ObjectPose], id: &str) -> &'a Pose {
        &poses.iter().find(|p| p.id == id).unwrap().pose
    }

    #[test]
    fn a_dropped_cube_falls_onto_the_ground_and_rests_there() {
        let objects = [object("c", Shape::Cube { size: 0.5 }, [0.0, 2.0, 0.0])];
        let settled = simulate(&objects, &[], 5);
        assert!(settled.rested, "{settled:?}");
        let poses = settled.recording.frames.last().unwrap();
        let y = pose(poses, "c").position[1];
        assert!(
            (y - 0.25).abs() < 0.02,
            "rests on y = 0 with its centre at 0.25: {y}"
        );
        assert!(settled.recording.frames.len() > 2, "frames were recorded");
    }

    #[test]
    fn a_move_onto_another_object_lands_on_its_top_face_and_stays() {
        let objects = [
            object("base", Shape::Cube { size: 0.8 }, [1.0, 0.4, 1.0]),
            object(
                "top",
                Shape::Cylinder {
                    radius: 0.2,
                    height: 0.4,
                },
                [-2.0, 0.2, 0.0],
            ),
        ];
        let settled = simulate(
            &objects,
            &[Action::Move {
                object: "top".into(),
                x: 1.0,
                z: 1.0,
                y: None,
            }],
            0,
        );
        assert!(settled.rested);
        let poses = settled.recording.frames.last().unwrap();
        let top = pose(poses, "top").position;
        assert!((top[1] - 1.0).abs() < 0.03, "0.8 + 0.2: {top:?}");
        assert!((top[0] - 1.0).abs() < 0.03 && (top[2] - 1.0).abs() < 0.03);
    }

    #[test]
    fn a_pushed_sphere_rolls_in_the_pushed_direction_and_stops() {
        let objects = [object("s", Shape::Sphere { radius: 0.3 }, [0.0, 0.3, 0.0])];
        let settled = simulate(
            &objects,
            &[Action::Push {
                object: "s".into(),
                direction: [1.0, 0.0],
                speed: 1.0,
            }],
            0,
        );
        let p = pose(settled.recording.frames.last().unwrap(), "s").position;
        assert!(p[0] > 0.2, "moved towards +x: {p:?}");
        assert!(p[2].abs() < 0.05, "not sideways: {p:?}");
    }

    #[test]
    fn the_same_actions_give_the_same_final_poses() {
        let objects = [
            object("a", Shape::Cube { size: 0.5 }, [0.0, 0.25, 0.0]),
            object("b", Shape::Sphere { radius: 0.3 }, [0.6, 0.3, 0.0]),
        ];
        let actions = [Action::Push {
            object: "a".into(),
            direction: [1.0, 0.2],
            speed: 4.0,
        }];
        let first = simulate(&objects, &actions, 0);
        let second = simulate(&objects, &actions, 0);
        assert_eq!(first, second);
    }

    #[test]
    fn rotation_sets_the_yaw_and_the_cube_keeps_it_at_rest() {
        let objects = [object("c", Shape::Cube { size: 0.5 }, [0.0, 0.25, 0.0])];
        let settled = simulate(
            &objects,
            &[Action::Rotate {
                object: "c".into(),
                yaw_deg: 35.0,
            }],
            0,
        );
        let yaw = pose(settled.recording.frames.last().unwrap(), "c").yaw_deg();
        assert!((yaw - 35.0).abs() < 1.0, "{yaw}");
    }
}
