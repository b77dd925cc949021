//! Driving the built frontend in a real Chromium: the Node scripts under `tests/browser/`
//! (playwright-core) each print one JSON report as their last JSON line.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use serde_json::Value;

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the repository")
        .to_path_buf()
}

/// Says exactly what is missing instead of letting the browser fail obscurely.
pub fn check_prerequisites() {
    let root = repo_root();
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

/// What a browser script printed and how it ended.
pub struct ScriptRun {
    pub report: Value,
    pub status: ExitStatus,
    pub stderr: String,
}

impl ScriptRun {
    /// Asserts the script exited 0 with `"ok": true` and the page logged no console error and
    /// threw no page error; returns its report.
    pub fn passed(self) -> Value {
        let Self {
            report,
            status,
            stderr,
        } = self;
        assert!(
            status.success(),
            "the browser check failed ({status}): {report:#}\nstderr: {stderr}"
        );
        assert_eq!(report["ok"], true, "{report:#}");
        assert_eq!(
            report["console_errors"],
            serde_json::json!([]),
            "{report:#}"
        );
        assert_eq!(report["page_errors"], serde_json::json!([]), "{report:#}");
        report
    }
}

/// Runs `tests/browser/<script>` against `base_url` with extra environment variables (and
/// `SCREENSHOT_DIR` from `LACHESIS_SCREENSHOT_DIR`), waiting at most `limit`. Panics with both
/// outputs when the script prints no JSON report.
pub async fn run_script(
    script: &str,
    base_url: &str,
    env: &[(&str, String)],
    limit: Duration,
) -> ScriptRun {
    let root = repo_root();
    let child = tokio::process::Command::new("node")
        .arg(root.join("tests/browser").join(script))
        .current_dir(&root)
        .env("BASE_URL", base_url)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .envs(std::env::var_os("LACHESIS_SCREENSHOT_DIR").map(|d| ("SCREENSHOT_DIR", d)))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs (is Node.js installed?)");
    let output = tokio::time::timeout(limit, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("the browser script {script} finishes within {limit:?}"))
        .expect("the browser script's output");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let report: Value = stdout
        .lines()
        .rev()
        .find_map(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| {
            panic!("no JSON line from the script\nstdout: {stdout}\nstderr: {stderr}")
        });
    // Shown with `--nocapture`: what the browser saw.
    println!("{report}");
    ScriptRun {
        report,
        status: output.status,
        stderr,
    }
}
