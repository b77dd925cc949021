//! The browser end to end: a real Chromium, driven by `tests/browser/e2e.mjs` (playwright-core),
//! signs in to the real server with authentication on, watches a run's dashboard and sees groups
//! posted by a trainer's token appear on the chart and in the table without a reload.
//!
//! Needs what `make test` provides: the built frontend (`LACHESIS_STATIC_DIR`), Node with the
//! repo's `node_modules` (`npm ci`, done by scripts/ensure-tools.sh) and `/usr/bin/chromium` (or
//! `CHROMIUM`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use lachesis_tests::{TestApp, config_for, fresh_database, registration};
use reqwest::StatusCode;
use serde_json::{Value, json};

const USERNAME: &str = "ada";
const PASSWORD: &str = "correct horse battery staple";
const TEAM: &str = "lab";
const RUN: &str = "e2e";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the repository")
        .to_path_buf()
}

/// Says exactly what is missing instead of letting the browser fail obscurely.
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
        "{chromium} is missing: apt-get install -y chromium (scripts/ensure-tools.sh does as root)"
    );
}

/// The first owner, through the first-run endpoint the sign-in page also uses; returns the
/// session cookie and CSRF token.
async fn create_first_owner(app: &TestApp) -> (String, String) {
    let response = app
        .client
        .post(app.url("/api/auth/setup"))
        .json(&json!({"username": USERNAME, "password": PASSWORD, "team": TEAM}))
        .send()
        .await
        .expect("POST /api/auth/setup");
    assert_eq!(response.status(), StatusCode::OK);
    let cookie = response.headers()["set-cookie"]
        .to_str()
        .expect("an ASCII cookie")
        .split(';')
        .next()
        .expect("a cookie pair")
        .to_string();
    let me: Value = response.json().await.expect("a Me body");
    let csrf = me["csrf_token"].as_str().expect("a CSRF token").to_string();
    (cookie, csrf)
}

async fn create_token(app: &TestApp, cookie: &str, csrf: &str) -> String {
    let response = app
        .client
        .post(app.url(&format!("/api/teams/{TEAM}/tokens")))
        .header("cookie", cookie)
        .header("x-csrf-token", csrf)
        .json(&json!({"name": "trainer"}))
        .send()
        .await
        .expect("POST tokens");
    assert_eq!(response.status(), StatusCode::OK);
    let created: Value = response.json().await.expect("a CreatedToken body");
    created["token"].as_str().expect("a secret").to_string()
}

#[tokio::test]
async fn a_signed_in_browser_sees_posted_groups_arrive_live() {
    let root = repo_root();
    check_prerequisites(&root);
    let mut config = config_for(&fresh_database().await);
    config.auth = true;
    let app = TestApp::spawn_with(config).await;

    let (cookie, csrf) = create_first_owner(&app).await;
    let token = create_token(&app, &cookie, &csrf).await;
    let registered = app
        .client
        .post(app.url(&format!("/runs/{RUN}/register")))
        .bearer_auth(&token)
        .json(&registration(4))
        .send()
        .await
        .expect("POST register");
    assert_eq!(registered.status(), StatusCode::OK);

    let script = root.join("tests/browser/e2e.mjs");
    let child = tokio::process::Command::new("node")
        .arg(&script)
        .current_dir(&root)
        .env("BASE_URL", &app.base)
        .env("USERNAME", USERNAME)
        .env("PASSWORD", PASSWORD)
        .env("RUN", RUN)
        .env("TOKEN", &token)
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
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let report: Value = stdout
        .lines()
        .rev()
        .find_map(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| {
            panic!("no JSON line from the script\nstdout: {stdout}\nstderr: {stderr}")
        });
    // Shown with `--nocapture`: what the browser saw.
    println!("{report}");

    assert!(
        output.status.success(),
        "the browser check failed ({}): {report:#}\nstderr: {stderr}",
        output.status
    );
    assert_eq!(report["ok"], true, "{report:#}");
    assert_eq!(report["signed_in"], true);
    assert_eq!(report["live"], true);
    assert_eq!(report["subscribed"], true);
    assert_eq!(report["texts_shown"], true, "an opened row shows its texts");
    assert_eq!(
        report["reloaded"], false,
        "the page must update without a reload"
    );
    assert_eq!(report["posted"], 3);
    let (before, after) = (&report["before"], &report["after"]);
    let grew = |key: &str| after[key].as_i64().unwrap() - before[key].as_i64().unwrap();
    assert!(grew("points") >= 3, "reward points did not grow: {report}");
    assert!(grew("rows") >= 3, "table rows did not grow: {report}");
    assert_eq!(report["console_errors"], json!([]), "{report:#}");
    assert_eq!(report["page_errors"], json!([]), "{report:#}");
}
