//! The spatial viewer end to end in a real Chromium (`tests/browser/spatial.mjs`, playwright-core):
//! the live page shows an episode streamed through the scene streamer; on the solve page the
//! viewer draws the movable object (pixel check), a mouse drag moves it onto the goal region, and
//! Submit shows the server's verdict, which is stored as a demonstration.
//!
//! Needs what `make test` provides: the built frontend (`LACHESIS_STATIC_DIR`), the repo's
//! `node_modules` and `/usr/bin/chromium` (or `CHROMIUM`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use lachesis::envs::spatial::{
    Episode, SceneSink, generate::generate, judge, render_actions, solve,
};
use lachesis::spatial::{LIVE_SCENE, SceneStreamer};
use lachesis_shared::spatial::{Constraint, Task};
use lachesis_tests::TestApp;
use serde_json::{Value, json};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the repository")
        .to_path_buf()
}

fn check_prerequisites(root: &Path) {
    let static_dir = std::env::var_os("LACHESIS_STATIC_DIR").map(PathBuf::from);
    assert!(
        static_dir
            .as_ref()
            .is_some_and(|d| d.join("index.html").exists()),
        "LACHESIS_STATIC_DIR must point at the built frontend (scripts/build-frontend.sh writes frontend/dist)"
    );
    assert!(
        root.join("node_modules/playwright-core/package.json")
            .exists(),
        "node_modules/playwright-core is missing: run scripts/ensure-tools.sh (npm ci)"
    );
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&chromium).exists(),
        "{chromium} is missing: apt-get install -y chromium"
    );
}

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
    let root = repo_root();
    check_prerequisites(&root);
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

    let child = tokio::process::Command::new("node")
        .arg(root.join("tests/browser/spatial.mjs"))
        .current_dir(&root)
        .env("BASE_URL", &app.base)
        .env("DIFFICULTY", task.difficulty.to_string())
        .env("SEED", task.seed.to_string())
        .env("OBJECT", &object.id)
        .env("COLOR", object.color.map(|c| c.to_string()).join(","))
        .envs(std::env::var_os("LACHESIS_SCREENSHOT_DIR").map(|d| ("SCREENSHOT_DIR", d)))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs (is Node.js installed?)");
    let output = tokio::time::timeout(Duration::from_secs(180), child.wait_with_output())
        .await
        .expect("the browser script finishes within 3 minutes")
        .expect("the browser script's output");
    feeder.abort();
    let _ = stop.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(5), player).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let report: Value = stdout
        .lines()
        .rev()
        .find_map(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| {
            panic!("no JSON line from the script\nstdout: {stdout}\nstderr: {stderr}")
        });
    println!("{report}");

    assert!(
        output.status.success(),
        "the browser check failed: {report:#}\nstderr: {stderr}"
    );
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
    assert_eq!(report["console_errors"], json!([]), "{report:#}");
    assert_eq!(report["page_errors"], json!([]), "{report:#}");

    let exported = app
        .client
        .get(app.url("/api/spatial/demonstrations.jsonl"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let line: Value = serde_json::from_str(exported.trim()).expect("one demonstration");
    assert_eq!(line["task_id"], task.id);
    assert!((line["score"].as_f64().unwrap() - score).abs() < 0.01);
}
