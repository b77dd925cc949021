//! One connection to an MCP server through the official SDK (`rmcp`): a child process over stdio
//! or a streamable HTTP endpoint. Discovery follows pagination and `list_changed`; calls are
//! bounded in time and their results reduced to what a model reads (text) and what a checker
//! reads (structured content), with every failure a typed [`McpError`].

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lachesis_shared::tools::ToolSpec;
use rmcp::model::{CallToolRequestParams, ContentBlock};
use rmcp::service::{NotificationContext, RunningService, ServiceError};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Map, Value};

/// Where a server runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A child process speaking MCP over stdin/stdout.
    Stdio {
        program: PathBuf,
        args: Vec<String>,
        env: Vec<(String, String)>,
        cwd: Option<PathBuf>,
    },
    /// A streamable HTTP endpoint (`http://host:port/mcp`).
    Http { url: String },
}

/// Why a server could not be reached or a call did not complete.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum McpError {
    #[error("starting the MCP server {program}: {reason}")]
    Spawn { program: String, reason: String },
    #[error("the MCP server did not complete the handshake: {0}")]
    Handshake(String),
    #[error("the MCP server did not answer within {0:?}")]
    Timeout(Duration),
    #[error("the MCP server is gone (its connection closed)")]
    ServerGone,
    #[error("the MCP server refused the request: {0}")]
    Refused(String),
    #[error("the MCP server answered out of protocol: {0}")]
    Protocol(String),
}

impl From<ServiceError> for McpError {
    fn from(e: ServiceError) -> Self {
        match e {
            ServiceError::McpError(e) => McpError::Refused(e.message.to_string()),
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => McpError::ServerGone,
            ServiceError::Timeout { timeout } => McpError::Timeout(timeout),
            ServiceError::Cancelled { .. } => McpError::ServerGone,
            other => McpError::Protocol(other.to_string()),
        }
    }
}

/// What a tool call gave back.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// Its text blocks joined, and a line per non-text block saying what it was.
    pub text: String,
    /// Its structured content, when the tool declares one.
    pub structured: Option<Value>,
    /// The tool said the call failed (`isError`): the model sees the message, the call is wasted.
    pub is_error: bool,
}

/// Remembers that the server said its tool list changed, so the next listing fetches it again.
#[derive(Clone, Default)]
struct ListWatcher {
    changed: Arc<AtomicBool>,
}

impl ClientHandler for ListWatcher {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.changed.store(true, Ordering::SeqCst);
        std::future::ready(())
    }
}

/// A live connection. Dropping it ends the session; a child process is killed with it.
pub struct McpConnection {
    service: RunningService<RoleClient, ListWatcher>,
    changed: Arc<AtomicBool>,
    tools: Vec<ToolSpec>,
    child_pid: Option<u32>,
    timeout: Duration,
}

impl McpConnection {
    /// Starts (or reaches) the server and completes the MCP handshake within `timeout`.
    pub async fn connect(endpoint: &Endpoint, timeout: Duration) -> Result<Self, McpError> {
        let watcher = ListWatcher::default();
        let changed = watcher.changed.clone();
        let handshake = async {
            match endpoint {
                Endpoint::Stdio {
                    program,
                    args,
                    env,
                    cwd,
                } => {
                    let mut command = tokio::process::Command::new(program);
                    command.args(args).envs(env.iter().cloned());
                    if let Some(cwd) = cwd {
                        command.current_dir(cwd);
                    }
                    let (transport, _stderr) = TokioChildProcess::builder(command)
                        .stderr(std::process::Stdio::null())
                        .spawn()
                        .map_err(|e| McpError::Spawn {
                            program: program.display().to_string(),
                            reason: e.to_string(),
                        })?;
                    let pid = transport.id();
                    let service = watcher
                        .serve(transport)
                        .await
                        .map_err(|e| McpError::Handshake(e.to_string()))?;
                    Ok::<_, McpError>((service, pid))
                }
                Endpoint::Http { url } => {
                    let transport = StreamableHttpClientTransport::from_uri(url.as_str());
                    let service = watcher
                        .serve(transport)
                        .await
                        .map_err(|e| McpError::Handshake(e.to_string()))?;
                    Ok((service, None))
                }
            }
        };
        let (service, child_pid) = tokio::time::timeout(timeout, handshake)
            .await
            .map_err(|_| McpError::Timeout(timeout))??;
        let mut connection = Self {
            service,
            changed,
            tools: Vec::new(),
            child_pid,
            timeout,
        };
        connection.refresh_tools().await?;
        Ok(connection)
    }

    /// The server's tools, fetched again if it said they changed since the last listing.
    pub async fn tools(&mut self) -> Result<&[ToolSpec], McpError> {
        if self.changed.swap(false, Ordering::SeqCst) {
            self.refresh_tools().await?;
        }
        Ok(&self.tools)
    }

    /// Every page of `tools/list`.
    async fn refresh_tools(&mut self) -> Result<(), McpError> {
        let listed = tokio::time::timeout(self.timeout, self.service.list_all_tools())
            .await
            .map_err(|_| McpError::Timeout(self.timeout))??;
        self.tools = listed
            .into_iter()
            .map(|tool| ToolSpec {
                name: tool.name.to_string(),
                description: tool.description.map(|d| d.to_string()),
                parameters: Value::Object((*tool.input_schema).clone()),
            })
            .collect();
        Ok(())
    }

    /// Calls a tool; a call running past `timeout` is abandoned (the SDK sends the server a
    /// cancellation when the request future is dropped).
    pub async fn call(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        timeout: Duration,
    ) -> Result<ToolResult, McpError> {
        if self.service.is_closed() {
            return Err(McpError::ServerGone);
        }
        let params = CallToolRequestParams::new(name.to_string()).with_arguments(arguments);
        let result = tokio::time::timeout(timeout, self.service.call_tool(params))
            .await
            .map_err(|_| McpError::Timeout(timeout))??;
        let text = result
            .content
            .iter()
            .map(|block| match block {
                ContentBlock::Text(text) => text.text.clone(),
                ContentBlock::Image(_) => "[an image]".to_string(),
                ContentBlock::Audio(_) => "[an audio clip]".to_string(),
                ContentBlock::Resource(_) => "[an embedded resource]".to_string(),
                ContentBlock::ResourceLink(link) => format!("[a link to {}]", link.uri),
                _ => "[content of another kind]".to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n");
        Ok(ToolResult {
            text,
            structured: result.structured_content,
            is_error: result.is_error.unwrap_or(false),
        })
    }

    /// The child process's id, for a server started over stdio.
    pub fn child_pid(&self) -> Option<u32> {
        self.child_pid
    }
}
