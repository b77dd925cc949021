//! The spatial viewer end to end in a real Chromium (`tests/browser/spatial.mjs`, playwright-core):
//! the live page shows an episode streamed through the scene streamer; on the solve page the
//! viewer draws the movable object (pixel check), a mouse drag moves it onto the goal region, and
//! Submit shows the server's verdict, which is stored as a demonstration.
//!
//! Needs what `make test` provides: the built frontend (`LACHESIS_STATIC_DIR`), the repo's
//! `node_modules` and `/usr/bin/chromium` (or `CHROMIUM`).

use std::time::Duration;

use lachesis::envs::spatial::{
    Episode, SceneSink, generate::generate, judge, render_actions, solve,
};
use lachesis::spatial::{LIVE_SCENE, SceneStreamer};
use lachesis_shared::spatial::{Constraint, Task};
use lachesis_tests::TestApp;
use lachesis_tests::browser::{check_prerequisites, run_script};
use serde_json::Value;

/// A difficulty-1 task whose goal is a region away from the movable object, and whose object
/// has a clear colour (not the ground's grey), so the pixel checks mean something.
fn region_task() -> Task {
    (0..1000)
        .map(|seed| generate(seed, 1))
        .find(|task| {
            let object = task.object(&task.movable[0]).expect("the movable object exists");
            let [r, g, b] = object.color;
            let sum = r + g + b;
            let grey = ((r / sum - 1.0 / 3.0).powi(2) + (g / sum - 1.0 / 3.0).powi(2) + (b / sum - 1.0 / 3.0).powi(2)).sqrt();
            matches!(&task.goals[0].constraint, Constraint::Region { center, .. }
                if ((center[0] - object.position[0]).powi(2) + (center[1] - object.position[2]).powi(2)).sqrt() > 2.0)
                && grey > 0.2
        })
        .expect("a region task among the first 1000 seeds")
}

#[tokio::test]
async fn the_viewer_draws_the_scene_a_drag_moves_an_object_and_the_verdict_appears() {
    check_prerequisites();
    let app = TestApp::spawn().await;
    let task = region_task();
    let object = task.object(&task.movable[0]).unwrap().clone();

    // The live scene: the solver's attempt at the same task, streamed again every few seconds so
    // the page sees one whenever it subscribes.
    let db = lachesis::db::connect(&app.database_url, 2).await.unwrap();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let (streamer, player) = SceneStreamer::spawn(db, LIVE_SCENE.into(), stopped);
    let answer = render_actions(&solve::solve(&task).actions);
    let live_task = task.clone();
    let feeder = tokio::spawn(async move {
        loop {
            let (verdict, recording, attempt) = judge(&live_task, &answer);
            streamer.episode(Episode {
                task: live_task.clone(),
                caption: "solver (attempt 1 of 1)".into(),
                attempt,
                recording,
                verdict,
            });
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
    });

    let env = [
        ("DIFFICULTY", task.difficulty.to_string()),
        ("SEED", task.seed.to_string()),
        ("OBJECT", object.id.clone()),
        ("COLOR", object.color.map(|c| c.to_string()).join(",")),
    ];
    let run = run_script("spatial.mjs", &app.base, &env, Duration::from_secs(180)).await;
    feeder.abort();
    let _ = stop.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(5), player).await;

    let report = run.passed();
    assert!(
        report["live_caption"].as_str().unwrap().contains("solver"),
        "{report:#}"
    );
    assert_eq!(report["live_object_drawn"], true, "{report:#}");
    assert_eq!(
        report["drawn_before"], true,
        "the object is drawn where its label says"
    );
    assert_eq!(
        report["ground_before"], false,
        "the goal region starts empty"
    );
    assert_eq!(
        report["drawn_after"], true,
        "the object is drawn where it was dragged"
    );
    assert_eq!(report["left_behind"], false, "and no longer where it was");
    let verdict = report["verdict"].as_str().unwrap();
    let score: f64 = verdict
        .trim()
        .trim_start_matches("Score ")
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        score >= 0.95,
        "a drag onto the region solves the task: {verdict}"
    );

    let exported = app.get_text("/api/spatial/demonstrations.jsonl").await;
    let line: Value = serde_json::from_str(exported.trim()).expect("one demonstration");
    assert_eq!(line["task_id"], task.id);
    assert!((line["score"].as_f64().unwrap() - score).abs() < 0.01);
}
