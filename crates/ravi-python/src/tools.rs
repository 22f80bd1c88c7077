//! Tools from Python: a Python callable as a kernel tool ([`PyTool`], described by a
//! [`PyToolSpec`]), and Ravi's own tools as an opaque group ([`ToolSet`]: the built-in tools,
//! an attached MCP server's tools).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pyo3::prelude::*;
use ravi_capabilities::HttpPolicy;
use ravi_integrations::mcp::{McpClient, McpServerSpec, McpTool};
use ravi_kernel::{AnyTool, Tool, ToolContext, ToolError, ToolExecutionResult, ToolRisk};
use serde_json::Value;

use crate::{RaviError, bad_value, guarded, runtime};

/// A Python function as a tool: its name, description, JSON schema and risk, and the
/// callable that runs it.
///
/// The Python half builds these (`ravi.tool`, or a plain function read by `inspect`); the
/// callable it hands over takes the arguments as JSON text and returns a JSON envelope,
/// `{"ok": value}` or `{"error": message}`, so that awaiting coroutines and turning values
/// into JSON stay in Python.
#[pyclass(module = "ravi._native", frozen, name = "ToolSpec")]
#[derive(Debug)]
pub struct PyToolSpec {
    name: String,
    description: String,
    parameters: Value,
    risk: ToolRisk,
    timeout: Option<Duration>,
    idempotent: bool,
    invoke: Arc<Py<PyAny>>,
}

#[pymethods]
impl PyToolSpec {
    /// A tool named `name` (1–64 of `[A-Za-z0-9_-]`), described for a model by
    /// `description`, its arguments checked against `parameters` (a JSON Schema object, as
    /// JSON text), at `risk` (`safe`, `sensitive`, `high`, `critical`), run by `invoke`.
    #[new]
    #[pyo3(signature = (name, description, parameters, risk, invoke, timeout_s=None, idempotent=false))]
    fn new(
        name: String,
        description: String,
        parameters: &str,
        risk: &str,
        invoke: Py<PyAny>,
        timeout_s: Option<f64>,
        idempotent: bool,
    ) -> PyResult<Self> {
        ravi_agents::validate_tool_name(&name)
            .map_err(|e| bad_value("name", &name, &e.to_string()))?;
        let parameters: Value = serde_json::from_str(parameters).map_err(|e| {
            bad_value(
                "parameters",
                format!("<{} bytes>", parameters.len()),
                &format!("a JSON Schema object as JSON text ({e})"),
            )
        })?;
        if !parameters.is_object()
            || parameters.get("type").and_then(Value::as_str) != Some("object")
        {
            return Err(bad_value(
                "parameters",
                &parameters,
                "a JSON Schema whose \"type\" is \"object\"",
            ));
        }
        let risk: ToolRisk = risk.parse().map_err(|_| {
            bad_value(
                "risk",
                format!("{risk:?}"),
                "one of \"safe\", \"sensitive\", \"high\", \"critical\"",
            )
        })?;
        let timeout = match timeout_s {
            None => None,
            Some(s) if s.is_finite() && s > 0.0 => Some(Duration::from_secs_f64(s)),
            Some(s) => return Err(bad_value("timeout_s", s, "a positive number of seconds")),
        };
        Ok(Self {
            name,
            description,
            parameters,
            risk,
            timeout,
            idempotent,
            invoke: Arc::new(invoke),
        })
    }

    /// The tool's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The tool's risk, as its wire name.
    #[getter]
    fn risk(&self) -> &'static str {
        self.risk.as_str()
    }

    fn __repr__(&self) -> String {
        format!("<ravi tool {} ({})>", self.name, self.risk.as_str())
    }
}

impl PyToolSpec {
    /// The kernel tool over this spec.
    pub(crate) fn tool(&self) -> AnyTool {
        AnyTool::from(Arc::new(PyTool {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: self.parameters.clone(),
            risk: self.risk,
            timeout: self.timeout,
            idempotent: self.idempotent,
            invoke: Arc::clone(&self.invoke),
        }) as Arc<dyn Tool>)
    }
}

/// A Python callable as a kernel tool. Its call runs on a blocking thread of the module's
/// runtime with the GIL held; everything around it (validation, budget, risk and approval,
/// timeouts, offloading large results, the trace) is the invoker's.
struct PyTool {
    name: String,
    description: String,
    parameters: Value,
    risk: ToolRisk,
    timeout: Option<Duration>,
    idempotent: bool,
    invoke: Arc<Py<PyAny>>,
}

#[async_trait]
impl Tool for PyTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        self.parameters.clone()
    }

    fn risk(&self) -> ToolRisk {
        self.risk
    }

    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    fn idempotent(&self) -> bool {
        self.idempotent
    }

    async fn execute(
        &self,
        _ctx: &ToolContext,
        args: Value,
    ) -> Result<ToolExecutionResult, ToolError> {
        let envelope = crate::callback::call(Arc::clone(&self.invoke), args.to_string())
            .await
            .map_err(|e| ToolError::internal(e.to_string()))?
            .ok_or_else(|| ToolError::internal("the Python tool's wrapper gave no answer"))?;
        answer(&envelope)
    }
}

/// The tool's answer from the wrapper's envelope: `{"ok": value}` is the result (a string
/// as text, anything else as structured content), `{"error": message}` a failure the script
/// reads as `ToolError`.
fn answer(envelope: &str) -> Result<ToolExecutionResult, ToolError> {
    let value: Value = serde_json::from_str(envelope)
        .map_err(|e| ToolError::internal(format!("the tool's answer is not JSON: {e}")))?;
    if let Some(message) = value.get("error").and_then(Value::as_str) {
        return Ok(ToolExecutionResult::error(message));
    }
    match value.get("ok") {
        Some(Value::String(text)) => Ok(ToolExecutionResult::text(text.clone())),
        Some(other) => Ok(ToolExecutionResult::json(other.clone())),
        None => Err(ToolError::internal(
            "the tool's answer has neither \"ok\" nor \"error\"",
        )),
    }
}

/// A group of Ravi's own tools for a run: the built-in tools over a workspace, or an MCP
/// server's tools (the connection stays open while the group lives).
#[pyclass(module = "ravi._native", frozen)]
pub struct ToolSet {
    label: String,
    tools: Vec<AnyTool>,
    /// The MCP connection the tools call through, when they are a server's.
    client: Option<Arc<McpClient>>,
}

impl ToolSet {
    /// The tools.
    pub(crate) fn tools(&self) -> &[AnyTool] {
        &self.tools
    }
}

#[pymethods]
impl ToolSet {
    /// Ravi's built-in tools (`read_file`, `write_file`, `list_files`, `file_exists`,
    /// `delete_file`, `shell`, `calculator`, `http_get`, `read_result`), their files confined
    /// to `workspace`; `http_get` reaches only `allow_hosts` when that is given (and private
    /// addresses only when listed or `allow_private`). `names` keeps only those tools.
    #[staticmethod]
    #[pyo3(signature = (workspace, allow_hosts=None, allow_private=false, names=None))]
    fn builtins(
        workspace: PathBuf,
        allow_hosts: Option<Vec<String>>,
        allow_private: bool,
        names: Option<Vec<String>>,
    ) -> PyResult<Self> {
        guarded("ravi.builtins", || {
            if !workspace.is_dir() {
                return Err(bad_value(
                    "workspace",
                    workspace.display(),
                    "an existing directory",
                ));
            }
            let mut http = HttpPolicy::default();
            http.allow_hosts = allow_hosts.unwrap_or_default();
            http.allow_private = allow_private;
            let mut tools = ravi_capabilities::builtin_tools_in(&workspace, http)
                .map_err(|e| RaviError::new_err(format!("{}: {e}", workspace.display())))?;
            if let Some(names) = names {
                for n in &names {
                    if !tools.iter().any(|t| t.name() == n) {
                        let known: Vec<&str> = tools.iter().map(|t| t.name()).collect();
                        return Err(bad_value(
                            "names",
                            format!("[..., {n:?}, ...]"),
                            &format!("names of built-in tools: {}", known.join(", ")),
                        ));
                    }
                }
                tools.retain(|t| names.iter().any(|n| n == t.name()));
            }
            Ok(Self {
                label: format!("builtins({})", workspace.display()),
                tools,
                client: None,
            })
        })
    }

    /// Attaches an MCP server and takes its tools, named `NAME__tool`: `spec` is
    /// `"NAME=COMMAND ARGS..."` (a stdio server, started now and stopped when the set is
    /// closed or dropped) or `"NAME=http://…"` (streamable HTTP).
    #[staticmethod]
    #[pyo3(signature = (spec, timeout_s=30.0))]
    fn mcp(py: Python<'_>, spec: &str, timeout_s: f64) -> PyResult<Self> {
        guarded("ravi.mcp_tools", || {
            let is_http = spec.split_once('=').is_some_and(|(_, rest)| {
                rest.starts_with("http://") || rest.starts_with("https://")
            });
            let parsed = McpServerSpec::parse_cli(spec, is_http).map_err(|e| {
                bad_value(
                    "spec",
                    format!("{spec:?}"),
                    &format!("NAME=COMMAND ARGS or NAME=URL ({e})"),
                )
            })?;
            if !(timeout_s.is_finite() && timeout_s > 0.0) {
                return Err(bad_value(
                    "timeout_s",
                    timeout_s,
                    "a positive number of seconds",
                ));
            }
            let name = parsed.name.clone();
            let rt = runtime()?;
            let connected = py.detach(|| {
                rt.block_on(async {
                    tokio::time::timeout(
                        Duration::from_secs_f64(timeout_s),
                        McpClient::connect(parsed),
                    )
                    .await
                })
            });
            let client = match connected {
                Ok(Ok(c)) => Arc::new(c),
                Ok(Err(e)) => {
                    return Err(RaviError::new_err(format!(
                        "the MCP server {name:?} could not be attached: {e}"
                    )));
                }
                Err(_) => {
                    return Err(RaviError::new_err(format!(
                        "the MCP server {name:?} did not answer within {timeout_s} s"
                    )));
                }
            };
            let tools = McpTool::from_client(&client)
                .into_iter()
                .map(AnyTool::from)
                .collect();
            Ok(Self {
                label: format!("mcp({name})"),
                tools,
                client: Some(client),
            })
        })
    }

    /// The tools' names, as a script calls them through the invoker.
    fn names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.name().to_owned()).collect()
    }

    /// Closes the MCP connection (stopping a stdio server); the built-in tools have none.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        if let Some(client) = &self.client {
            let rt = runtime()?;
            let client = Arc::clone(client);
            py.detach(|| rt.block_on(async move { client.close().await }));
        }
        Ok(())
    }

    fn __len__(&self) -> usize {
        self.tools.len()
    }

    fn __repr__(&self) -> String {
        format!("<ravi tools {}: {}>", self.label, self.names().join(", "))
    }
}
