//! `McpTool`: an upstream MCP tool behind the kernel `Tool` trait.

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use ravi_kernel::{Tool, ToolContext, ToolError, ToolErrorKind, ToolExecutionResult, ToolRisk};
use serde_json::Value;

use super::client::{CallError, McpClient, UpstreamTool};
use super::convert::result_from_mcp;
use super::names::NameMap;
use super::risk::risk_for;

/// One upstream tool under its local name (`server__tool`), with its risk resolved.
pub struct McpTool {
    client: McpClient,
    local: String,
    upstream: UpstreamTool,
    risk: ToolRisk,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("local", &self.local)
            .field("upstream", &self.upstream.name)
            .field("risk", &self.risk)
            .finish()
    }
}

impl McpTool {
    /// Every tool of `client`, named `server__tool` and kept clear of `taken` names.
    ///
    /// Risk comes from the spec's per-tool overrides first, then the server's annotations.
    pub fn from_client(client: &McpClient) -> Vec<Arc<dyn Tool>> {
        Self::from_client_avoiding(client, &HashSet::new())
    }

    /// Like [`McpTool::from_client`], avoiding names other tools already use.
    pub fn from_client_avoiding(client: &McpClient, taken: &HashSet<String>) -> Vec<Arc<dyn Tool>> {
        // The operator's `allow`/`deny` decide which tools are served at all; `rename` their
        // names.
        let spec = client.spec();
        let tools: Vec<UpstreamTool> = client
            .tools()
            .into_iter()
            .filter(|t| spec.serves(&t.name))
            .collect();
        let names = NameMap::build_renamed(
            client.name(),
            tools.iter().map(|t| t.name.as_str()),
            &spec.rename,
            taken,
        );
        tools
            .into_iter()
            .filter_map(|t| {
                let local = names.local(&t.name)?.to_owned();
                let configured = client.spec().risk.get(&t.name).copied();
                let risk = risk_for(configured, t.annotations.as_ref());
                Some(Arc::new(Self {
                    client: client.clone(),
                    local,
                    upstream: t,
                    risk,
                }) as Arc<dyn Tool>)
            })
            .collect()
    }

    /// The upstream tool's name on its server.
    pub fn upstream_name(&self) -> &str {
        &self.upstream.name
    }
}

#[async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.local
    }

    fn description(&self) -> &str {
        &self.upstream.description
    }

    fn input_schema(&self) -> Value {
        self.upstream.input_schema.clone()
    }

    fn output_schema(&self) -> Option<Value> {
        self.upstream.output_schema.clone()
    }

    fn risk(&self) -> ToolRisk {
        self.risk
    }

    /// The server's `idempotentHint` (an untrusted hint, like every annotation: it only decides
    /// whether a call interrupted by a crash is run again or reported in doubt).
    fn idempotent(&self) -> bool {
        self.upstream
            .annotations
            .as_ref()
            .and_then(|a| a.get("idempotentHint"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    async fn execute(
        &self,
        ctx: &ToolContext,
        args: Value,
    ) -> Result<ToolExecutionResult, ToolError> {
        match self
            .client
            .call(&self.upstream.name, args, ctx, None, &self.local)
            .await
        {
            Ok(wire) => Ok(result_from_mcp(&wire)),
            Err(e) => {
                let kind = match &e {
                    CallError::Timeout { .. } => ToolErrorKind::Timeout,
                    CallError::Cancelled { .. } => ToolErrorKind::Cancelled,
                    CallError::Disconnected { .. } => ToolErrorKind::Unavailable,
                    CallError::Protocol { .. } => ToolErrorKind::InvalidArguments,
                    #[allow(unreachable_patterns)]
                    _ => ToolErrorKind::Internal,
                };
                Err(ToolError::new(kind, e.to_string()))
            }
        }
    }
}
