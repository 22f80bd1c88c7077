use std::path::Path;

// The CLI's own parser, compiled in as the CLI compiles it.
#[expect(
    dead_code,
    reason = "only `RaviConfig::parse` is driven: the rest of the CLI's config goes unused here"
)]
#[path = "../../../crates/ravi-cli/src/config.rs"]
mod config;

/// `ravi.toml` (the CLI's own parser, compiled in from `crates/ravi-cli/src/config.rs`) and
/// `SKILL.md` on arbitrary text: never a panic, and every refusal names the file it refuses.
pub fn config_files(input: &[u8]) {
    // The first byte picks the file (odd: SKILL.md), the rest is its text.
    let Some((&which, rest)) = input.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    if which % 2 == 1 {
        let path = Path::new("/skills/fuzzed/SKILL.md");
        if let Err(e) = ravi_agents::skills::parse_skill(path, text) {
            let said = e.to_string();
            assert!(
                said.contains("SKILL.md"),
                "a refusal that names no file: {said}"
            );
        }
    } else {
        let path = Path::new("/project/ravi.toml");
        if let Err(e) = config::RaviConfig::parse(text, path) {
            let said = format!("{e:#}");
            assert!(
                said.contains("ravi.toml"),
                "a refusal that names no file: {said}"
            );
        }
    }
}
