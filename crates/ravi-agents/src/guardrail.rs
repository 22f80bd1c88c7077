//! Guardrails: checks that can refuse a call before it runs (input guardrails) or withhold
//! its result after it ran (output guardrails). A tripwire turns into a `denied` result whose
//! text is the guardrail's reason, so the model learns why and can change course.
//!
//! ```
//! use ravi_agents::guardrail::{FnGuardrail, GuardrailVerdict};
//!
//! // Refuse any call whose arguments mention /etc/shadow.
//! let g = FnGuardrail::new("no-shadow", |call, _risk| {
//!     if call.arguments.to_string().contains("/etc/shadow") {
//!         GuardrailVerdict::tripwire("reading /etc/shadow is not allowed")
//!     } else {
//!         GuardrailVerdict::Pass
//!     }
//! });
//! # let _ = g;
//! ```

use async_trait::async_trait;
use ravi_kernel::{ToolCall, ToolExecutionResult, ToolRisk};

/// A guardrail's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GuardrailVerdict {
    /// Let the call (or result) through.
    Pass,
    /// Stop it; `reason` is shown to the model.
    Tripwire {
        /// Why, phrased for the model.
        reason: String,
    },
}

impl GuardrailVerdict {
    /// A tripwire with the given reason.
    pub fn tripwire(reason: impl Into<String>) -> Self {
        Self::Tripwire {
            reason: reason.into(),
        }
    }
}

/// Checks a call before it runs (after validation, before approval).
#[async_trait]
pub trait ToolCallGuardrail: Send + Sync {
    /// A short name, quoted in the denial message.
    fn name(&self) -> &str;
    /// Judges the call; `risk` is the tool's declared risk.
    async fn check(&self, call: &ToolCall, risk: ToolRisk) -> GuardrailVerdict;
}

/// Checks a result after the tool ran, before it is returned.
#[async_trait]
pub trait OutputGuardrail: Send + Sync {
    /// A short name, quoted in the denial message.
    fn name(&self) -> &str;
    /// Judges the result of `call`.
    async fn check(&self, call: &ToolCall, result: &ToolExecutionResult) -> GuardrailVerdict;
}

/// An input guardrail made of a name and a function.
pub struct FnGuardrail<F> {
    name: String,
    f: F,
}

impl<F> FnGuardrail<F>
where
    F: Fn(&ToolCall, ToolRisk) -> GuardrailVerdict + Send + Sync,
{
    /// Wraps `f` under `name`.
    pub fn new(name: impl Into<String>, f: F) -> Self {
        Self {
            name: name.into(),
            f,
        }
    }
}

#[async_trait]
impl<F> ToolCallGuardrail for FnGuardrail<F>
where
    F: Fn(&ToolCall, ToolRisk) -> GuardrailVerdict + Send + Sync,
{
    fn name(&self) -> &str {
        &self.name
    }
    async fn check(&self, call: &ToolCall, risk: ToolRisk) -> GuardrailVerdict {
        (self.f)(call, risk)
    }
}

/// An output guardrail made of a name and a function.
pub struct FnOutputGuardrail<F> {
    name: String,
    f: F,
}

impl<F> FnOutputGuardrail<F>
where
    F: Fn(&ToolCall, &ToolExecutionResult) -> GuardrailVerdict + Send + Sync,
{
    /// Wraps `f` under `name`.
    pub fn new(name: impl Into<String>, f: F) -> Self {
        Self {
            name: name.into(),
            f,
        }
    }
}

#[async_trait]
impl<F> OutputGuardrail for FnOutputGuardrail<F>
where
    F: Fn(&ToolCall, &ToolExecutionResult) -> GuardrailVerdict + Send + Sync,
{
    fn name(&self) -> &str {
        &self.name
    }
    async fn check(&self, call: &ToolCall, result: &ToolExecutionResult) -> GuardrailVerdict {
        (self.f)(call, result)
    }
}
