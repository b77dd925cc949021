//! Drawing a spatial scene with three-d on a WebGL2 canvas: the ground, the objects (one
//! instanced mesh per shape, so hundreds of objects cost three draw calls), translucent goal
//! visuals, an orbit camera and three lights. Y is up, as in the physics and on the wire.

use lachesis_shared::spatial::{ARENA_HALF_SIZE, Pose, Shape};
use three_d::*;

pub use crate::webgl::Orbit;
use crate::webgl::{self, Lights};

/// What the camera looks at: the middle of the ground, a little above it.
const TARGET: Vec3 = vec3(0.0, 0.3, 0.0);

/// One object to draw.
#[derive(Debug, Clone, PartialEq)]
pub struct Drawn {
    pub shape: Shape,
    pub color: [f32; 3],
    pub pose: Pose,
    pub highlighted: bool,
}

/// A goal's picture on the ground or in the air.
#[derive(Debug, Clone, PartialEq)]
pub enum Visual {
    /// A filled disc on the ground (a target region).
    Disc {
        center: [f32; 2],
        radius: f32,
        ok: bool,
    },
    /// A ring on the ground between two radii (a distance band around a reference).
    Ring {
        center: [f32; 2],
        inner: f32,
        outer: f32,
        ok: bool,
    },
    /// A rectangle on the ground, `[x0, z0]` to `[x1, z1]` (a side or a band along a plane).
    Patch {
        from: [f32; 2],
        to: [f32; 2],
        ok: bool,
    },
    /// A thin bar between two points (a measured distance, a stack).
    Line {
        from: [f32; 3],
        to: [f32; 3],
        ok: bool,
    },
}

/// Where the camera starts, in degrees and metres, and how far it may turn and zoom.
pub const START: Orbit = Orbit {
    yaw: 30.0,
    pitch: 42.0,
    distance: 11.0,
    pitch_limits: (8.0, 88.0),
    distance_limits: (3.0, 40.0),
};

const OK_COLOR: Srgba = Srgba::new(40, 190, 80, 110);
const TODO_COLOR: Srgba = Srgba::new(245, 150, 20, 110);

fn goal_color(ok: bool) -> Srgba {
    if ok { OK_COLOR } else { TODO_COLOR }
}

pub struct Renderer {
    context: Context,
    camera: Camera,
    cubes: Gm<InstancedMesh, PhysicalMaterial>,
    spheres: Gm<InstancedMesh, PhysicalMaterial>,
    cylinders: Gm<InstancedMesh, PhysicalMaterial>,
    ground: Gm<Mesh, PhysicalMaterial>,
    axes: Vec<Gm<Mesh, ColorMaterial>>,
    visuals: Vec<Gm<Mesh, ColorMaterial>>,
    lights: Lights,
}

/// A cylinder along Y from -0.5 to 0.5 with radius 1, with caps (three-d's own is an open tube).
fn capped_cylinder(segments: u32) -> CpuMesh {
    let mut positions = Vec::new();
    let mut indices: Vec<u32> = Vec::new();
    let ring = |y: f32| {
        (0..segments).map(move |j| {
            let a = std::f32::consts::TAU * j as f32 / segments as f32;
            vec3(a.cos(), y, a.sin())
        })
    };
    // Side: its own vertices, so the caps' flat normals do not bend its smooth ones.
    positions.extend(ring(-0.5));
    positions.extend(ring(0.5));
    for j in 0..segments {
        let k = (j + 1) % segments;
        indices.extend([j, segments + k, k, j, segments + j, segments + k]);
    }
    for (y, flip) in [(-0.5f32, true), (0.5, false)] {
        let center = positions.len() as u32;
        positions.push(vec3(0.0, y, 0.0));
        positions.extend(ring(y));
        for j in 0..segments {
            let (a, b) = (center + 1 + j, center + 1 + (j + 1) % segments);
            if flip {
                indices.extend([center, a, b]);
            } else {
                indices.extend([center, b, a]);
            }
        }
    }
    let mut mesh = CpuMesh {
        positions: Positions::F32(positions),
        indices: Indices::U32(indices),
        ..Default::default()
    };
    mesh.compute_normals();
    mesh
}

/// A flat ring in the XZ plane around the origin, facing up.
fn ring_mesh(inner: f32, outer: f32, segments: u32) -> CpuMesh {
    let mut positions = Vec::new();
    let mut indices: Vec<u32> = Vec::new();
    for j in 0..segments {
        let a = std::f32::consts::TAU * j as f32 / segments as f32;
        positions.push(vec3(inner * a.cos(), 0.0, inner * a.sin()));
        positions.push(vec3(outer * a.cos(), 0.0, outer * a.sin()));
    }
    for j in 0..segments {
        let (i0, o0) = (2 * j, 2 * j + 1);
        let (i1, o1) = (2 * ((j + 1) % segments), 2 * ((j + 1) % segments) + 1);
        indices.extend([i0, o1, o0, i0, i1, o1]);
    }
    let normals = vec![vec3(0.0, 1.0, 0.0); positions.len()];
    CpuMesh {
        positions: Positions::F32(positions),
        indices: Indices::U32(indices),
        normals: Some(normals),
        ..Default::default()
    }
}

/// A horizontal quad from `[x0, z0]` to `[x1, z1]` at height 0, facing up.
fn patch_mesh(from: [f32; 2], to: [f32; 2]) -> CpuMesh {
    let positions = vec![
        vec3(from[0], 0.0, from[1]),
        vec3(to[0], 0.0, from[1]),
        vec3(to[0], 0.0, to[1]),
        vec3(from[0], 0.0, to[1]),
    ];
    CpuMesh {
        positions: Positions::F32(positions),
        indices: Indices::U32(vec![0, 2, 1, 0, 3, 2, 0, 1, 2, 0, 2, 3]),
        normals: Some(vec![vec3(0.0, 1.0, 0.0); 4]),
        ..Default::default()
    }
}

/// The transformation that makes three-d's unit cube (-1..1) a bar from `a` to `b`.
fn bar(a: Vec3, b: Vec3, thickness: f32) -> Mat4 {
    let d = b - a;
    let length = d.magnitude().max(1e-4);
    let rotation = Quaternion::from_arc(vec3(1.0, 0.0, 0.0), d / length, None);
    Mat4::from_translation((a + b) * 0.5)
        * Mat4::from(rotation)
        * Mat4::from_nonuniform_scale(length / 2.0, thickness, thickness)
}

fn object_transform(shape: Shape, pose: &Pose) -> Mat4 {
    let [x, y, z] = pose.position;
    let [qx, qy, qz, qw] = pose.rotation;
    let rotation = Mat4::from(Quaternion::new(qw, qx, qy, qz));
    let scale = match shape {
        Shape::Cube { size } => Mat4::from_scale(size / 2.0),
        Shape::Sphere { radius } => Mat4::from_scale(radius),
        Shape::Cylinder { radius, height } => Mat4::from_nonuniform_scale(radius, height, radius),
    };
    Mat4::from_translation(vec3(x, y, z)) * rotation * scale
}

fn srgba(color: [f32; 3], highlighted: bool) -> Srgba {
    let lift = if highlighted { 0.25 } else { 0.0 };
    let c = |v: f32| ((v + lift).min(1.0) * 255.0) as u8;
    Srgba::new(c(color[0]), c(color[1]), c(color[2]), 255)
}

impl Renderer {
    pub fn new(context: Context) -> Self {
        let empty = webgl::no_instances();
        let instanced = |mesh: &CpuMesh| {
            Gm::new(
                InstancedMesh::new(&context, &empty, mesh),
                webgl::white_material(&context, 0.6),
            )
        };
        let mut ground = Gm::new(
            Mesh::new(&context, &CpuMesh::square()),
            PhysicalMaterial::new_opaque(
                &context,
                &CpuMaterial {
                    albedo: Srgba::new(200, 204, 196, 255),
                    roughness: 0.9,
                    ..Default::default()
                },
            ),
        );
        ground.set_transformation(
            Mat4::from_angle_x(degrees(-90.0)) * Mat4::from_scale(ARENA_HALF_SIZE + 1.0),
        );
        // The x axis (red) and z axis (blue) on the ground: where the YZ and XY planes cut it.
        let axis = |to: Vec3, color: Srgba| {
            let mut line = Gm::new(
                Mesh::new(&context, &CpuMesh::cube()),
                ColorMaterial::new_opaque(
                    &context,
                    &CpuMaterial {
                        albedo: color,
                        ..Default::default()
                    },
                ),
            );
            line.set_transformation(bar(
                -to + vec3(0.0, 0.003, 0.0),
                to + vec3(0.0, 0.003, 0.0),
                0.012,
            ));
            line
        };
        let reach = ARENA_HALF_SIZE + 1.0;
        let axes = vec![
            axis(vec3(reach, 0.0, 0.0), Srgba::new(200, 60, 60, 255)),
            axis(vec3(0.0, 0.0, reach), Srgba::new(60, 90, 210, 255)),
        ];
        let lights = (
            AmbientLight::new(&context, 0.35, Srgba::WHITE),
            DirectionalLight::new(&context, 2.2, Srgba::WHITE, vec3(-0.4, -1.0, -0.6)),
            DirectionalLight::new(
                &context,
                0.6,
                Srgba::new(210, 220, 255, 255),
                vec3(0.7, -0.4, 0.5),
            ),
        );
        let camera = webgl::camera(vec3(0.0, 5.0, 10.0), TARGET, 45.0);
        Self {
            cubes: instanced(&CpuMesh::cube()),
            spheres: instanced(&CpuMesh::sphere(24)),
            cylinders: instanced(&capped_cylinder(28)),
            context,
            camera,
            ground,
            axes,
            visuals: Vec::new(),
            lights,
        }
    }

    pub fn set_objects(&mut self, objects: &[Drawn]) {
        let mut groups: [Instances; 3] = std::array::from_fn(|_| webgl::no_instances());
        for o in objects {
            let slot = match o.shape {
                Shape::Cube { .. } => 0,
                Shape::Sphere { .. } => 1,
                Shape::Cylinder { .. } => 2,
            };
            let group = &mut groups[slot];
            group
                .transformations
                .push(object_transform(o.shape, &o.pose));
            if let Some(colors) = group.colors.as_mut() {
                colors.push(srgba(o.color, o.highlighted));
            }
        }
        let [cubes, spheres, cylinders] = groups;
        self.cubes.geometry.set_instances(&cubes);
        self.spheres.geometry.set_instances(&spheres);
        self.cylinders.geometry.set_instances(&cylinders);
    }

    pub fn set_visuals(&mut self, visuals: &[Visual]) {
        let context = &self.context;
        let make = |mesh: CpuMesh, transform: Mat4, ok: bool| {
            let mut gm = Gm::new(
                Mesh::new(context, &mesh),
                ColorMaterial::new_transparent(
                    context,
                    &CpuMaterial {
                        albedo: goal_color(ok),
                        ..Default::default()
                    },
                ),
            );
            gm.set_transformation(transform);
            gm
        };
        // Slightly above the ground, each visual a little higher than the last, so none flickers.
        self.visuals = visuals
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let lift = 0.004 + 0.002 * i as f32;
                match *v {
                    Visual::Disc { center, radius, ok } => make(
                        ring_mesh(0.0, radius, 48),
                        Mat4::from_translation(vec3(center[0], lift, center[1])),
                        ok,
                    ),
                    Visual::Ring {
                        center,
                        inner,
                        outer,
                        ok,
                    } => make(
                        ring_mesh(inner, outer, 64),
                        Mat4::from_translation(vec3(center[0], lift, center[1])),
                        ok,
                    ),
                    Visual::Patch { from, to, ok } => make(
                        patch_mesh(from, to),
                        Mat4::from_translation(vec3(0.0, lift, 0.0)),
                        ok,
                    ),
                    Visual::Line { from, to, ok } => {
                        make(CpuMesh::cube(), bar(from.into(), to.into(), 0.02), ok)
                    }
                }
            })
            .collect();
    }

    pub fn set_view(&mut self, orbit: &Orbit, width: u32, height: u32) {
        orbit.aim(&mut self.camera, TARGET, width, height);
    }

    pub fn render(&self) {
        let objects = self
            .ground
            .into_iter()
            .chain(&self.cubes)
            .chain(&self.spheres)
            .chain(&self.cylinders)
            .chain(self.axes.iter().flat_map(|a| a.into_iter()))
            .chain(self.visuals.iter().flat_map(|v| v.into_iter()));
        webgl::render(
            &self.context,
            &self.camera,
            &self.lights,
            (0.93, 0.94, 0.96),
            objects,
        );
    }

    /// The pixel (from the canvas's top-left, in device pixels) where a point appears.
    pub fn screen_of(&self, p: [f32; 3]) -> (f32, f32) {
        let pixel = self.camera.pixel_at_position(vec3(p[0], p[1], p[2]));
        (pixel.x, self.camera.viewport().height as f32 - pixel.y)
    }

    /// Whether a point is in front of the camera (labels behind it are hidden).
    pub fn in_front(&self, p: [f32; 3]) -> bool {
        let to = vec3(p[0], p[1], p[2]) - self.camera.position();
        to.dot(self.camera.view_direction()) > 0.0
    }

    /// The ray through a pixel (from the top-left, in device pixels): origin and direction.
    pub fn ray(&self, x: f32, y: f32) -> ([f32; 3], [f32; 3]) {
        let pixel = (x, self.camera.viewport().height as f32 - y);
        let o = self.camera.position_at_pixel(pixel);
        let d = self.camera.view_direction_at_pixel(pixel);
        ([o.x, o.y, o.z], [d.x, d.y, d.z])
    }
}
