//! A fresh world per episode: a temporary directory holding the files the filesystem server may
//! touch, a new git repository and an empty memory graph, with each reference server started for
//! this episode alone, in a cleared environment (a server such as server-everything's `get-env`
//! would otherwise hand the model the platform's secrets).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::client::{Endpoint, McpConnection, McpError};

/// The reference servers an episode can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerKind {
    /// `@modelcontextprotocol/server-filesystem`, confined to the episode's `files/`.
    Filesystem,
    /// `@modelcontextprotocol/server-memory`, on the episode's own graph file.
    Memory,
    /// `mcp-server-git` (PyPI), on the episode's repository `files/repo`.
    Git,
    /// `@modelcontextprotocol/server-everything`, the protocol's reference of every feature.
    Everything,
}

impl ServerKind {
    pub const ALL: [ServerKind; 4] = [
        ServerKind::Filesystem,
        ServerKind::Memory,
        ServerKind::Git,
        ServerKind::Everything,
    ];
}

/// Where the servers' executables are: npm's `.bin` folder and the git server's venv.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerPrograms {
    pub npm_bin: PathBuf,
    pub git_server: PathBuf,
}

impl ServerPrograms {
    /// `LACHESIS_MCP_BIN` and `LACHESIS_MCP_GIT` when set, else where `make` installs them,
    /// relative to the working directory (the repository root for `make run`).
    pub fn from_env() -> Self {
        // Absolute, because the servers run in the sandbox, not where `lachesis` was started.
        let var = |name: &str, default: &str| {
            let path = std::env::var_os(name)
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(default));
            std::path::absolute(&path).unwrap_or(path)
        };
        Self {
            npm_bin: var("LACHESIS_MCP_BIN", "node_modules/.bin"),
            git_server: var("LACHESIS_MCP_GIT", ".venv/mcp-git/bin/mcp-server-git"),
        }
    }

    fn endpoint(&self, kind: ServerKind, sandbox: &Path) -> Endpoint {
        let files = sandbox.join("files");
        let (program, args, extra_env) = match kind {
            ServerKind::Filesystem => (
                self.npm_bin.join("mcp-server-filesystem"),
                vec![files.display().to_string()],
                vec![],
            ),
            ServerKind::Memory => (
                self.npm_bin.join("mcp-server-memory"),
                vec![],
                vec![(
                    "MEMORY_FILE_PATH".to_string(),
                    sandbox.join("memory.jsonl").display().to_string(),
                )],
            ),
            ServerKind::Git => (
                self.git_server.clone(),
                vec![
                    "--repository".into(),
                    files.join("repo").display().to_string(),
                ],
                vec![],
            ),
            ServerKind::Everything => (self.npm_bin.join("mcp-server-everything"), vec![], vec![]),
        };
        // Only what the servers need to start: their interpreter on PATH and a home of their own.
        let mut env = vec![("HOME".to_string(), sandbox.display().to_string())];
        if let Some(path) = std::env::var_os("PATH") {
            env.push(("PATH".into(), path.to_string_lossy().into_owned()));
        }
        env.extend(extra_env);
        Endpoint::Stdio {
            program,
            args,
            env,
            cwd: Some(files),
        }
    }
}

/// One episode's world and its connected servers; removed (servers stopped, files deleted) when
/// dropped.
pub struct Sandbox {
    root: PathBuf,
    pub servers: Vec<(ServerKind, McpConnection)>,
}

impl Sandbox {
    /// A fresh directory with `files/` and a git repository `files/repo` holding one commit, and
    /// the `kinds` servers connected to it.
    pub async fn open(
        programs: &ServerPrograms,
        kinds: &[ServerKind],
        timeout: Duration,
    ) -> Result<Self, McpError> {
        let root = std::env::temp_dir().join(format!(
            "lachesis-mcp-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        let mut sandbox = Self {
            root,
            servers: Vec::new(),
        };
        sandbox.prepare().await.map_err(|e| McpError::Spawn {
            program: "the episode's sandbox".into(),
            reason: e.to_string(),
        })?;
        let connects = kinds.iter().map(|&kind| {
            let endpoint = programs.endpoint(kind, &sandbox.root);
            async move { (kind, McpConnection::connect(&endpoint, timeout).await) }
        });
        for (kind, connection) in futures::future::join_all(connects).await {
            sandbox.servers.push((kind, connection?));
        }
        Ok(sandbox)
    }

    async fn prepare(&self) -> std::io::Result<()> {
        let repo = self.repo();
        tokio::fs::create_dir_all(&repo).await?;
        git(&repo, &["init", "-q", "-b", "main"]).await?;
        git(&repo, &["config", "user.name", "Lachesis episode"]).await?;
        git(&repo, &["config", "user.email", "episode@lachesis.invalid"]).await?;
        tokio::fs::write(repo.join("README.md"), "An episode's repository.\n").await?;
        git(&repo, &["add", "README.md"]).await?;
        git(&repo, &["commit", "-q", "-m", "Start"]).await?;
        Ok(())
    }

    /// The directory the filesystem server may touch (the servers' working directory).
    pub fn files(&self) -> PathBuf {
        self.root.join("files")
    }

    /// The git repository, `files/repo`.
    pub fn repo(&self) -> PathBuf {
        self.files().join("repo")
    }

    /// The memory server's graph file.
    pub fn memory_file(&self) -> PathBuf {
        self.root.join("memory.jsonl")
    }

    /// The connection of a server of this kind.
    pub fn server(&self, kind: ServerKind) -> Option<&McpConnection> {
        self.servers
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, c)| c)
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        // The connections (and with them the child processes) go first, then the files.
        self.servers.clear();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Runs git in `repo` with no user configuration but the repository's own.
pub async fn git(repo: &Path, args: &[&str]) -> std::io::Result<String> {
    let output = tokio::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .await?;
    if !output.status.success() {
        return Err(std::io::Error::other(format!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}
