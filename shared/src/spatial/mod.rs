//! Padres spatial reasoning: scenes, tasks, actions and verdicts on the wire, and the pure scorer
//! both sides use (the server is the authority; the browser previews with the same code).
//!
//! Axis convention, end to end (physics, wire, viewer): **Y is up**, metres, right-handed. The
//! ground is the plane `y = 0`; objects stand on it. "The YZ plane" is `x = 0`, "the XY plane" is
//! `z = 0`. Rotations are quaternions `[x, y, z, w]`; a yaw is a rotation about +Y in degrees,
//! counter-clockwise seen from above (it turns +X towards -Z), as three-d and rapier define it.

mod describe;
pub mod score;

use serde::{Deserialize, Serialize};

pub use score::{ConstraintVerdict, Verdict, score};

/// A point or a direction, `[x, y, z]`, Y up.
pub type Vec3 = [f32; 3];
/// A unit quaternion `[x, y, z, w]`.
pub type Quat = [f32; 4];

/// Objects must stay within `|x|, |z| <= ARENA_HALF_SIZE` metres.
pub const ARENA_HALF_SIZE: f32 = 4.0;
/// Difficulty levels the generator knows: 1 (one goal) to 4 (weighted multi-objective).
pub const DIFFICULTIES: std::ops::RangeInclusive<u8> = 1..=4;

/// An object's geometry; sizes in metres.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Shape {
    /// A cube with edge `size`.
    Cube {
        /// Edge length, metres.
        size: f32,
    },
    /// A ball.
    Sphere {
        /// Metres.
        radius: f32,
    },
    /// An upright cylinder (axis along Y).
    Cylinder {
        /// Metres.
        radius: f32,
        /// Metres, along Y.
        height: f32,
    },
}

impl Shape {
    /// Half the height when standing on the ground: the centre's rest height.
    pub fn half_height(&self) -> f32 {
        match *self {
            Shape::Cube { size } => size / 2.0,
            Shape::Sphere { radius } => radius,
            Shape::Cylinder { height, .. } => height / 2.0,
        }
    }

    /// The radius of a vertical cylinder around the centre that contains the shape at any yaw.
    pub fn footprint_radius(&self) -> f32 {
        match *self {
            Shape::Cube { size } => size * std::f32::consts::FRAC_1_SQRT_2,
            Shape::Sphere { radius } => radius,
            Shape::Cylinder { radius, .. } => radius,
        }
    }

    /// How far from the centre a point on the top face may be, horizontally, and still be
    /// supported (the inscribed radius of the top face; zero for a sphere).
    pub fn top_support_radius(&self) -> f32 {
        match *self {
            Shape::Cube { size } => size / 2.0,
            Shape::Sphere { .. } => 0.0,
            Shape::Cylinder { radius, .. } => radius,
        }
    }

    /// `cube`, `sphere` or `cylinder`, for task descriptions.
    pub fn noun(&self) -> &'static str {
        match self {
            Shape::Cube { .. } => "cube",
            Shape::Sphere { .. } => "sphere",
            Shape::Cylinder { .. } => "cylinder",
        }
    }
}

/// One object of a scene as generated: what it is and where it starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObjectSpec {
    /// Unique in the scene, e.g. `red_cube`; what actions and constraints name.
    pub id: String,
    /// Its geometry.
    pub shape: Shape,
    /// Linear RGB, each 0..1.
    pub color: [f32; 3],
    /// Kilograms.
    pub mass: f32,
    /// The physics engine's friction coefficient (0.5..0.9 as generated).
    pub friction: f32,
    /// Bounciness, 0 (none) to 1 (elastic).
    pub restitution: f32,
    /// The centre at the start.
    pub position: Vec3,
    /// The start yaw in degrees (see the module's axis convention).
    pub yaw_deg: f32,
}

/// Where an object is: its centre and rotation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Pose {
    /// The centre, metres.
    pub position: Vec3,
    /// The orientation.
    pub rotation: Quat,
}

impl Pose {
    /// A pose at `position`, turned `yaw_deg` degrees about +Y.
    pub fn from_yaw(position: Vec3, yaw_deg: f32) -> Self {
        let half = yaw_deg.to_radians() / 2.0;
        Self {
            position,
            rotation: [0.0, half.sin(), 0.0, half.cos()],
        }
    }

    /// The heading of the object's +X axis projected on the ground, in degrees (-180..180].
    pub fn yaw_deg(&self) -> f32 {
        let [x, y, z, w] = self.rotation;
        let ax = 1.0 - 2.0 * (y * y + z * z);
        let az = 2.0 * (x * z - w * y);
        (-az).atan2(ax).to_degrees()
    }
}

/// An object's pose by id: the unit of snapshots and deltas.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObjectPose {
    /// The object's [`ObjectSpec::id`].
    pub id: String,
    /// Where it is.
    pub pose: Pose,
}

/// A vertical plane through the origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Plane {
    /// `x = 0`, the YZ plane.
    Yz,
    /// `z = 0`, the XY plane.
    Xy,
}

impl Plane {
    /// The coordinate this plane divides: x for YZ, z for XY.
    pub fn coordinate(self, p: Vec3) -> f32 {
        match self {
            Plane::Yz => p[0],
            Plane::Xy => p[2],
        }
    }

    /// The coordinate's name, `x` or `z`.
    pub fn axis_name(self) -> &'static str {
        match self {
            Plane::Yz => "x",
            Plane::Xy => "z",
        }
    }

    /// The plane's name as task descriptions print it, e.g. `YZ plane (x = 0)`.
    pub fn name(self) -> &'static str {
        match self {
            Plane::Yz => "YZ plane (x = 0)",
            Plane::Xy => "XY plane (z = 0)",
        }
    }
}

/// One goal. Distances are measured between centres along the ground (x and z only), so an
/// object's height never changes them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Constraint {
    /// `min <= distance(object, reference) <= max`.
    Distance {
        /// The object to place.
        object: String,
        /// The object it is measured from.
        reference: String,
        /// Metres.
        min: f32,
        /// Metres.
        max: f32,
    },
    /// `min <= |distance from the object's centre to the plane| <= max`.
    PlaneDistance {
        /// The object to place.
        object: String,
        /// The plane it is measured from.
        plane: Plane,
        /// Metres.
        min: f32,
        /// Metres.
        max: f32,
    },
    /// Conditional positioning: the object must end on the same side of the plane as the
    /// reference (`same: true`) or on the opposite side, wherever the reference ends up.
    Side {
        /// The object to place.
        object: String,
        /// The object whose side it must match or oppose.
        reference: String,
        /// The dividing plane.
        plane: Plane,
        /// Same side (`true`) or opposite side (`false`).
        same: bool,
    },
    /// The object's centre lies within `radius` of `center` (`[x, z]`) on the ground.
    Region {
        /// The object to place.
        object: String,
        /// The region's centre on the ground, `[x, z]` metres.
        center: [f32; 2],
        /// Metres.
        radius: f32,
    },
    /// Relative orientation of two cubes: the object's yaw minus the reference's, modulo 90
    /// degrees (a cube looks the same every quarter turn), within `tolerance` of `degrees`.
    RelativeYaw {
        /// The cube to turn.
        object: String,
        /// The cube it is measured against.
        reference: String,
        /// The wanted difference, degrees.
        degrees: f32,
        /// Allowed deviation either way, degrees.
        tolerance: f32,
    },
    /// The object rests on top of `support` once the world is at rest (so the stack is stable).
    Stacked {
        /// The object on top.
        object: String,
        /// The object it must rest on.
        support: String,
    },
}

impl Constraint {
    /// The object this goal is about (always one the solver may move).
    pub fn subject(&self) -> &str {
        match self {
            Constraint::Distance { object, .. }
            | Constraint::PlaneDistance { object, .. }
            | Constraint::Side { object, .. }
            | Constraint::Region { object, .. }
            | Constraint::RelativeYaw { object, .. }
            | Constraint::Stacked { object, .. } => object,
        }
    }

    /// The other object it refers to, if any.
    pub fn reference(&self) -> Option<&str> {
        match self {
            Constraint::Distance { reference, .. }
            | Constraint::Side { reference, .. }
            | Constraint::RelativeYaw { reference, .. } => Some(reference),
            Constraint::Stacked { support, .. } => Some(support),
            Constraint::PlaneDistance { .. } | Constraint::Region { .. } => None,
        }
    }
}

/// A goal with its weight in the task's score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Goal {
    /// Its share of the score, relative to the other goals' weights.
    pub weight: f32,
    /// What must hold.
    pub constraint: Constraint,
}

/// A generated task: a scene, which objects may be moved, and weighted goals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// `d{difficulty}-s{seed}`: the task is a pure function of both.
    pub id: String,
    /// The generator's seed (fits in an `i64`, as Postgres stores it).
    pub seed: u64,
    /// One of [`DIFFICULTIES`].
    pub difficulty: u8,
    /// Every object of the scene, with its start pose.
    pub objects: Vec<ObjectSpec>,
    /// Ids of the objects actions may touch; the rest are fixed references.
    pub movable: Vec<String>,
    /// What the solver must achieve, weighted.
    pub goals: Vec<Goal>,
}

impl Task {
    /// The object with this id; `None` when the scene has none.
    pub fn object(&self, id: &str) -> Option<&ObjectSpec> {
        self.objects.iter().find(|o| o.id == id)
    }

    /// Whether actions may touch the object `id`.
    pub fn is_movable(&self, id: &str) -> bool {
        self.movable.iter().any(|m| m == id)
    }

    /// The objects' start poses.
    pub fn start_poses(&self) -> Vec<ObjectPose> {
        self.objects
            .iter()
            .map(|o| ObjectPose {
                id: o.id.clone(),
                pose: Pose::from_yaw(o.position, o.yaw_deg),
            })
            .collect()
    }
}

/// One action on the scene. The world runs to rest after all actions of an attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// Lift the object and put it down with its centre above `[x, z]`; it is lowered until it
    /// rests on whatever is below (the ground or another object). `y`, when given, is a
    /// release height: the object drops from there if that is higher.
    Move {
        /// The object to move.
        object: String,
        /// The target centre's x, metres.
        x: f32,
        /// The target centre's z, metres.
        z: f32,
        /// Release height of the centre, metres; `None`: just above whatever is below.
        y: Option<f32>,
    },
    /// Turn the object to an absolute yaw (degrees) where it stands.
    Rotate {
        /// The object to turn.
        object: String,
        /// The yaw to turn it to, degrees.
        yaw_deg: f32,
    },
    /// Give the object a horizontal velocity `speed` (m/s, at most 5) towards `[dx, dz]`.
    Push {
        /// The object to push.
        object: String,
        /// `[dx, dz]` on the ground; only its direction matters.
        direction: [f32; 2],
        /// Metres per second, at most 5.
        speed: f32,
    },
}

impl Action {
    /// The id of the object acted on.
    pub fn object(&self) -> &str {
        match self {
            Action::Move { object, .. }
            | Action::Rotate { object, .. }
            | Action::Push { object, .. } => object,
        }
    }
}

/// Scene streaming on the live socket (topic `scene`): a snapshot, then deltas. A delta names
/// the sequence number it applies to; a client whose last sequence differs (it missed some,
/// because deltas are coalesced for slow readers) reloads the snapshot over HTTP.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "scene_event", rename_all = "snake_case")]
pub enum SceneEvent {
    /// The whole scene: draw it from scratch.
    Snapshot(SceneSnapshot),
    /// Changes on top of the sequence number `base_seq`.
    Delta(SceneDelta),
}

/// Everything needed to draw a scene from scratch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SceneSnapshot {
    /// The scene's sequence number at this snapshot; deltas build on it.
    pub seq: u64,
    /// The task being attempted.
    pub task: Task,
    /// Every object's current pose.
    pub poses: Vec<ObjectPose>,
    /// Who is acting, e.g. `model: SmolLM2-135M (attempt 2 of 4)`.
    pub caption: String,
    /// The last attempt's actions as the model wrote them, or its parse error.
    pub attempt: Option<String>,
    /// The last attempt's verdict; `None` until the world rests after one.
    pub verdict: Option<Verdict>,
}

/// The poses that changed since `base_seq`, and the verdict once the world is at rest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SceneDelta {
    /// The sequence number it applies to; a client at another one reloads the snapshot.
    pub base_seq: u64,
    /// The sequence number after applying it.
    pub seq: u64,
    /// The objects that moved, with their new poses.
    pub poses: Vec<ObjectPose>,
    /// The attempt's verdict, once the world is at rest; `None` before.
    pub verdict: Option<Verdict>,
}

/// The poses of every object after each recorded step of an episode, for replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recording {
    /// Physics steps between two frames.
    pub steps_per_frame: u32,
    /// Every object's pose per frame, oldest first; the last frame is the final state.
    pub frames: Vec<Vec<ObjectPose>>,
}

/// A person's attempt from the browser: where they put the movable objects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HumanAttempt {
    /// The task's seed; with `difficulty` it regenerates the task on the server.
    pub seed: u64,
    /// One of [`DIFFICULTIES`].
    pub difficulty: u8,
    /// The person's actions, applied in order before the world runs to rest.
    pub actions: Vec<Action>,
}

/// The server's answer to an attempt: the same scorer's verdict, and the episode to replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptResult {
    /// How well the final poses meet the goals.
    pub verdict: Verdict,
    /// The simulated episode, for the browser to replay.
    pub recording: Recording,
    /// Whether the world came to rest within the step budget.
    pub rested: bool,
    /// The stored demonstration's id.
    pub demonstration_id: Option<i64>,
}

pub use describe::{describe_goal, describe_task};
