//! Who may use which tool: per-principal access rules, and the one decision function that
//! serves both listing tools and calling them — so a principal never sees a tool it cannot call
//! and can call every tool it sees.
//!
//! A rule allows tools by name pattern (`*` matches any run of characters, `?` one: `github__*`,
//! `*_file`), refuses others (`deny` wins over `tools`) and caps the risk it allows. A policy
//! gives rules to principals by id and to groups; a principal may use a tool when some rule
//! that applies to it allows the tool at its risk and none that applies denies it. A principal
//! no rule names gets the policy's default rule, and with no default nothing. A grant can carry
//! a rule of its own (an API key's): the tool must pass it too.
//!
//! ```
//! use ravi_agents::access::{AccessPolicy, AccessRule, Grant};
//! use ravi_agents::kernel::{Principal, ToolRisk};
//!
//! let policy = AccessPolicy::new()
//!     .with_group("ops", AccessRule::tools(["*"]).with_max_risk(ToolRisk::High))
//!     .with_default(AccessRule::tools(["read_*", "list_files"]).with_max_risk(ToolRisk::Sensitive));
//! let alice = Principal::new("alice").with_groups(vec!["ops".into()]);
//! let grant = Grant::new(policy.clone().into(), Some(alice));
//! assert!(grant.check("shell", ToolRisk::High).is_ok());
//! assert!(grant.check("shell", ToolRisk::Critical).is_err()); // above the group's ceiling
//! let bob = Grant::new(policy.into(), Some(Principal::new("bob")));
//! assert!(bob.check("read_file", ToolRisk::Safe).is_ok());
//! assert!(bob.check("write_file", ToolRisk::High).is_err());
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use ravi_kernel::{Principal, ToolRisk};
use serde::{Deserialize, Serialize};
use wildmatch::WildMatch;

/// A tool-name pattern: `*` matches any run of characters, `?` exactly one.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ToolPattern {
    text: String,
}

impl ToolPattern {
    /// The pattern `text`.
    pub fn new(text: impl Into<String>) -> Self {
        Self { text: text.into() }
    }

    /// Whether `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        WildMatch::new(&self.text).matches(name)
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl TryFrom<String> for ToolPattern {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        if text.is_empty() {
            return Err("a tool pattern cannot be empty; use `*` for every tool".into());
        }
        Ok(Self { text })
    }
}

impl From<ToolPattern> for String {
    fn from(p: ToolPattern) -> Self {
        p.text
    }
}

/// What one rule allows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct AccessRule {
    /// The tools it allows (patterns); none allows nothing.
    #[serde(default)]
    pub tools: Vec<ToolPattern>,
    /// The tools it refuses even when another rule allows them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<ToolPattern>,
    /// The highest risk it allows (default: any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_risk: Option<ToolRisk>,
    /// How many calls a principal it applies to may make (`"10/s"`, `"100/min"`, `"1000/h"`);
    /// default: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<RateSpec>,
}

/// A rate: `N/s`, `N/min` or `N/h` (N ≥ 1), allowing bursts of up to N.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RateSpec {
    count: std::num::NonZeroU32,
    per: std::time::Duration,
}

impl RateSpec {
    /// This process's share of the rate when `replicas` processes enforce it together: a
    /// `replicas`-th of the rate and of the burst (at least one call), so together they never
    /// admit more than the rate (beyond the rounding up of a burst smaller than one call each).
    fn quota(self, replicas: u32) -> governor::Quota {
        let n = replicas.max(1);
        let period = self.per.saturating_mul(n) / self.count.get();
        let burst =
            std::num::NonZeroU32::new(self.count.get() / n).unwrap_or(std::num::NonZeroU32::MIN);
        governor::Quota::with_period(period)
            .unwrap_or_else(|| governor::Quota::per_second(self.count))
            .allow_burst(burst)
    }
}

impl std::str::FromStr for RateSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "rate `{s}`: expected N/s, N/min or N/h with N a whole number ≥ 1, e.g. 100/min"
            )
        };
        let (n, unit) = s.trim().split_once('/').ok_or_else(bad)?;
        let count = n
            .trim()
            .parse::<std::num::NonZeroU32>()
            .map_err(|_| bad())?;
        let per = match unit.trim() {
            "s" | "sec" | "second" => std::time::Duration::from_secs(1),
            "m" | "min" | "minute" => std::time::Duration::from_secs(60),
            "h" | "hour" => std::time::Duration::from_secs(3600),
            _ => return Err(bad()),
        };
        Ok(Self { count, per })
    }
}

impl TryFrom<String> for RateSpec {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<RateSpec> for String {
    fn from(r: RateSpec) -> Self {
        let unit = match r.per.as_secs() {
            1 => "s",
            60 => "min",
            _ => "h",
        };
        format!("{}/{unit}", r.count)
    }
}

impl std::fmt::Display for RateSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&String::from(*self))
    }
}

/// A principal's rate limiter: one token bucket, shared by every request it makes.
pub struct RateLimit {
    spec: RateSpec,
    replicas: u32,
    limiter: governor::DefaultDirectRateLimiter,
}

impl std::fmt::Debug for RateLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimit")
            .field("spec", &self.spec)
            .finish()
    }
}

impl RateLimit {
    /// A full bucket of `spec`.
    pub fn new(spec: RateSpec) -> Self {
        Self::shared(spec, 1)
    }

    /// A full bucket of this process's share of `spec` among `replicas` (see
    /// [`RateLimits::set_replicas`]).
    pub fn shared(spec: RateSpec, replicas: u32) -> Self {
        Self {
            spec,
            replicas: replicas.max(1),
            limiter: governor::RateLimiter::direct(spec.quota(replicas)),
        }
    }

    /// Takes one call from the bucket, or says how long until one is free.
    pub fn take(&self) -> Result<(), std::time::Duration> {
        use governor::clock::Clock as _;
        self.limiter.check().map_err(|not_until| {
            not_until.wait_time_from(governor::clock::DefaultClock::default().now())
        })
    }
}

/// The token buckets of a gateway's callers, by principal (and by principal and tool pattern
/// for per-tool rates), shared by all their requests. Buckets are made on first use; a changed
/// rate gets a fresh bucket.
///
/// Several replicas behind a load balancer enforce one rate together by each taking its share
/// ([`set_replicas`](Self::set_replicas)): a bounded approximation, never admitting more than
/// the rate in total; with traffic spread unevenly a principal may get less.
#[derive(Debug)]
pub struct RateLimits {
    buckets: std::sync::Mutex<std::collections::HashMap<String, Arc<RateLimit>>>,
    replicas: std::sync::atomic::AtomicU32,
}

impl Default for RateLimits {
    fn default() -> Self {
        Self {
            buckets: std::sync::Mutex::default(),
            replicas: std::sync::atomic::AtomicU32::new(1),
        }
    }
}

impl RateLimits {
    /// No buckets yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many replicas share the rates (this one included; at least 1). A change makes
    /// fresh buckets at the new share.
    pub fn set_replicas(&self, n: u32) {
        self.replicas
            .store(n.max(1), std::sync::atomic::Ordering::Relaxed);
    }

    /// How many replicas share the rates.
    pub fn replicas(&self) -> u32 {
        self.replicas.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The bucket named `key` at `spec` (this replica's share of it).
    pub fn bucket(&self, key: &str, spec: RateSpec) -> Arc<RateLimit> {
        let replicas = self.replicas();
        let mut buckets = match self.buckets.lock() {
            Ok(b) => b,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(b) = buckets.get(key)
            && b.spec == spec
            && b.replicas == replicas
        {
            return Arc::clone(b);
        }
        let fresh = Arc::new(RateLimit::shared(spec, replicas));
        buckets.insert(key.to_owned(), Arc::clone(&fresh));
        fresh
    }
}

impl AccessRule {
    /// A rule allowing the tools matching `patterns`, at any risk.
    pub fn tools<I, S>(patterns: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            tools: patterns.into_iter().map(|p| ToolPattern::new(p)).collect(),
            ..Self::default()
        }
    }

    /// The same rule refusing the tools matching `patterns`.
    #[must_use]
    pub fn with_deny<I, S>(mut self, patterns: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.deny = patterns.into_iter().map(|p| ToolPattern::new(p)).collect();
        self
    }

    /// The same rule allowing risks up to `risk` only.
    #[must_use]
    pub fn with_max_risk(mut self, risk: ToolRisk) -> Self {
        self.max_risk = Some(risk);
        self
    }

    fn denies(&self, tool: &str) -> bool {
        self.deny.iter().any(|p| p.matches(tool))
    }

    fn allows(&self, tool: &str, risk: ToolRisk) -> bool {
        self.tools.iter().any(|p| p.matches(tool))
            && !self.denies(tool)
            && self.max_risk.is_none_or(|max| risk <= max)
    }
}

/// Rules by principal and group, and a default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct AccessPolicy {
    /// Rules by principal id (`key:NAME`, a token's subject).
    #[serde(default)]
    pub principals: BTreeMap<String, AccessRule>,
    /// Rules by group.
    #[serde(default)]
    pub groups: BTreeMap<String, AccessRule>,
    /// The rule of a principal no other rule names (none: such a principal may use nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<AccessRule>,
    /// Per-tool rates: each principal may call the tools matching a pattern at most this often
    /// (one bucket per principal and pattern, on top of the principal's own rate).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rates: BTreeMap<ToolPattern, RateSpec>,
    /// Separation of duties: an approval asked for by a principal may be approved only by
    /// another one (the requester may still deny).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub separate_approvals: bool,
    /// Conditions on what a call does (`[[access.conditions]]`): CEL rules over its arguments,
    /// judged for every caller, authenticated or not (see [`crate::conditions`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<crate::conditions::ConditionRule>,
}

impl AccessPolicy {
    /// A policy allowing nothing to anyone.
    pub fn new() -> Self {
        Self::default()
    }

    /// The same policy with `rule` for the principal `id`.
    #[must_use]
    pub fn with_principal(mut self, id: impl Into<String>, rule: AccessRule) -> Self {
        self.principals.insert(id.into(), rule);
        self
    }

    /// The same policy with `rule` for the members of `group`.
    #[must_use]
    pub fn with_group(mut self, group: impl Into<String>, rule: AccessRule) -> Self {
        self.groups.insert(group.into(), rule);
        self
    }

    /// The same policy with a default rule.
    #[must_use]
    pub fn with_default(mut self, rule: AccessRule) -> Self {
        self.default = Some(rule);
        self
    }

    /// The same policy limiting each principal's calls of the tools matching `pattern` to
    /// `rate`.
    #[must_use]
    pub fn with_tool_rate(mut self, pattern: impl Into<String>, rate: RateSpec) -> Self {
        self.rates.insert(ToolPattern::new(pattern), rate);
        self
    }

    /// The rules that apply to `principal`: its own and its groups', else the default.
    fn rules<'a>(&'a self, principal: Option<&Principal>) -> Vec<&'a AccessRule> {
        let mut rules = Vec::new();
        if let Some(p) = principal {
            rules.extend(self.principals.get(&p.id));
            rules.extend(p.groups.iter().filter_map(|g| self.groups.get(g)));
            // A token's scopes count as the groups `scope:NAME`.
            rules.extend(self.groups.iter().filter_map(|(g, rule)| {
                let scope = g.strip_prefix("scope:")?;
                p.scopes.iter().any(|s| s == scope).then_some(rule)
            }));
        }
        if rules.is_empty() {
            rules.extend(self.default.as_ref());
        }
        rules
    }

    /// The rate limit of `principal`: the first rule that applies to it and sets one.
    pub fn rate_for(&self, principal: Option<&Principal>) -> Option<RateSpec> {
        self.rules(principal).into_iter().find_map(|r| r.rate)
    }

    /// Whether `principal` may use `tool` at `risk`: `Err` says why not.
    pub fn check(
        &self,
        principal: Option<&Principal>,
        tool: &str,
        risk: ToolRisk,
    ) -> Result<(), String> {
        let who = principal.map_or("an anonymous caller", |p| p.id.as_str());
        let rules = self.rules(principal);
        if rules.is_empty() {
            return Err(format!("no access rule applies to {who}"));
        }
        if rules.iter().any(|r| r.denies(tool)) {
            return Err(format!("`{tool}` is denied to {who}"));
        }
        if rules.iter().any(|r| r.allows(tool, risk)) {
            return Ok(());
        }
        let capped = rules
            .iter()
            .any(|r| r.tools.iter().any(|p| p.matches(tool)));
        Err(if capped {
            format!("`{tool}` (risk {risk}) is above the risk {who} may use")
        } else {
            format!("`{tool}` is not among the tools {who} may use")
        })
    }
}

/// One caller's access: the policy, who they are, and a rule of their own (an API key's). The
/// single decision the tool list and the call both use.
#[derive(Debug, Clone)]
pub struct Grant {
    policy: Arc<AccessPolicy>,
    principal: Option<Principal>,
    own: Option<AccessRule>,
    limits: Option<Arc<RateLimits>>,
}

impl Grant {
    /// `principal`'s access under `policy`.
    pub fn new(policy: Arc<AccessPolicy>, principal: Option<Principal>) -> Self {
        Self {
            policy,
            principal,
            own: None,
            limits: None,
        }
    }

    /// The same grant drawing its calls from the shared buckets `limits`: the principal's
    /// rate (its own rule's, else the policy's) and the policy's per-tool rates.
    #[must_use]
    pub fn with_rate_limits(mut self, limits: Arc<RateLimits>) -> Self {
        self.limits = Some(limits);
        self
    }

    /// The principal's rate: its own rule's, else the first policy rule's that sets one.
    pub fn rate(&self) -> Option<RateSpec> {
        self.own
            .as_ref()
            .and_then(|r| r.rate)
            .or_else(|| self.policy.rate_for(self.principal.as_ref()))
    }

    /// Counts one call of `tool` against the rate limits: `Err` says which limit and when to
    /// retry.
    pub fn take_call(&self, tool: &str) -> Result<(), String> {
        let Some(limits) = &self.limits else {
            return Ok(());
        };
        let who = self
            .principal
            .as_ref()
            .map_or("this caller", |p| p.id.as_str());
        let refused = |spec: RateSpec, what: String, wait: std::time::Duration| {
            format!(
                "rate limit reached: {who} may make {spec} {what}; retry after {} ms",
                wait.as_millis().max(1)
            )
        };
        let owner = self.bucket_owner();
        for (pattern, spec) in &self.policy.rates {
            if pattern.matches(tool) {
                let key = format!("{owner}\u{0}{}", pattern.as_str());
                limits.bucket(&key, *spec).take().map_err(|wait| {
                    refused(*spec, format!("calls of `{}`", pattern.as_str()), wait)
                })?;
            }
        }
        if let Some(spec) = self.rate() {
            limits
                .bucket(&owner, spec)
                .take()
                .map_err(|wait| refused(spec, "calls".into(), wait))?;
        }
        Ok(())
    }

    /// The part of a bucket's key that names whose it is: `p`, the length of the principal's
    /// id and the id (so no id, whatever characters it holds, can name another principal's
    /// bucket or a per-tool one), or `-` for an unauthenticated caller.
    fn bucket_owner(&self) -> String {
        match &self.principal {
            Some(p) => format!("p{}:{}", p.id.len(), p.id),
            None => "-".to_owned(),
        }
    }

    /// The same grant also held to `rule` (an API key's own tools and risk ceiling).
    #[must_use]
    pub fn with_own_rule(mut self, rule: AccessRule) -> Self {
        self.own = Some(rule);
        self
    }

    /// The grant of the session running the call `ctx` belongs to, for a tool that makes calls
    /// of its own (code mode holds its script to the same access).
    pub fn from_context(ctx: &ravi_kernel::ToolContext) -> Option<Arc<Self>> {
        Arc::clone(ctx.access.as_ref()?).downcast::<Self>().ok()
    }

    /// Whether this caller's approvals must be approved by someone else (see
    /// [`AccessPolicy::separate_approvals`]).
    pub fn separate_approvals(&self) -> bool {
        self.policy.separate_approvals && self.principal.is_some()
    }

    /// Who it is for.
    pub fn principal(&self) -> Option<&Principal> {
        self.principal.as_ref()
    }

    /// The tools of `tools` this caller sees: exactly those it may call ([`check`](Self::check)
    /// decides both). Tools other than function tools (hosted, provider-defined) pass as they
    /// are: the invoker never runs them.
    pub fn visible(&self, tools: Vec<ravi_kernel::AnyTool>) -> Vec<ravi_kernel::AnyTool> {
        tools
            .into_iter()
            .filter(|t| match t.as_function() {
                Some(f) => self.check(f.name(), f.risk()).is_ok(),
                None => true,
            })
            .collect()
    }

    /// Whether the tool `tool` of risk `risk` may be listed to and called by this caller; `Err`
    /// says why not, for the caller.
    pub fn check(&self, tool: &str, risk: ToolRisk) -> Result<(), String> {
        self.policy.check(self.principal.as_ref(), tool, risk)?;
        if let Some(own) = &self.own
            && !own.allows(tool, risk)
        {
            let who = self
                .principal
                .as_ref()
                .map_or("this caller", |p| p.id.as_str());
            return Err(format!(
                "`{tool}` (risk {risk}) is outside what {who} may use"
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deny_wins_and_risk_caps() {
        let policy = AccessPolicy::new()
            .with_principal("a", AccessRule::tools(["*"]).with_deny(["shell"]))
            .with_group(
                "g",
                AccessRule::tools(["shell", "read_*"]).with_max_risk(ToolRisk::Safe),
            );
        let a = Principal::new("a").with_groups(vec!["g".into()]);
        assert!(
            policy.check(Some(&a), "shell", ToolRisk::Safe).is_err(),
            "deny wins"
        );
        assert!(
            policy
                .check(Some(&a), "write_file", ToolRisk::Critical)
                .is_ok()
        );
        let b = Principal::new("b").with_groups(vec!["g".into()]);
        assert!(policy.check(Some(&b), "read_file", ToolRisk::Safe).is_ok());
        let err = policy
            .check(Some(&b), "read_file", ToolRisk::High)
            .unwrap_err();
        assert!(err.contains("above the risk b may use"), "{err}");
        let err = policy.check(None, "read_file", ToolRisk::Safe).unwrap_err();
        assert!(
            err.contains("no access rule applies to an anonymous caller"),
            "{err}"
        );
    }

    #[test]
    fn replicas_each_take_their_share_of_a_rate() {
        let spec: RateSpec = "30/min".parse().unwrap();
        let burst = |limits: &RateLimits| {
            let b = limits.bucket("k", spec);
            (0..100).take_while(|_| b.take().is_ok()).count()
        };
        let limits = RateLimits::new();
        assert_eq!(burst(&limits), 30);
        // Three replicas: a third each, so together at most the rate.
        limits.set_replicas(3);
        assert_eq!(burst(&limits), 10);
        let tiny: RateSpec = "2/min".parse().unwrap();
        let b = limits.bucket("t", tiny);
        assert!(b.take().is_ok(), "at least one call each");
        assert!(b.take().is_err());
        limits.set_replicas(0);
        assert_eq!(limits.replicas(), 1);
    }

    #[test]
    fn rates_parse_limit_and_say_when_to_retry() {
        let spec: RateSpec = "2/min".parse().unwrap();
        assert_eq!(spec.to_string(), "2/min");
        for bad in ["0/s", "x/s", "5/day", "5"] {
            let err = bad.parse::<RateSpec>().unwrap_err();
            assert!(err.contains("expected N/s, N/min or N/h"), "{err}");
        }
        let policy = AccessPolicy::new()
            .with_principal(
                "k",
                AccessRule {
                    rate: Some(spec),
                    ..AccessRule::tools(["*"])
                },
            )
            .with_tool_rate("http_*", "1/h".parse().unwrap());
        let limits = Arc::new(RateLimits::new());
        let grant = Grant::new(Arc::new(policy), Some(Principal::new("k")))
            .with_rate_limits(Arc::clone(&limits));
        assert!(grant.take_call("a").is_ok());
        assert!(grant.take_call("http_get").is_ok());
        let err = grant.take_call("http_get").unwrap_err();
        assert!(err.contains("k may make 1/h calls of `http_*`"), "{err}");
        let err = grant.take_call("a").unwrap_err();
        assert!(err.contains("k may make 2/min calls; retry after"), "{err}");
        // Another principal has buckets of its own; the same one, in a new grant, shares them.
        let other = Grant::new(grant.policy.clone(), Some(Principal::new("j")))
            .with_rate_limits(Arc::clone(&limits));
        assert!(other.take_call("http_get").is_ok());
        let again =
            Grant::new(grant.policy.clone(), Some(Principal::new("k"))).with_rate_limits(limits);
        assert!(again.take_call("http_get").is_err());
    }

    #[test]
    fn no_principal_id_names_another_principals_bucket() {
        // An id made to look like a per-tool key of `k` (or like an anonymous caller) gets
        // buckets of its own.
        let policy = Arc::new(
            AccessPolicy::new()
                .with_default(AccessRule {
                    rate: Some("1/h".parse().unwrap()),
                    ..AccessRule::tools(["*"])
                })
                .with_tool_rate("http_*", "1/h".parse().unwrap()),
        );
        let limits = Arc::new(RateLimits::new());
        let grant = |id: Option<&str>| {
            Grant::new(Arc::clone(&policy), id.map(Principal::new))
                .with_rate_limits(Arc::clone(&limits))
        };
        assert!(grant(Some("k")).take_call("http_get").is_ok());
        for id in [
            Some("k\u{0}http_*"),
            Some("p1:k"),
            Some("-"),
            Some("this caller"),
            None,
        ] {
            assert!(grant(id).take_call("http_get").is_ok(), "{id:?}");
        }
        assert!(grant(Some("k")).take_call("a").is_err());
    }

    #[test]
    fn patterns_are_checked_when_read() {
        let err = serde_json::from_str::<AccessRule>(r#"{"tools": [""]}"#).unwrap_err();
        assert!(err.to_string().contains("cannot be empty"), "{err}");
        let err = serde_json::from_str::<AccessRule>(r#"{"tool": ["x"]}"#).unwrap_err();
        assert!(err.to_string().contains("unknown field `tool`"), "{err}");
        assert!(ToolPattern::new("gh__*").matches("gh__issues"));
        assert!(!ToolPattern::new("gh__*").matches("ghx__issues"));
    }
}

/// The digest an API key's secret is stored under: the SHA-256 of the secret (as
/// [`ravi_kernel::args_digest`] computes it for a JSON string). The secret itself is never kept.
pub fn key_digest(secret: &str) -> String {
    ravi_kernel::args_digest(&serde_json::Value::String(secret.to_owned()))
}

/// A fresh API key secret: `ravi_` and 40 random base-36 characters (about 206 bits).
pub fn new_key_secret() -> String {
    use rand::Rng as _;
    const ALPHABET: &[u8; 36] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    let mut s = String::from("ravi_");
    for _ in 0..40 {
        s.push(char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]));
    }
    s
}

/// Why a request was not authenticated, said to the client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
#[non_exhaustive]
pub struct AuthFailure {
    /// What was wrong (never echoing the token).
    pub message: String,
    /// What kind of failure it is (which HTTP answer it gets).
    pub kind: AuthFailureKind,
}

/// The kinds of [`AuthFailure`], each with its HTTP answer (RFC 6750).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuthFailureKind {
    /// No token, or one that is unknown, revoked, expired, badly signed or not meant for this
    /// server: `401` with `error="invalid_token"` (no error code when there was no token).
    InvalidToken,
    /// A valid token without a scope this server requires: `403` with
    /// `error="insufficient_scope"` and the scopes needed.
    InsufficientScope {
        /// The scopes the request needs (space-separated, as the header carries them).
        scope: String,
    },
    /// The token could not be checked right now (the key store or the issuer's keys are
    /// unreachable): `503`, to retry.
    Unavailable,
}

impl AuthFailure {
    /// A refused token saying `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            kind: AuthFailureKind::InvalidToken,
        }
    }

    /// A valid token lacking `scope`.
    pub fn insufficient_scope(scope: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            kind: AuthFailureKind::InsufficientScope {
                scope: scope.into(),
            },
        }
    }

    /// A token that could not be checked now, saying `message`.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            kind: AuthFailureKind::Unavailable,
        }
    }
}

/// Turns a request's bearer token into the caller's grant (a gateway asks it for every HTTP
/// request).
#[async_trait::async_trait]
pub trait Authenticator: Send + Sync {
    /// The grant of the caller presenting `bearer` (`None`: no `Authorization: Bearer` header).
    async fn authenticate(&self, bearer: Option<&str>) -> Result<Arc<Grant>, AuthFailure>;
}

/// Authenticates API keys kept in a [`Store`](ravi_kernel::Store) (`ravi keys create`): the
/// key's principal is `key:NAME`, held to `policy` and to the key's own rule. A key read from
/// the store is trusted for [`KEY_CACHE_TTL`], so a revoked key is refused within a second.
pub struct KeyAuthenticator {
    store: Arc<dyn ravi_kernel::Store>,
    policy: Arc<AccessPolicy>,
    limits: Arc<RateLimits>,
    /// The grants of keys read recently, by digest: a busy client costs one store read (and
    /// one reading of its key's rule) per [`KEY_CACHE_TTL`], not one per request.
    cache: std::sync::Mutex<std::collections::HashMap<String, (std::time::Instant, Arc<Grant>)>>,
}

/// How long a key read from the store is trusted: a revoked key is refused at most this long
/// after `ravi keys revoke`.
pub const KEY_CACHE_TTL: std::time::Duration = std::time::Duration::from_secs(1);

impl std::fmt::Debug for KeyAuthenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyAuthenticator").finish_non_exhaustive()
    }
}

impl KeyAuthenticator {
    /// Keys of `store`, under `policy`.
    pub fn new(store: Arc<dyn ravi_kernel::Store>, policy: Arc<AccessPolicy>) -> Self {
        Self {
            store,
            policy,
            limits: Arc::default(),
            cache: std::sync::Mutex::default(),
        }
    }

    /// The grant of the key of digest `hash`: from the cache when read within
    /// [`KEY_CACHE_TTL`], else from the store.
    async fn grant(&self, hash: &str) -> Result<Arc<Grant>, AuthFailure> {
        if let Ok(cache) = self.cache.lock()
            && let Some((at, grant)) = cache.get(hash)
            && at.elapsed() < KEY_CACHE_TTL
        {
            return Ok(Arc::clone(grant));
        }
        let key = self.store.key_by_hash(hash).await.map_err(|e| {
            tracing::warn!(error = %e, "could not read API keys");
            AuthFailure::unavailable("the API key could not be checked; try again")
        })?;
        let Some(key) = key.filter(|k| k.revoked_ms.is_none()) else {
            if let Ok(mut cache) = self.cache.lock() {
                cache.remove(hash);
            }
            return Err(AuthFailure::new(
                "the API key is not valid (unknown or revoked)",
            ));
        };
        let principal = Principal::new(format!("key:{}", key.name));
        let mut grant = Grant::new(Arc::clone(&self.policy), Some(principal))
            .with_rate_limits(Arc::clone(&self.limits));
        if let Some(rule) = key.rule {
            let rule: AccessRule = serde_json::from_value(rule).map_err(|e| {
                tracing::warn!(key = %key.name, error = %e, "an API key's rule cannot be read");
                AuthFailure::new("the API key's rule cannot be read; recreate the key")
            })?;
            grant = grant.with_own_rule(rule);
        }
        let grant = Arc::new(grant);
        if let Ok(mut cache) = self.cache.lock() {
            if cache.len() > 10_000 {
                cache.retain(|_, (at, _)| at.elapsed() < KEY_CACHE_TTL);
            }
            cache.insert(
                hash.to_owned(),
                (std::time::Instant::now(), Arc::clone(&grant)),
            );
        }
        Ok(grant)
    }

    /// The same authenticator drawing calls from `limits` (shared with other authenticators
    /// of the same server, so a principal has one bucket whichever way it signs in).
    #[must_use]
    pub fn with_rate_limits(mut self, limits: Arc<RateLimits>) -> Self {
        self.limits = limits;
        self
    }
}

#[async_trait::async_trait]
impl Authenticator for KeyAuthenticator {
    async fn authenticate(&self, bearer: Option<&str>) -> Result<Arc<Grant>, AuthFailure> {
        let Some(secret) = bearer else {
            return Err(AuthFailure::new(
                "this server requires an API key: send `Authorization: Bearer KEY`",
            ));
        };
        self.grant(&key_digest(secret)).await
    }
}
