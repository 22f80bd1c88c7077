//! `McpTool`: an upstream MCP tool behind the kernel `Tool` trait.

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use ravi_kernel::{
    Tool, ToolContext, ToolEffects, ToolError, ToolErrorKind, ToolExecutionResult, ToolRisk,
};
use serde_json::Value;

use super::client::{CallError, McpClient, UpstreamTool};
use super::convert::result_from_mcp;
use super::names::NameMap;
use super::risk::{effects_for, risk_for};

/// One upstream tool under its local name (`server__tool`), with its risk resolved.
///
/// Its arguments are validated against the upstream schema with the properties that have a
/// `default` no longer required, and a call missing one of those is relayed with the default
/// filled in, as the server would have used it; the result's application data names what was
/// filled (`"filled_defaults": {"scale": "css"}`). See [`defaults`](super::defaults).
pub struct McpTool {
    client: McpClient,
    local: String,
    upstream: UpstreamTool,
    /// The schema calls are validated against: the upstream one, relaxed.
    schema: Value,
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
    ///
    /// Tools Ravi cannot call are left out ([`UpstreamTool::left_out_because`]: an
    /// `execution.taskSupport` it does not know); [`McpClient::left_out`] lists them. Tools
    /// that run only as MCP Tasks are offered and called as tasks.
    pub fn from_client_avoiding(client: &McpClient, taken: &HashSet<String>) -> Vec<Arc<dyn Tool>> {
        // The operator's `allow`/`deny` decide which tools are served at all; `rename` their
        // names.
        let spec = client.spec();
        let tools: Vec<UpstreamTool> = client
            .tools()
            .into_iter()
            .filter(|t| spec.serves(&t.name) && t.left_out_because().is_none())
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
                    schema: super::defaults::relaxed(&t.input_schema),
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
        self.schema.clone()
    }

    fn output_schema(&self) -> Option<Value> {
        self.upstream.output_schema.clone()
    }

    fn risk(&self) -> ToolRisk {
        self.risk
    }

    /// The effects the server's annotations state, each hint it left out at the spec's default
    /// (not read-only, destructive, not idempotent, open-world): relayed as the upstream said,
    /// whatever risk the operator configured.
    fn effects(&self) -> ToolEffects {
        effects_for(self.upstream.annotations.as_ref())
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
        mut args: Value,
    ) -> Result<ToolExecutionResult, ToolError> {
        let filled = super::defaults::fill(&self.upstream.input_schema, &mut args);
        if !filled.is_empty() {
            let shown = Value::Object(filled.clone());
            tracing::debug!(tool = %self.local, filled = %shown,
                "relayed with the schema defaults of missing required properties");
        }
        match self
            .client
            .call(&self.upstream.name, args, ctx, None, &self.local)
            .await
        {
            Ok(wire) => {
                let mut result = result_from_mcp(&wire);
                if !filled.is_empty() {
                    let mut data = match result.app_data.take() {
                        Some(Value::Object(m)) => m,
                        Some(other) => {
                            let mut m = serde_json::Map::new();
                            m.insert("app_data".into(), other);
                            m
                        }
                        None => serde_json::Map::new(),
                    };
                    data.insert("filled_defaults".into(), Value::Object(filled));
                    result.app_data = Some(Value::Object(data));
                }
                Ok(result)
            }
            Err(e) => {
                let kind = match &e {
                    CallError::Timeout { .. } => ToolErrorKind::Timeout,
                    CallError::Cancelled { .. } => ToolErrorKind::Cancelled,
                    CallError::Disconnected { .. } => ToolErrorKind::Unavailable,
                    CallError::Protocol { .. } => ToolErrorKind::InvalidArguments,
                    #[allow(
                        unreachable_patterns,
                        reason = "the matched enum is non-exhaustive: a future variant is handled, not a compile error"
                    )]
                    _ => ToolErrorKind::Internal,
                };
                Err(ToolError::new(kind, e.to_string()))
            }
        }
    }
}
