//! Risk and effects of an upstream MCP tool: configuration first, then the server's
//! annotations.
//!
//! Annotations come from the server and are untrusted hints (the spec says so). They can only
//! be used to classify; an operator's configured risk always wins. A hint the server leaves
//! out takes the spec's default — `readOnlyHint` false, `destructiveHint` true,
//! `idempotentHint` false, `openWorldHint` true — and a tool with no annotations at all is a
//! tool whose every hint is left out: the same as `{}`, destructive, so Critical. A read-only
//! tool that does not say it is closed-world is open-world, so Sensitive.
//!
//! The effects ([`effects_for`]) are relayed as the upstream stated them, defaults filled in,
//! so a client of `ravi serve` reads what the upstream said; the risk ([`risk_for`]) is what
//! Ravi's approvals act on.

use ravi_kernel::{ToolEffects, ToolRisk};
use serde_json::Value;

/// The effects an upstream tool states in its `annotations` object (as sent in `tools/list`,
/// or `None` when the server sent none), each hint the server left out taking the spec's
/// default ([`ToolEffects::unknown`]: not read-only, destructive, not idempotent, open-world).
/// A hint that is not a boolean counts as left out. A read-only tool is not destructive,
/// whatever its `destructiveHint` (the spec gives that hint meaning only for tools that
/// write).
pub fn effects_for(annotations: Option<&Value>) -> ToolEffects {
    let a = annotations.and_then(Value::as_object);
    let hint = |k: &str| a.and_then(|a| a.get(k)).and_then(Value::as_bool);
    let unknown = ToolEffects::unknown();
    unknown
        .with_destructive(hint("destructiveHint").unwrap_or(unknown.destructive))
        .with_read_only(hint("readOnlyHint").unwrap_or(unknown.read_only))
        .with_idempotent(hint("idempotentHint").unwrap_or(unknown.idempotent))
        .with_open_world(hint("openWorldHint").unwrap_or(unknown.open_world))
}

/// The risk of a tool given an optional configured override and its `annotations` object (as
/// sent in `tools/list`, or `None` when the server sent none).
///
/// Order: configured → read-only → Safe when closed-world, Sensitive when open-world (the
/// default) → destructive (the default) → Critical → otherwise High (a non-destructive write,
/// open- or closed-world). Absent annotations and `{}` are the same: every hint at its default,
/// so Critical.
pub fn risk_for(configured: Option<ToolRisk>, annotations: Option<&Value>) -> ToolRisk {
    if let Some(r) = configured {
        return r;
    }
    let effects = effects_for(annotations);
    if effects.read_only {
        // A read-only tool that reaches the open world (web fetch) still leaks data out.
        return if effects.open_world {
            ToolRisk::Sensitive
        } else {
            ToolRisk::Safe
        };
    }
    if effects.destructive {
        return ToolRisk::Critical;
    }
    ToolRisk::High
}

/// The annotations Ravi emits for a tool of the given risk that states no effects of its own
/// (the same encoder as `ravi tools schema --provider mcp`: [`annotations_for_risk`]). Tools
/// served by `ravi serve` state their own effects ([`mcp_annotations`]).
///
/// [`annotations_for_risk`]: ravi_agents::schema::annotations_for_risk
/// [`mcp_annotations`]: ravi_agents::schema::mcp_annotations
pub fn annotations_for(risk: ToolRisk) -> Value {
    ravi_agents::schema::annotations_for_risk(risk)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn risk(a: Value) -> ToolRisk {
        risk_for(None, Some(&a))
    }

    #[test]
    fn configured_risk_wins_over_hints() {
        let a = json!({"readOnlyHint": true, "openWorldHint": false});
        assert_eq!(
            risk_for(Some(ToolRisk::Critical), Some(&a)),
            ToolRisk::Critical
        );
        assert_eq!(risk_for(Some(ToolRisk::Safe), None), ToolRisk::Safe);
    }

    #[test]
    fn absent_annotations_take_every_default_so_critical() {
        assert_eq!(risk_for(None, None), ToolRisk::Critical);
        assert_eq!(effects_for(None), ToolEffects::unknown());
    }

    #[test]
    fn empty_annotations_are_the_same_as_absent_ones() {
        assert_eq!(risk(json!({})), ToolRisk::Critical);
        assert_eq!(effects_for(Some(&json!({}))), ToolEffects::unknown());
    }

    #[test]
    fn read_only_without_open_world_is_open_world_so_sensitive() {
        assert_eq!(risk(json!({"readOnlyHint": true})), ToolRisk::Sensitive);
        let e = effects_for(Some(&json!({"readOnlyHint": true})));
        assert!(e.read_only && e.open_world && !e.destructive && !e.idempotent);
    }

    #[test]
    fn read_only_and_closed_world_is_safe() {
        assert_eq!(
            risk(json!({"readOnlyHint": true, "openWorldHint": false})),
            ToolRisk::Safe
        );
    }

    #[test]
    fn read_only_and_open_world_is_sensitive() {
        assert_eq!(
            risk(json!({"readOnlyHint": true, "openWorldHint": true})),
            ToolRisk::Sensitive
        );
    }

    #[test]
    fn a_write_that_does_not_say_it_is_harmless_is_destructive_so_critical() {
        assert_eq!(risk(json!({"readOnlyHint": false})), ToolRisk::Critical);
        assert_eq!(risk(json!({"destructiveHint": true})), ToolRisk::Critical);
    }

    #[test]
    fn a_non_destructive_write_is_high_open_or_closed_world() {
        assert_eq!(
            risk(json!({"readOnlyHint": false, "destructiveHint": false})),
            ToolRisk::High
        );
        assert_eq!(
            risk(json!({"destructiveHint": false, "openWorldHint": false})),
            ToolRisk::High
        );
    }

    #[test]
    fn hints_that_are_not_booleans_count_as_left_out() {
        assert_eq!(
            risk(json!({"readOnlyHint": "yes", "openWorldHint": false})),
            ToolRisk::Critical
        );
        assert_eq!(risk(json!("read-only")), ToolRisk::Critical);
    }

    #[test]
    fn effects_relay_every_stated_hint() {
        let a = json!({"readOnlyHint": false, "destructiveHint": false,
                       "idempotentHint": true, "openWorldHint": false});
        let e = effects_for(Some(&a));
        assert_eq!(
            (e.read_only, e.destructive, e.idempotent, e.open_world),
            (false, false, true, false)
        );
        assert_eq!(ravi_agents::schema::mcp_annotations(e), a);
    }

    #[test]
    fn emitted_annotations_round_trip_through_risk_for() {
        for r in ToolRisk::ALL {
            assert_eq!(risk_for(None, Some(&annotations_for(r))), r);
        }
    }
}
