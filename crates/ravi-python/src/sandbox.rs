//! `ravi.Sandbox`'s native half: one run of a script against a toolbox, every call through
//! a fresh [`ToolInvoker`], with the GIL released.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use ravi_agents::approval::DenyAllApprovalHandler;
use ravi_agents::blob::{MemoryBlobStore, new_scope_id};
use ravi_agents::invoker::{StaticRegistry, ToolInvoker};
use ravi_capabilities::chain::{
    PythonEngine, Sandbox, SandboxLimits, ToolChainTool, chain_description_for, summary_text,
};
use ravi_kernel::{
    AnyTool, ApprovalHandler, ArtifactAccess, ArtifactRef, BlobScope, BlobStore, CancellationToken,
    ChainPolicy, ChainRunResult, FunctionSpec, ToolContext, ToolRisk,
};
use serde_json::{Value, json};

use crate::approve::PyApprove;
use crate::tools::{PyToolSpec, ToolSet};
use crate::{RaviError, bad_value, guarded, runtime};

/// A run's settings, checked once when the Python `Sandbox` is made.
#[pyclass(module = "ravi._native", frozen, name = "Sandbox")]
#[derive(Debug)]
pub struct NativeSandbox {
    engine: PythonEngine,
    limits: SandboxLimits,
    policy: ChainPolicy,
}

/// Lets Python stop a run in progress (`run_async` cancelled, or from another thread).
#[pyclass(module = "ravi._native", frozen)]
#[derive(Debug, Default)]
pub struct CancelToken {
    token: CancellationToken,
}

#[pymethods]
impl CancelToken {
    /// A token no run has seen yet.
    #[new]
    fn new() -> Self {
        Self::default()
    }

    /// Stops the run holding this token: the script ends with status `cancelled`, calls in
    /// flight are cancelled, and the trace of what ran is kept.
    fn cancel(&self) {
        self.token.cancel();
    }

    /// Whether [`cancel`](Self::cancel) was called.
    #[getter]
    fn cancelled(&self) -> bool {
        self.token.is_cancelled()
    }
}

/// What one run stored: the results too large to inline and the files the script left,
/// readable until the Python `RunResult` holding this is dropped.
#[pyclass(module = "ravi._native", frozen)]
pub struct RunArtifacts {
    store: Arc<MemoryBlobStore>,
    scope: BlobScope,
}

#[pymethods]
impl RunArtifacts {
    /// The bytes stored under `ref` (`art_…`) by this run.
    fn read<'py>(&self, py: Python<'py>, r#ref: &str) -> PyResult<Bound<'py, PyBytes>> {
        let artifact =
            ArtifactRef::parse(r#ref).map_err(|e| bad_value("ref", r#ref, &e.to_string()))?;
        let rt = runtime()?;
        let store = Arc::clone(&self.store);
        let scope = self.scope.clone();
        let bytes = py
            .detach(|| rt.block_on(async move { store.resolve(&scope, &artifact).await }))
            .map_err(|e| RaviError::new_err(format!("artifact {}: {e}", r#ref)))?;
        Ok(PyBytes::new(py, &bytes))
    }
}

fn seconds(param: &str, s: f64) -> PyResult<Duration> {
    if s.is_finite() && s > 0.0 && s < 1e9 {
        Ok(Duration::from_secs_f64(s))
    } else {
        Err(bad_value(param, s, "a positive number of seconds"))
    }
}

#[pymethods]
impl NativeSandbox {
    /// Settings for runs: the wall clock of a run (`timeout_s`, tool calls included), the
    /// calls it may make, the memory its interpreter may use, the engine, each call's own
    /// limit, the output kept, how long an approval may take.
    #[new]
    #[pyo3(signature = (
        timeout_s=30.0,
        max_tool_calls=50,
        memory_mb=256,
        engine="rustpython",
        call_timeout_s=None,
        output_bytes=1_048_576,
        approval_timeout_s=None,
        max_inline_result_bytes=4096,
    ))]
    #[expect(
        clippy::too_many_arguments,
        reason = "the Python constructor's keyword arguments"
    )]
    fn new(
        timeout_s: f64,
        max_tool_calls: i64,
        memory_mb: i64,
        engine: &str,
        call_timeout_s: Option<f64>,
        output_bytes: i64,
        approval_timeout_s: Option<f64>,
        max_inline_result_bytes: i64,
    ) -> PyResult<Self> {
        let timeout = seconds("timeout_s", timeout_s)?;
        let max_tool_calls = u32::try_from(max_tool_calls)
            .ok()
            .filter(|n| *n >= 1)
            .ok_or_else(|| bad_value("max_tool_calls", max_tool_calls, "a whole number from 1"))?;
        let memory_mb = usize::try_from(memory_mb)
            .ok()
            .filter(|m| (16..=4096).contains(m))
            .ok_or_else(|| {
                bad_value(
                    "memory_mb",
                    memory_mb,
                    "a whole number of MiB from 16 to 4096",
                )
            })?;
        let engine = match engine {
            "rustpython" => PythonEngine::RustPython,
            "cpython" => PythonEngine::CPython,
            other => {
                return Err(bad_value(
                    "engine",
                    format!("{other:?}"),
                    "\"rustpython\" or \"cpython\"",
                ));
            }
        };
        let call_timeout = match call_timeout_s {
            Some(s) => seconds("call_timeout_s", s)?,
            None => timeout,
        };
        let call_timeout = call_timeout.min(timeout);
        // An approval must end before the call's own limit, so a slow answer is a denial.
        let approval_timeout = match approval_timeout_s {
            Some(s) => {
                let d = seconds("approval_timeout_s", s)?;
                if d >= call_timeout {
                    return Err(bad_value(
                        "approval_timeout_s",
                        s,
                        &format!(
                            "less than the call's limit ({} s, call_timeout_s or timeout_s)",
                            call_timeout.as_secs_f64()
                        ),
                    ));
                }
                d
            }
            None => call_timeout.mul_f64(0.9).min(Duration::from_secs(55)),
        };
        let output_bytes = usize::try_from(output_bytes)
            .ok()
            .filter(|n| *n >= 1024)
            .ok_or_else(|| {
                bad_value(
                    "output_bytes",
                    output_bytes,
                    "a whole number of bytes from 1024",
                )
            })?;
        let inline = usize::try_from(max_inline_result_bytes)
            .ok()
            .filter(|n| *n >= 1)
            .ok_or_else(|| {
                bad_value(
                    "max_inline_result_bytes",
                    max_inline_result_bytes,
                    "a whole number of bytes from 1",
                )
            })?;
        let policy = ChainPolicy::builder()
            .max_tool_calls(max_tool_calls)
            .total_timeout(timeout)
            .call_timeout(call_timeout)
            .approval_timeout(approval_timeout)
            .max_inline_result_bytes(inline)
            // Every call above `safe` is put to `approve` (and denied without one).
            .max_risk_unapproved(ToolRisk::Safe)
            .build()
            .map_err(|e| PyErr::new::<pyo3::exceptions::PyValueError, _>(e.to_string()))?;
        let limits = SandboxLimits {
            timeout,
            memory_bytes: memory_mb << 20,
            output_bytes,
        };
        Ok(Self {
            engine,
            limits,
            policy,
        })
    }

    /// Loads the engine now (its first load in a process prepares the guest once per
    /// machine: tens of seconds for RustPython, minutes for CPython), so the first run does
    /// not pay for it.
    fn warm_up(&self, py: Python<'_>) -> PyResult<()> {
        guarded("Sandbox.warm_up", || {
            let engine = self.engine;
            py.detach(|| Sandbox::shared_for(engine))
                .map(|_| ())
                .map_err(|e| RaviError::new_err(e.to_string()))
        })
    }

    /// Runs `code` with `tools` (tool specs and tool sets), asking `decide` about every call
    /// above `safe` (no `decide`: they are denied). Returns the result as JSON text and the
    /// run's artifacts.
    #[pyo3(signature = (code, tools, decide=None, cancel=None, filename="<script>"))]
    fn run(
        &self,
        py: Python<'_>,
        code: &str,
        tools: Vec<Bound<'_, PyAny>>,
        decide: Option<Py<PyAny>>,
        cancel: Option<PyRef<'_, CancelToken>>,
        filename: &str,
    ) -> PyResult<(String, RunArtifacts)> {
        guarded("Sandbox.run", || {
            let toolbox = collect(&tools)?;
            let engine = self.engine;
            let sandbox = py
                .detach(|| Sandbox::shared_for(engine))
                .map_err(|e| RaviError::new_err(e.to_string()))?;
            let approval: Arc<dyn ApprovalHandler> = match decide {
                Some(d) => Arc::new(PyApprove::new(d)),
                None => Arc::new(DenyAllApprovalHandler),
            };
            let store = Arc::new(MemoryBlobStore::new());
            let scope = BlobScope::root(new_scope_id());
            let invoker = ToolInvoker::builder(Arc::new(StaticRegistry::new(toolbox)))
                .policy(self.policy.clone())
                .approval_handler(approval)
                .blob_store(Arc::clone(&store) as Arc<dyn BlobStore>)
                .build();
            let chain = ToolChainTool::with_sandbox(invoker, sandbox).limits(self.limits.clone());
            let mut ctx = ToolContext::new("python").with_artifacts(ArtifactAccess::new(
                Arc::clone(&store) as Arc<dyn BlobStore>,
                scope.clone(),
            ));
            if let Some(c) = cancel {
                ctx = ctx.with_cancellation(c.token.clone());
            }
            let rt = runtime()?;
            let (result, artifacts) = py.detach(|| {
                rt.block_on(async {
                    let result = chain.run_named(code, filename, &ctx).await;
                    let artifacts = artifacts_of(&result, &store, &scope).await;
                    (result, artifacts)
                })
            });
            let mut value = serde_json::to_value(&result)
                .map_err(|e| RaviError::new_err(format!("the run's result: {e}")))?;
            if let Some(map) = value.as_object_mut() {
                map.insert("artifacts".into(), Value::Array(artifacts));
                map.insert("summary".into(), Value::String(summary_text(&result)));
            }
            Ok((value.to_string(), RunArtifacts { store, scope }))
        })
    }

    /// What a model is told about a code-mode tool over `tools` (the functions a script can
    /// call, with their signatures, and this sandbox's limits): Ravi's `tool_chain`
    /// description, which the framework adapters give their tool.
    fn describe(&self, tools: Vec<Bound<'_, PyAny>>) -> PyResult<String> {
        guarded("Sandbox.describe", || {
            let specs: Vec<FunctionSpec> = collect(&tools)?
                .iter()
                .filter_map(AnyTool::as_function)
                .map(|t| t.spec())
                .collect();
            Ok(chain_description_for(
                &specs,
                &self.limits,
                self.policy.max_tool_calls(),
                self.engine,
            ))
        })
    }

    /// The engine runs use, `rustpython` or `cpython`.
    #[getter]
    fn engine(&self) -> &'static str {
        self.engine.as_str()
    }

    fn __repr__(&self) -> String {
        format!(
            "<ravi Sandbox engine={} timeout_s={} max_tool_calls={} memory_mb={}>",
            self.engine,
            self.limits.timeout.as_secs_f64(),
            self.policy.max_tool_calls(),
            self.limits.memory_bytes >> 20
        )
    }
}

/// The run's toolbox from the Python list: tool specs and tool sets, each name once.
pub(crate) fn collect(tools: &[Bound<'_, PyAny>]) -> PyResult<Vec<AnyTool>> {
    let mut all = Vec::new();
    let mut names = BTreeSet::new();
    for (i, item) in tools.iter().enumerate() {
        let added: Vec<AnyTool> = if let Ok(spec) = item.cast::<PyToolSpec>() {
            vec![spec.get().tool()]
        } else if let Ok(set) = item.cast::<ToolSet>() {
            set.get().tools().to_vec()
        } else {
            let ty = item
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_else(|_| "?".into());
            return Err(bad_value(
                &format!("tools[{i}]"),
                format!("<{ty}>"),
                "a function, a @ravi.tool, ravi.builtins(...) or ravi.mcp_tools(...)",
            ));
        };
        for t in added {
            if !names.insert(t.name().to_owned()) {
                return Err(bad_value(
                    &format!("tools[{i}]"),
                    t.name(),
                    "tool names that appear once in a run (rename one with @ravi.tool(name=...))",
                ));
            }
            all.push(t);
        }
    }
    Ok(all)
}

/// The run's stored values: each offloaded call result and each file the script left, with
/// its size and media type.
async fn artifacts_of(
    result: &ChainRunResult,
    store: &Arc<MemoryBlobStore>,
    scope: &BlobScope,
) -> Vec<Value> {
    let mut out = Vec::new();
    for call in &result.call_trace {
        if let Some(r) = &call.artifact_ref {
            let (size, media_type) = match store.stat(scope, r).await {
                Ok(info) => (Some(info.size), Some(info.media_type)),
                Err(_) => (None, None),
            };
            out.push(json!({
                "ref": r.as_str(),
                "size": size,
                "media_type": media_type,
                "tool": call.tool,
                "call_id": call.call_id,
                "path": Value::Null,
            }));
        }
    }
    for f in &result.files {
        out.push(json!({
            "ref": f.artifact_ref,
            "size": f.size,
            "media_type": f.media_type,
            "tool": Value::Null,
            "call_id": Value::Null,
            "path": f.path,
        }));
    }
    out
}
