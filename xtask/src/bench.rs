//! `cargo xtask bench`: runs the benchmarks and prints each figure next to its peer.
//!
//! Filled in by the issues that add benchmarks; until then it reports that there is none.

use anyhow::bail;

/// Entry point for `cargo xtask bench [NAME] [--json] [--quick]`.
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let mut json = false;
    let mut name = None;
    for arg in args {
        match arg.as_str() {
            "--json" => json = true,
            "--quick" => {}
            a if a.starts_with('-') => bail!("unknown bench flag `{a}`"),
            a => name = Some(a.to_owned()),
        }
    }
    let _ = (json, name);
    bail!("no benchmarks are defined yet")
}
