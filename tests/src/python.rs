//! Running the Python side of compatibility tests (`tests/compat/`) with atroposlib's venv.

use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::time::Duration;

pub fn atropos_python() -> PathBuf {
    match std::env::var_os("LACHESIS_ATROPOS_PYTHON") {
        Some(python) if !python.is_empty() => PathBuf::from(python),
        _ => panic!(
            "LACHESIS_ATROPOS_PYTHON is not set: run the suites through `make test`, which creates a \
             venv with atroposlib==0.4.0 and points LACHESIS_ATROPOS_PYTHON at its python"
        ),
    }
}

pub fn compat_script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("compat")
        .join(name)
}

/// Runs `python script args...`, killing it if it outlives `limit`.
pub async fn run_python(script: &str, args: &[&str], limit: Duration) -> Output {
    let python = atropos_python();
    let child = tokio::process::Command::new(&python)
        .arg(compat_script(script))
        .args(args)
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("start {} (LACHESIS_ATROPOS_PYTHON): {e}", python.display()));
    match tokio::time::timeout(limit, child.wait_with_output()).await {
        Ok(output) => output.unwrap_or_else(|e| panic!("wait for {script}: {e}")),
        Err(_) => panic!("{script} {args:?} ran for more than {limit:?} and was killed"),
    }
}

pub fn tail(bytes: &[u8], max_chars: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let chars: Vec<char> = text.chars().collect();
    chars[chars.len().saturating_sub(max_chars)..]
        .iter()
        .collect()
}

/// A file under the temp dir, removed when dropped (also when the test panics).
pub struct TempFile(pub PathBuf);

impl TempFile {
    pub fn new(label: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let name = format!("lachesis-{label}-{}-{nanos}.json", std::process::id());
        Self(std::env::temp_dir().join(name))
    }

    pub fn path(&self) -> &str {
        self.0.to_str().expect("a UTF-8 temp path")
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
