//! `tool_chain`: the kernel tool that runs a model's script in the sandbox, every call of
//! which goes through the [`ToolInvoker`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ravi_agents::invoker::{InvokerSession, TOOL_CHAIN_NAME, ToolInvoker};
use ravi_kernel::{
    AnyTool, CallStatus, ChainCallRecord, ChainRunResult, ChainStatus, FunctionSpec, Tool,
    ToolCall, ToolContext, ToolError, ToolExecutionResult, args_digest,
};
use serde_json::{Value, json};

use super::SandboxError;
use super::bridge::{BridgeOutcome, ToolBridge};
use super::describe::{bindings, chain_description};
use super::sandbox::{Sandbox, SandboxLimits, ToolBinding};

/// How many trace lines the model-facing summary lists before eliding the rest.
const SUMMARY_CALLS: usize = 20;

/// Runs model-written Python against the invoker's toolbox.
///
/// Each run opens its own [`InvokerSession`] (budget, trace, pins), so calls from the script
/// are held to the invoker's policy exactly as direct calls are, and closes it at the end,
/// releasing the artifacts it pinned. The functions a script can call are the invoker's
/// registry's function tools, except `tool_chain` itself; they are fixed when the tool is
/// built.
pub struct ToolChainTool {
    invoker: ToolInvoker,
    sandbox: Arc<Sandbox>,
    limits: SandboxLimits,
    specs: Vec<FunctionSpec>,
    bindings: Vec<ToolBinding>,
    description: String,
}

impl std::fmt::Debug for ToolChainTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolChainTool")
            .field("tools", &self.specs.len())
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl ToolChainTool {
    /// The tool over `invoker`, with the shared sandbox and default limits (the wall clock
    /// capped by the policy's `total_timeout`).
    pub fn new(invoker: ToolInvoker) -> Result<Self, SandboxError> {
        Ok(Self::with_sandbox(invoker, Sandbox::shared()?))
    }

    /// The tool over `invoker` running scripts in `sandbox`.
    pub fn with_sandbox(invoker: ToolInvoker, sandbox: Arc<Sandbox>) -> Self {
        let specs: Vec<FunctionSpec> = invoker
            .registry()
            .all()
            .iter()
            .filter_map(AnyTool::as_function)
            .filter(|t| t.name() != TOOL_CHAIN_NAME)
            .map(|t| t.spec())
            .collect();
        let mut tool = Self {
            bindings: bindings(&specs),
            specs,
            invoker,
            sandbox,
            limits: SandboxLimits::default(),
            description: String::new(),
        };
        tool.set_limits(SandboxLimits::default());
        tool
    }

    /// Sets the sandbox limits (the wall clock is still capped by the policy's
    /// `total_timeout`).
    #[must_use]
    pub fn limits(mut self, limits: SandboxLimits) -> Self {
        self.set_limits(limits);
        self
    }

    fn set_limits(&mut self, mut limits: SandboxLimits) {
        limits.timeout = limits.timeout.min(self.invoker.policy().total_timeout());
        self.description =
            chain_description(&self.specs, &limits, self.invoker.policy().max_tool_calls());
        self.limits = limits;
    }

    /// The functions a script can call, as bound in its globals.
    pub fn bindings(&self) -> &[ToolBinding] {
        &self.bindings
    }

    /// Runs `script` (shown in tracebacks as `<tool_chain>`).
    pub async fn run(&self, script: &str, ctx: &ToolContext) -> ChainRunResult {
        self.run_named(script, "<tool_chain>", ctx).await
    }

    /// Runs `script`, naming it `filename` in tracebacks. The trace is complete on every
    /// outcome: a call still running when the run was stopped is recorded as `timeout`.
    pub async fn run_named(
        &self,
        script: &str,
        filename: &str,
        ctx: &ToolContext,
    ) -> ChainRunResult {
        let started = Instant::now();
        // Called through an invoker (a model's turn, an MCP client), the run's artifacts live
        // in the caller's scope, so the refs its results name resolve in the caller's later
        // calls; the caller then holds their pins.
        let guard = match &ctx.artifacts {
            Some(access) => self.invoker.session_guard_in(access.scope().clone()),
            None => self.invoker.session_guard(),
        };
        let session = guard.session().clone();
        let cancel = ctx.cancellation.child();
        let bridge = Arc::new(InvokerBridge {
            invoker: self.invoker.clone(),
            session: session.clone(),
            ctx: ToolContext {
                cancellation: cancel.clone(),
                ..ctx.clone()
            },
            deadline: started + self.limits.timeout,
            next_id: AtomicU64::new(0),
            in_flight: Mutex::new(BTreeMap::new()),
        });
        let run = self
            .sandbox
            .run(
                script,
                filename,
                &self.bindings,
                bridge.clone(),
                &self.limits,
                Some(cancel.clone()),
            )
            .await;
        // Stop anything the script left running before reading the trace.
        cancel.cancel();
        let mut call_trace = session.trace();
        call_trace.extend(bridge.interrupted(call_trace.len()));
        if let Some(access) = &ctx.artifacts {
            for r in session.detach_pins() {
                if !access.adopt_pin(r.clone())
                    && let Some(store) = self.invoker.blob_store()
                    && let Err(e) = store.unpin(&r).await
                {
                    tracing::warn!(artifact = %r, error = %e, "could not release a chain result's pin");
                }
            }
        }
        guard.close().await;
        let mut output_text = run.stdout;
        if !run.stderr.is_empty() {
            if !output_text.is_empty() && !output_text.ends_with('\n') {
                output_text.push('\n');
            }
            output_text.push_str(&run.stderr);
        }
        let mut result = ChainRunResult::new(
            run.status,
            output_text,
            call_trace,
            u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        );
        result.error = run.error;
        result
    }
}

#[async_trait]
impl Tool for ToolChainTool {
    fn name(&self) -> &str {
        TOOL_CHAIN_NAME
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "script": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The Python script. Call tools as functions with keyword \
                                    arguments; print() what you need to see."
                }
            },
            "required": ["script"],
            "additionalProperties": false
        })
    }

    // Safe on its own: every call the script makes is approved (or not) by the invoker
    // individually, with that tool's risk.

    async fn execute(
        &self,
        ctx: &ToolContext,
        args: Value,
    ) -> Result<ToolExecutionResult, ToolError> {
        let Some(script) = args.get("script").and_then(Value::as_str) else {
            return Err(ToolError::invalid_arguments(
                "tool_chain needs `script`: the Python source to run, as a string",
            ));
        };
        let result = self.run(script, ctx).await;
        let text = summary_text(&result);
        let mut out = ToolExecutionResult::text(text);
        out.is_error = result.status != ChainStatus::Ok;
        out.structured_content = serde_json::to_value(&result).ok();
        Ok(out)
    }
}

/// The text the model reads: the output, the error if any, and a compact trace.
pub fn summary_text(r: &ChainRunResult) -> String {
    let mut s = String::new();
    if !r.output_text.is_empty() {
        s.push_str(&r.output_text);
        if !s.ends_with('\n') {
            s.push('\n');
        }
    }
    if let Some(e) = &r.error {
        s.push_str(&format!(
            "[{}] {}: {}\n",
            status_str(r.status),
            e.exc_type,
            e.message
        ));
        let tb: Vec<&str> = e.traceback.lines().collect();
        for line in tb.iter().skip(tb.len().saturating_sub(6)) {
            s.push_str(line);
            s.push('\n');
        }
    }
    if r.call_trace.is_empty() {
        s.push_str("[calls] none\n");
    } else {
        s.push_str(&format!("[calls] {}:", r.call_trace.len()));
        for c in r.call_trace.iter().take(SUMMARY_CALLS) {
            s.push_str(&format!(
                " {} {} {}ms;",
                c.tool,
                c.status.as_str(),
                c.duration_ms
            ));
        }
        if r.call_trace.len() > SUMMARY_CALLS {
            s.push_str(&format!(" … {} more", r.call_trace.len() - SUMMARY_CALLS));
        }
        s.push('\n');
    }
    s
}

/// The wire name of a chain status.
pub fn status_str(s: ChainStatus) -> &'static str {
    match s {
        ChainStatus::Ok => "ok",
        ChainStatus::Error => "error",
        ChainStatus::Timeout => "timeout",
        ChainStatus::Cancelled => "cancelled",
        ChainStatus::ResourceExhausted => "resource_exhausted",
        _ => "unknown",
    }
}

struct InFlight {
    tool: String,
    /// Kept to digest only if the run is stopped mid-call (the rare case).
    args: Value,
    started: Instant,
}

/// The bridge over the invoker: one [`ToolCall`] per script call, in the run's session.
struct InvokerBridge {
    invoker: ToolInvoker,
    session: InvokerSession,
    ctx: ToolContext,
    deadline: Instant,
    next_id: AtomicU64,
    in_flight: Mutex<BTreeMap<u64, InFlight>>,
}

impl InvokerBridge {
    /// Records for calls the run was stopped in the middle of (the invoker never got to
    /// record them): they may have had their effect, so they are reported as timeouts.
    fn interrupted(&self, first_seq: usize) -> Vec<ChainCallRecord> {
        let left = self
            .in_flight
            .lock()
            .map(|mut m| std::mem::take(&mut *m))
            .unwrap_or_default();
        left.into_iter()
            .enumerate()
            .map(|(i, (id, c))| {
                let mut record = ChainCallRecord::new(
                    u32::try_from(first_seq + i).unwrap_or(u32::MAX),
                    format!("{}chain-{id}", self.prefix()),
                    c.tool,
                    args_digest(&c.args),
                    CallStatus::Timeout,
                    u64::try_from(c.started.elapsed().as_millis()).unwrap_or(u64::MAX),
                    true,
                );
                record.summary = "the run was stopped while this call was in progress; it may \
                                  have had its effect"
                    .into();
                record
            })
            .collect()
    }

    fn prefix(&self) -> String {
        if self.ctx.call_id.is_empty() {
            String::new()
        } else {
            format!("{}:", self.ctx.call_id)
        }
    }
}

#[async_trait]
impl ToolBridge for InvokerBridge {
    async fn call(&self, tool: &str, args: Value) -> BridgeOutcome {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut m) = self.in_flight.lock() {
            m.insert(
                id,
                InFlight {
                    tool: tool.to_owned(),
                    args: args.clone(),
                    started: Instant::now(),
                },
            );
        }
        let call_id = format!("{}chain-{id}", self.prefix());
        let ctx = ToolContext {
            call_id: call_id.clone(),
            deadline: Some(
                self.ctx
                    .deadline
                    .map_or(self.deadline, |d| d.min(self.deadline)),
            ),
            ..self.ctx.clone()
        };
        let result = self
            .invoker
            .invoke(&self.session, ToolCall::new(call_id, tool, args), &ctx)
            .await;
        if let Ok(mut m) = self.in_flight.lock() {
            m.remove(&id);
        }
        BridgeOutcome::from_invocation(result)
    }

    fn budget(&self) -> Value {
        let max = self.invoker.policy().max_tool_calls();
        let used = self.session.call_count();
        json!({"calls_used": used, "calls_remaining": max.saturating_sub(used)})
    }
}

/// Default limits for a [`ToolChainTool`] built from command-line style settings.
pub fn limits_from(timeout: Duration, memory_mb: usize, output_bytes: usize) -> SandboxLimits {
    SandboxLimits {
        timeout,
        memory_bytes: memory_mb.saturating_mul(1 << 20),
        output_bytes,
    }
}
