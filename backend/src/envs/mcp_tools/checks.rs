//! Whether a task's outcome holds, read from the world itself after the episode: the files on
//! disk, the memory server's graph file, the repository's log, or the final answer.

use serde_json::Value;

use super::sandbox::{Sandbox, git};
use super::tasks::{Check, first_integer};

/// Whether `check` holds in the sandbox, given the episode's final answer.
pub async fn holds(check: &Check, sandbox: &Sandbox, answer: Option<&str>) -> bool {
    let files = sandbox.files();
    match check {
        Check::FileHolds { path, content } => {
            tokio::fs::read_to_string(files.join(path))
                .await
                .ok()
                .as_deref()
                == Some(content)
        }
        Check::FileMoved { from, to, content } => {
            let moved = tokio::fs::read_to_string(files.join(to)).await.ok();
            moved.as_deref() == Some(content) && !files.join(from).exists()
        }
        Check::MemoryRelation { from, to, relation } => {
            memory_lines(sandbox).await.iter().any(|line| {
                line["type"] == "relation"
                    && line["from"] == from.as_str()
                    && line["to"] == to.as_str()
                    && line["relationType"] == relation.as_str()
            })
        }
        Check::MemoryObservation {
            entity,
            observation,
        } => memory_lines(sandbox).await.iter().any(|line| {
            line["type"] == "entity"
                && line["name"] == entity.as_str()
                && line["observations"]
                    .as_array()
                    .is_some_and(|o| o.iter().any(|x| x == observation.as_str()))
        }),
        Check::Committed {
            message,
            path,
            content,
        } => {
            let repo = sandbox.repo();
            let subject = git(&repo, &["log", "-1", "--format=%s"]).await;
            let stored = git(&repo, &["show", &format!("HEAD:{path}")]).await;
            matches!((subject, stored), (Ok(s), Ok(c)) if s.trim_end() == message && &c == content)
        }
        Check::Branch { name } => git(&sandbox.repo(), &["branch", "--list", name])
            .await
            .is_ok_and(|listed| !listed.trim().is_empty()),
        Check::AnswerIs { value } => answer.and_then(first_integer) == Some(*value),
    }
}

/// The memory graph, one JSON object per line (unreadable lines skipped: the check then fails
/// on its own terms rather than on the file's).
async fn memory_lines(sandbox: &Sandbox) -> Vec<Value> {
    let text = tokio::fs::read_to_string(sandbox.memory_file())
        .await
        .unwrap_or_default();
    text.lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}
