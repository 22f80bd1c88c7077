//! What a tool's calls do to the world: the facts MCP's tool annotations state
//! (`readOnlyHint`, `destructiveHint`, `idempotentHint`, `openWorldHint`).
//!
//! Effects are not risk. [`ToolRisk`] is a policy's judgement — how much harm a call can do,
//! which decides whether a person is asked — while effects describe behaviour, so a client
//! that reads them (a host that skips its own confirmation for read-only tools) is told the
//! truth. The two usually agree, which is why a tool that states no effects gets them derived
//! from its risk ([`ToolEffects::from_risk`]); where they differ the tool says so: `list_files`
//! is Sensitive (it reads what a model did not write) yet closed-world (it never leaves the
//! workspace), and `tool_chain` is Safe (each call its script makes is gated on its own) yet
//! may write and delete through the tools it reaches.

use serde::{Deserialize, Serialize};

use crate::risk::ToolRisk;

/// The effects of a tool's calls, each a plain fact.
///
/// `#[non_exhaustive]`: built with [`ToolEffects::read_only_closed`], [`ToolEffects::unknown`]
/// or [`ToolEffects::from_risk`] and adjusted with the `with_*` setters.
///
/// ```
/// use ravi_kernel::ToolEffects;
///
/// // `write_file`: writes (and may overwrite) inside the workspace only.
/// let write = ToolEffects::unknown().with_open_world(false);
/// assert!(!write.read_only && write.destructive && !write.idempotent && !write.open_world);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolEffects {
    /// The tool changes nothing outside the call (MCP `readOnlyHint`).
    pub read_only: bool,
    /// A call may destroy or overwrite what was there before (MCP `destructiveHint`); false
    /// for a read-only tool.
    pub destructive: bool,
    /// A second call with the same arguments has no effect beyond the first's (MCP
    /// `idempotentHint`).
    pub idempotent: bool,
    /// The tool reaches things outside the host's own bounds — the network, other systems
    /// (MCP `openWorldHint`); false for a tool confined to a workspace or to computing.
    pub open_world: bool,
}

impl ToolEffects {
    /// What a tool that states nothing may do, by MCP's defaults: not read-only, destructive,
    /// not idempotent, open-world. The safe assumption about an unknown tool.
    pub const fn unknown() -> Self {
        Self {
            read_only: false,
            destructive: true,
            idempotent: false,
            open_world: true,
        }
    }

    /// A tool that only reads, inside the host's own bounds (computing, reading the
    /// workspace): read-only, not destructive, idempotent, closed-world.
    pub const fn read_only_closed() -> Self {
        Self {
            read_only: true,
            destructive: false,
            idempotent: true,
            open_world: false,
        }
    }

    /// The effects a tool of `risk` has when it states none (the default of
    /// [`Tool::effects`](crate::Tool::effects)): Safe reads inside its bounds; Sensitive
    /// reads but reaches outside them; High writes without destroying; Critical destroys.
    /// Read-only levels are idempotent; the others are when `idempotent` says so
    /// ([`Tool::idempotent`](crate::Tool::idempotent)).
    pub const fn from_risk(risk: ToolRisk, idempotent: bool) -> Self {
        let read_only = matches!(risk, ToolRisk::Safe | ToolRisk::Sensitive);
        Self {
            read_only,
            destructive: matches!(risk, ToolRisk::Critical),
            idempotent: read_only || idempotent,
            open_world: !matches!(risk, ToolRisk::Safe),
        }
    }

    /// The effects of something that may call any of `reached` (a script over a toolbox):
    /// read-only when every one is, destructive or open-world when any is, and idempotent
    /// only when every one is read-only (a script that writes may not write the same thing
    /// twice). Over nothing it is [`read_only_closed`](Self::read_only_closed).
    pub fn union_of(reached: impl IntoIterator<Item = ToolEffects>) -> Self {
        reached
            .into_iter()
            .fold(Self::read_only_closed(), |acc, e| Self {
                read_only: acc.read_only && e.read_only,
                destructive: acc.destructive || e.destructive,
                idempotent: acc.idempotent && e.read_only,
                open_world: acc.open_world || e.open_world,
            })
    }

    /// The same effects, read-only or not. A read-only tool destroys nothing, so `true` also
    /// clears `destructive`.
    #[must_use]
    pub const fn with_read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        if read_only {
            self.destructive = false;
        }
        self
    }

    /// The same effects, destructive or not. `true` also clears `read_only`.
    #[must_use]
    pub const fn with_destructive(mut self, destructive: bool) -> Self {
        self.destructive = destructive;
        if destructive {
            self.read_only = false;
        }
        self
    }

    /// The same effects, idempotent or not.
    #[must_use]
    pub const fn with_idempotent(mut self, idempotent: bool) -> Self {
        self.idempotent = idempotent;
        self
    }

    /// The same effects, reaching outside the host's bounds or not.
    #[must_use]
    pub const fn with_open_world(mut self, open_world: bool) -> Self {
        self.open_world = open_world;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn risk_levels_map_as_the_mcp_encoder_always_did() {
        let got: Vec<(bool, bool, bool, bool)> = ToolRisk::ALL
            .iter()
            .map(|r| {
                let e = ToolEffects::from_risk(*r, false);
                (e.read_only, e.destructive, e.idempotent, e.open_world)
            })
            .collect();
        assert_eq!(
            got,
            [
                (true, false, true, false),
                (true, false, true, true),
                (false, false, false, true),
                (false, true, false, true),
            ]
        );
        assert!(ToolEffects::from_risk(ToolRisk::High, true).idempotent);
    }

    #[test]
    fn a_union_is_as_bad_as_its_worst_member() {
        let read = ToolEffects::read_only_closed();
        let fetch = read.with_open_world(true);
        let delete = ToolEffects::unknown()
            .with_idempotent(true)
            .with_open_world(false);
        assert_eq!(ToolEffects::union_of([]), read);
        assert_eq!(ToolEffects::union_of([read, read]), read);
        assert_eq!(ToolEffects::union_of([read, fetch]), fetch);
        let all = ToolEffects::union_of([read, fetch, delete]);
        assert_eq!(
            (
                all.read_only,
                all.destructive,
                all.idempotent,
                all.open_world
            ),
            (false, true, false, true)
        );
    }

    #[test]
    fn setters_keep_read_only_and_destructive_apart() {
        let e = ToolEffects::read_only_closed().with_destructive(true);
        assert!(e.destructive && !e.read_only);
        let e = ToolEffects::unknown().with_read_only(true);
        assert!(e.read_only && !e.destructive);
    }
}
