//! Conditions on what a call does: rules over the call's validated arguments, its tool, its
//! caller and where it comes from, judged by the invoker after validation and before approval,
//! the same for every entry point (a code-mode script's call on its own arguments).
//!
//! This module holds the rules as configured ([`ConditionRule`], `[[access.conditions]]` in
//! `ravi.toml`) and the interface the invoker asks ([`CallConditions`]); the evaluator, over
//! CEL expressions, is the `ravi-policy` crate, so this crate does not carry a CEL
//! interpreter. A rule's effect is [`ConditionEffect::Deny`] (the call is refused with the
//! rule's message and name), [`ConditionEffect::RequireApproval`] (the call is asked about
//! like a risky one, the approval naming the rule) or [`ConditionEffect::Allow`] (the rules
//! after it are not looked at for that call). Rules are judged in order; a rule whose
//! expression cannot be evaluated for a call denies it (fail closed) and says why.
//!
//! ```
//! use ravi_agents::conditions::{ConditionEffect, ConditionRule};
//!
//! let rule: ConditionRule = serde_json::from_value(serde_json::json!({
//!     "when": r#"tool.name == "http_get" && !args.url.startsWith("https://api.internal/")"#,
//!     "effect": "deny",
//!     "message": "http_get may only reach api.internal",
//! })).unwrap();
//! assert_eq!(rule.effect, ConditionEffect::Deny);
//! assert!(rule.principals.is_empty()); // every principal
//! ```

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::kernel::{CallSource, Principal, ToolRisk};

/// What a matching rule does to the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ConditionEffect {
    /// Stop judging this call: the rules after this one do not apply to it.
    Allow,
    /// Refuse the call: the caller reads the rule's message and name.
    Deny,
    /// Ask for approval, as for a risky call, the request naming the rule.
    RequireApproval,
}

impl ConditionEffect {
    /// The configuration's name: `allow`, `deny`, `require_approval`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
            Self::RequireApproval => "require_approval",
        }
    }
}

/// One `[[access.conditions]]` rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ConditionRule {
    /// The rule's name in refusals, approvals and `ravi tools list` (default: `condition N`,
    /// its position from 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The CEL expression, over `principal` (`id`, `groups`, `scopes`, `claims`), `tool`
    /// (`name`, `risk`, `server`), `args`, `source` (`direct`, `model`, `code_mode`, `mcp`)
    /// and `now`; the rule applies when it is true.
    pub when: String,
    /// What the rule does when it applies.
    pub effect: ConditionEffect,
    /// What the caller is told (a refusal) or the approver is shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Whom the rule is for: principal ids, `group:NAME`, or `*`; empty: everyone (a call
    /// with no principal, from `ravi run` or `ravi agent`, too).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub principals: Vec<String>,
}

impl ConditionRule {
    /// A rule with no name, message or principal filter.
    pub fn new(when: impl Into<String>, effect: ConditionEffect) -> Self {
        Self {
            name: None,
            when: when.into(),
            effect,
            message: None,
            principals: Vec::new(),
        }
    }

    /// The same rule, named.
    #[must_use]
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The same rule, with a message.
    #[must_use]
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }

    /// The same rule, for these principals only.
    #[must_use]
    pub fn for_principals<I, S>(mut self, principals: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.principals = principals.into_iter().map(Into::into).collect();
        self
    }

    /// Whether the rule is for `principal` (`None`: a call no gateway authenticated).
    pub fn applies_to(&self, principal: Option<&Principal>) -> bool {
        if self.principals.is_empty() {
            return true;
        }
        self.principals
            .iter()
            .any(|p| match p.strip_prefix("group:") {
                _ if p == "*" => true,
                Some(group) => principal.is_some_and(|pr| pr.groups.iter().any(|g| g == group)),
                None => principal.is_some_and(|pr| pr.id == *p),
            })
    }
}

/// The call a rule is judged against.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ConditionCall<'a> {
    /// Who makes it, when a gateway authenticated the caller.
    pub principal: Option<&'a Principal>,
    /// The tool's name.
    pub tool: &'a str,
    /// The tool's risk.
    pub risk: ToolRisk,
    /// The validated arguments.
    pub args: &'a Value,
    /// Where the call comes from.
    pub source: CallSource,
}

impl<'a> ConditionCall<'a> {
    /// The call of `tool` at `risk` with `args`, from `source`, by `principal`.
    pub fn new(
        principal: Option<&'a Principal>,
        tool: &'a str,
        risk: ToolRisk,
        args: &'a Value,
        source: CallSource,
    ) -> Self {
        Self {
            principal,
            tool,
            risk,
            args,
            source,
        }
    }
}

/// What the rules decided about a call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// No rule stops it (an `allow` rule may have ended the judging).
    Pass,
    /// Refused by `rule`, the caller told `message`.
    Deny {
        /// The rule's name.
        rule: String,
        /// What the caller is told.
        message: String,
    },
    /// To be approved first, by `rule`.
    RequireApproval {
        /// The rule's name.
        rule: String,
        /// What the approver is shown.
        message: String,
    },
}

/// The conditions an invoker judges every call by (`ToolInvokerBuilder::conditions`).
pub trait CallConditions: Send + Sync + std::fmt::Debug {
    /// The verdict on `call`.
    fn judge(&self, call: &ConditionCall<'_>) -> Verdict;

    /// The names of the rules that may apply to calls of `tool` (for `ravi tools list`).
    fn rules_for(&self, tool: &str) -> Vec<String>;
}
