"""The PyBullet side of scripts/bench-physics.sh: builds the scene `lachesis spatial bench
--scene-out` wrote (the same bodies, shapes, masses, friction, restitution and start poses), steps
it at 60 Hz with sleeping disabled, and prints one JSON line like the Rust side's.

Axes: the scene is Y-up (as rapier and three-d are); PyBullet is Z-up. A rotation of +90 degrees
about X maps one onto the other: (x, y, z) Y-up -> (x, -z, y) Z-up. Cylinders are upright in both
(PyBullet's cylinder axis is its local Z, ours is Y). Yaw about Y becomes yaw about Z.
"""

import json
import math
import sys
import time

import pybullet as p


def to_z_up(v):
    x, y, z = v
    return [x, -z, y]


def main(scene_path, steps, solver_iterations):
    scene = json.load(open(scene_path))
    p.connect(p.DIRECT)
    p.setGravity(0, 0, -9.81)
    p.setTimeStep(1.0 / 60.0)
    if solver_iterations:
        p.setPhysicsEngineParameter(numSolverIterations=solver_iterations)
    # The ground: a fixed slab whose top is at height 0, as on the Rust side.
    ground = p.createCollisionShape(p.GEOM_BOX, halfExtents=[20, 20, 0.5])
    p.createMultiBody(0, ground, basePosition=[0, 0, -0.5])
    p.changeDynamics(0, -1, lateralFriction=0.8)
    bodies = []
    for obj in scene:
        shape = obj["shape"]
        if shape["kind"] == "cube":
            h = shape["size"] / 2
            col = p.createCollisionShape(p.GEOM_BOX, halfExtents=[h, h, h])
        elif shape["kind"] == "sphere":
            col = p.createCollisionShape(p.GEOM_SPHERE, radius=shape["radius"])
        else:
            col = p.createCollisionShape(
                p.GEOM_CYLINDER, radius=shape["radius"], height=shape["height"]
            )
        yaw = math.radians(obj["yaw_deg"])
        body = p.createMultiBody(
            obj["mass"],
            col,
            basePosition=to_z_up(obj["position"]),
            baseOrientation=p.getQuaternionFromEuler([0, 0, yaw]),
        )
        p.changeDynamics(
            body,
            -1,
            lateralFriction=obj["friction"],
            restitution=obj["restitution"],
            activationState=p.ACTIVATION_STATE_DISABLE_SLEEPING,
        )
        bodies.append(body)
    started = time.perf_counter()
    for _ in range(steps):
        p.stepSimulation()
    seconds = time.perf_counter() - started
    heights = [p.getBasePositionAndOrientation(b)[0][2] for b in bodies]
    iterations = p.getPhysicsEngineParameters()["numSolverIterations"]
    print(
        json.dumps(
            {
                "engine": f"pybullet {p.getAPIVersion()} ({iterations} solver iterations)",
                "bodies": len(bodies),
                "steps": steps,
                "seconds": seconds,
                "steps_per_second": steps / seconds,
                "mean_final_height": sum(heights) / len(heights),
                "below_ground": sum(1 for h in heights if h < 0),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 0)
