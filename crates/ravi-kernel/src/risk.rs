//! The risk ladder and the human-in-the-loop modes.

use serde::{Deserialize, Serialize};

/// How much harm a tool can do, ordered `Safe < Sensitive < High < Critical`.
///
/// One field drives both approvals and guardrails: the invoker compares it with
/// `ChainPolicy::max_risk_unapproved` and asks a human above that line. The ordering is what
/// the comparison uses, so variants must stay in ascending order.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum ToolRisk {
    /// No side effects: computing, reading inside the workspace.
    #[default]
    Safe,
    /// Reads outside the process's own data or reaches the network (listing files, HTTP GET).
    Sensitive,
    /// An external side effect that can be undone (writing a file, sending a draft).
    High,
    /// Destructive or irreversible (deleting, running a shell command, sending money or mail).
    /// Always asks for approval, whatever the policy says.
    Critical,
}

impl ToolRisk {
    /// Every level, lowest first.
    pub const ALL: [ToolRisk; 4] = [Self::Safe, Self::Sensitive, Self::High, Self::Critical];

    /// The wire name (`safe`, `sensitive`, `high`, `critical`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Safe => "safe",
            Self::Sensitive => "sensitive",
            Self::High => "high",
            Self::Critical => "critical",
        }
    }

    /// Whether a call of this risk needs a human's decision under a policy whose threshold is
    /// `max_unapproved`. Critical always does.
    pub fn needs_approval(self, max_unapproved: ToolRisk) -> bool {
        self == Self::Critical || self > max_unapproved
    }
}

impl std::fmt::Display for ToolRisk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ToolRisk {
    type Err = crate::KernelError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|r| r.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| crate::KernelError::InvalidValue {
                field: "risk".into(),
                value: s.into(),
                expected: "one of safe, sensitive, high, critical".into(),
            })
    }
}

/// Whether a call of a tool may run in the background as a task the caller polls (MCP
/// Tasks, `execution.taskSupport`), instead of holding the caller's request open until it
/// ends.
///
/// A server offering tasks decides per call: a call of an `Optional` tool that ends quickly
/// is answered at once, one that takes longer (a long script, a call waiting for an
/// approval) becomes a task. A `Required` tool is only called as a task, from its first
/// moment (a client that cannot poll tasks is refused); a `Forbidden` one never is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TaskSupport {
    /// Never run as a task.
    Forbidden,
    /// Run as a task when the call takes long (the default).
    #[default]
    Optional,
    /// Only run as a task.
    Required,
}

impl TaskSupport {
    /// The MCP wire name (`forbidden`, `optional`, `required`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Forbidden => "forbidden",
            Self::Optional => "optional",
            Self::Required => "required",
        }
    }

    /// The value of an MCP `execution.taskSupport`; `None` for a value this version does not
    /// know.
    pub fn from_wire(s: &str) -> Option<Self> {
        match s {
            "forbidden" => Some(Self::Forbidden),
            "optional" => Some(Self::Optional),
            "required" => Some(Self::Required),
            _ => None,
        }
    }
}

/// What happens while a human has not yet answered an approval request.
///
/// The mode only matters once a call needs approval; below the policy's threshold nobody is
/// asked. A Critical tool is always treated as `Blocking`, whatever it declares, so an
/// irreversible action can never be approved by silence.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum HitlMode {
    /// Wait for the decision; no answer within the approval timeout means denied.
    #[default]
    Blocking,
    /// Wait for the decision; no answer within the approval timeout means approved.
    ContinueOnTimeout,
    /// Notify the human and proceed at once without waiting.
    FireAndContinue,
}

impl HitlMode {
    /// The mode a tool of `risk` gets when it declares none.
    ///
    /// The risk ladder means Safe and Sensitive tools involve no human and Critical ones
    /// block. In Ravi *whether* a human is asked is the policy's decision
    /// ([`ToolRisk::needs_approval`] against `ChainPolicy::max_risk_unapproved`, `Sensitive`
    /// by default where an approval handler is configured and `Safe` where none is), and the
    /// mode only says *how* to wait once asked. So "no HITL" for Safe and
    /// Sensitive is the default policy never asking them, and when an operator tightens the
    /// policy so that it does ask, the safe way to wait is to block. Every level therefore
    /// defaults to `Blocking`: fail closed, never approved by silence
    /// (`docs/invoker.md#approvals`).
    pub fn default_for(risk: ToolRisk) -> Self {
        match risk {
            ToolRisk::Safe | ToolRisk::Sensitive | ToolRisk::High | ToolRisk::Critical => {
                Self::Blocking
            }
        }
    }

    /// The mode the invoker actually applies: Critical tools always block.
    pub fn effective(self, risk: ToolRisk) -> Self {
        if risk == ToolRisk::Critical {
            Self::Blocking
        } else {
            self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ladder_is_ordered() {
        assert!(ToolRisk::Safe < ToolRisk::Sensitive);
        assert!(ToolRisk::Sensitive < ToolRisk::High);
        assert!(ToolRisk::High < ToolRisk::Critical);
    }

    #[test]
    fn critical_always_needs_approval() {
        assert!(ToolRisk::Critical.needs_approval(ToolRisk::Critical));
        assert!(!ToolRisk::High.needs_approval(ToolRisk::High));
        assert!(ToolRisk::High.needs_approval(ToolRisk::Sensitive));
        assert!(!ToolRisk::Safe.needs_approval(ToolRisk::Safe));
    }

    #[test]
    fn critical_forces_blocking() {
        assert_eq!(
            HitlMode::FireAndContinue.effective(ToolRisk::Critical),
            HitlMode::Blocking
        );
        assert_eq!(
            HitlMode::FireAndContinue.effective(ToolRisk::High),
            HitlMode::FireAndContinue
        );
    }

    #[test]
    fn no_human_for_safe_and_sensitive_under_the_default_policy() {
        // Safe and Sensitive involve no human, Critical blocks. Under the default threshold
        // (Sensitive) the first two are never asked, whatever their mode.
        let threshold = ToolRisk::Sensitive;
        assert!(!ToolRisk::Safe.needs_approval(threshold));
        assert!(!ToolRisk::Sensitive.needs_approval(threshold));
        assert!(ToolRisk::Critical.needs_approval(threshold));
        assert_eq!(
            HitlMode::default_for(ToolRisk::Critical).effective(ToolRisk::Critical),
            HitlMode::Blocking
        );
        for risk in ToolRisk::ALL {
            assert_eq!(HitlMode::default_for(risk), HitlMode::Blocking, "{risk}");
        }
    }

    #[test]
    fn parses_names() {
        assert_eq!("HIGH".parse::<ToolRisk>().ok(), Some(ToolRisk::High));
        let err = "medium".parse::<ToolRisk>().err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("invalid risk `medium`: expected one of safe, sensitive, high, critical")
        );
    }
}
