//! Risk of an upstream MCP tool: configuration first, then the server's annotations.
//!
//! Annotations come from the server and are untrusted hints (the spec says so). They can only
//! be used to classify; an operator's configured risk always wins. Absent hints take the spec's
//! defaults: `destructiveHint` defaults to true and `openWorldHint` to true, so a tool with no
//! annotations at all is treated as destructive.

use ravi_kernel::ToolRisk;
use serde_json::Value;

/// The risk of a tool given an optional configured override and its `annotations` object (as
/// sent in `tools/list`, or `None` when the server sent none).
///
/// Order: configured → `readOnlyHint: true` → Safe → `destructiveHint` (default true) → Critical →
/// `openWorldHint` (default true) → Sensitive at least → otherwise High (a non-destructive,
/// closed-world write).
pub fn risk_for(configured: Option<ToolRisk>, annotations: Option<&Value>) -> ToolRisk {
    if let Some(r) = configured {
        return r;
    }
    let Some(a) = annotations.and_then(Value::as_object) else {
        // No hints at all: unknown behaviour, fail towards asking a human.
        return ToolRisk::High;
    };
    let hint = |k: &str| a.get(k).and_then(Value::as_bool);
    if hint("readOnlyHint") == Some(true) {
        // A read-only tool that reaches the open world (web fetch) still leaks data out.
        return if hint("openWorldHint") == Some(true) {
            ToolRisk::Sensitive
        } else {
            ToolRisk::Safe
        };
    }
    if hint("destructiveHint").unwrap_or(true) {
        return ToolRisk::Critical;
    }
    ToolRisk::High.max(if hint("openWorldHint").unwrap_or(true) {
        ToolRisk::Sensitive
    } else {
        ToolRisk::Safe
    })
}

/// The annotations Ravi emits for a tool of the given risk when serving it over MCP (the same
/// encoder as `ravi tools schema --provider mcp`: [`annotations_for_risk`]).
///
/// [`annotations_for_risk`]: ravi_agents::schema::annotations_for_risk
pub fn annotations_for(risk: ToolRisk) -> Value {
    ravi_agents::schema::annotations_for_risk(risk)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn configuration_wins_over_hints() {
        let a = json!({"readOnlyHint": true});
        assert_eq!(
            risk_for(Some(ToolRisk::Critical), Some(&a)),
            ToolRisk::Critical
        );
    }

    #[test]
    fn hints_map_onto_the_ladder() {
        assert_eq!(risk_for(None, None), ToolRisk::High);
        assert_eq!(risk_for(None, Some(&json!({}))), ToolRisk::Critical);
        assert_eq!(
            risk_for(None, Some(&json!({"readOnlyHint": true}))),
            ToolRisk::Safe
        );
        assert_eq!(
            risk_for(
                None,
                Some(&json!({"readOnlyHint": true, "openWorldHint": true}))
            ),
            ToolRisk::Sensitive
        );
        assert_eq!(
            risk_for(
                None,
                Some(&json!({"readOnlyHint": false, "destructiveHint": false}))
            ),
            ToolRisk::High
        );
        assert_eq!(
            risk_for(None, Some(&json!({"destructiveHint": true}))),
            ToolRisk::Critical
        );
    }

    #[test]
    fn emitted_annotations_round_trip_through_risk_for() {
        for r in ToolRisk::ALL {
            assert_eq!(risk_for(None, Some(&annotations_for(r))), r);
        }
    }
}
