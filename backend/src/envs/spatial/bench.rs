//! The physics benchmark's scene: `bodies` cubes, spheres and cylinders dropped in layers onto
//! the ground so they collide and pile up, stepped a fixed number of times. The same scene is
//! written as JSON for `scripts/bench-physics.sh`, which builds it in PyBullet.

use std::time::Instant;

use lachesis_shared::spatial::{ObjectSpec, Shape};
use serde::Serialize;

use super::physics::World;

/// Bodies per row and column of one layer.
const GRID: usize = 10;
const SPACING: f32 = 0.6;
const LAYER_HEIGHT: f32 = 0.8;

/// The benchmark scene: a 10 x 10 grid per layer, layers 0.8 m apart, shapes in turn.
pub fn scene(bodies: usize) -> Vec<ObjectSpec> {
    (0..bodies)
        .map(|i| {
            let layer = i / (GRID * GRID);
            let row = (i / GRID) % GRID;
            let column = i % GRID;
            // Odd layers are offset by half a cell, so bodies land on edges and tumble.
            let offset = if layer % 2 == 1 { SPACING / 2.0 } else { 0.0 };
            let shape = match i % 3 {
                0 => Shape::Cube { size: 0.4 },
                1 => Shape::Sphere { radius: 0.2 },
                _ => Shape::Cylinder {
                    radius: 0.2,
                    height: 0.4,
                },
            };
            let origin = -(GRID as f32 - 1.0) * SPACING / 2.0;
            ObjectSpec {
                id: format!("body_{i}"),
                shape,
                color: [0.5; 3],
                mass: 1.0,
                friction: 0.6,
                restitution: 0.1,
                position: [
                    origin + column as f32 * SPACING + offset,
                    0.5 + layer as f32 * LAYER_HEIGHT,
                    origin + row as f32 * SPACING + offset,
                ],
                yaw_deg: (i % 8) as f32 * 11.25,
            }
        })
        .collect()
}

#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub engine: &'static str,
    pub bodies: usize,
    pub steps: u32,
    pub seconds: f64,
    pub steps_per_second: f64,
    /// The bodies' mean centre height at the end: both engines should end with a similar pile.
    pub mean_final_height: f64,
    /// Bodies whose centre ended below the ground: 0 for a sound run (see scripts/bench-physics.sh).
    pub below_ground: usize,
}

/// Steps the scene `steps` times at 60 Hz with no body ever put to sleep (building the world is
/// not timed).
pub fn run(bodies: usize, steps: u32) -> BenchReport {
    let mut world = World::new_awake(&scene(bodies));
    let started = Instant::now();
    for _ in 0..steps {
        world.step();
    }
    let seconds = started.elapsed().as_secs_f64();
    let poses = world.poses();
    let mean_final_height = poses
        .iter()
        .map(|p| f64::from(p.pose.position[1]))
        .sum::<f64>()
        / poses.len().max(1) as f64;
    BenchReport {
        engine: "rapier3d 0.36.1",
        bodies,
        steps,
        seconds,
        steps_per_second: f64::from(steps) / seconds.max(f64::EPSILON),
        mean_final_height,
        below_ground: poses.iter().filter(|p| p.pose.position[1] < 0.0).count(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_bench_scene_piles_up_on_the_ground_without_losing_bodies() {
        let objects = super::scene(200);
        let mut world = super::World::new(&objects);
        world.run_to_rest(600, 0);
        let poses = world.poses();
        assert_eq!(poses.len(), 200);
        assert!(
            poses
                .iter()
                .all(|p| p.pose.position[1] > 0.0 && p.pose.position[1] < 3.0)
        );
    }
}
