//! `hands` requests: `byre client --hands-mcp CMD` starts CMD (its words split on
//! whitespace, no shell; the environment [`super::env`] passes on) as an MCP server over
//! stdio, in its own process group, when the
//! first `hands` request comes, and calls its tools with rmcp's client; the reply's `result`
//! is the tool's `CallToolResult` as it is. A server that died is started again at the next
//! request; it is killed with the client.

use std::process::Stdio;

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};
use tokio::sync::Mutex;

/// A started hands server: the MCP session and its process (killed on drop).
struct Running {
    service: RunningService<RoleClient, ()>,
    _child: tokio::process::Child,
}

/// The byre-hands MCP server of this client, if `--hands-mcp` was given.
pub struct Hands {
    command: Option<String>,
    running: Mutex<Option<Running>>,
}

impl Hands {
    /// Hands for `--hands-mcp` `command` (none: `hands` requests fail saying so).
    pub fn new(command: Option<String>) -> Hands {
        Hands {
            command,
            running: Mutex::new(None),
        }
    }

    async fn start(command: &str) -> Result<Running, String> {
        let mut words = command.split_whitespace();
        let program = words.next().ok_or("--hands-mcp is empty")?;
        let mut child = tokio::process::Command::new(program)
            .args(words)
            .env_clear()
            .envs(super::env::for_commands())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start the hands server `{command}`: {e}"))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let service = ()
            .serve((stdout, stdin))
            .await
            .map_err(|e| format!("the hands server did not start MCP: {e}"))?;
        println!("started the hands server `{command}`");
        Ok(Running {
            service,
            _child: child,
        })
    }

    /// Calls the request's `tool` with its `arguments`; the reply is `{"result": …}`.
    /// # Errors
    /// No `--hands-mcp`, the server could not start, or the call failed at the MCP level
    /// (a tool's own failure is a result with `isError`, not an error).
    pub async fn call(&self, request: &Value) -> Result<Value, String> {
        let command = self
            .command
            .as_deref()
            .ok_or("this machine's byre client runs no hands server (start it with --hands-mcp)")?;
        let tool = request["tool"]
            .as_str()
            .ok_or("`tool` is required")?
            .to_owned();
        let arguments = match &request["arguments"] {
            Value::Object(map) => map.clone(),
            _ => serde_json::Map::new(),
        };
        let mut running = self.running.lock().await;
        if running.is_none() {
            *running = Some(Self::start(command).await?);
        }
        let service = &running.as_ref().ok_or("not started")?.service;
        let params = CallToolRequestParams::new(tool).with_arguments(arguments);
        match service.call_tool(params).await {
            Ok(result) => {
                Ok(json!({"result": serde_json::to_value(result).map_err(|e| e.to_string())?}))
            }
            Err(e) => {
                // Start it afresh next time: it may have died.
                *running = None;
                Err(format!("the hands server failed: {e}"))
            }
        }
    }
}
