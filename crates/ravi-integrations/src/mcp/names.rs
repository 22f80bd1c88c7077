//! Namespacing of upstream tool names: `server__tool`, at most 64 characters, collision-safe.
//!
//! Model providers accept tool names of 1–64 characters from `[A-Za-z0-9_-]`. MCP servers may
//! use longer names or other characters, and two servers may both have a `search` tool, so each
//! upstream tool gets a local name made from the server name and the tool name. The mapping is
//! kept so a call to the local name reaches the right upstream tool with its original name.

use std::collections::{BTreeMap, HashSet};

/// The longest tool name every provider accepts.
pub const MAX_TOOL_NAME: usize = 64;

/// Separator between the server and the tool part of a local name.
pub const SEPARATOR: &str = "__";

/// A bidirectional map between local (namespaced) and upstream tool names for one server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NameMap {
    server: String,
    to_upstream: BTreeMap<String, String>,
    to_local: BTreeMap<String, String>,
}

/// Keeps `[A-Za-z0-9_-]`, replaces anything else with `_`.
pub fn sanitize(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() { "_".to_owned() } else { s }
}

/// A short stable hash (FNV-1a, 32 bits, hex) used to make truncated names unique.
fn short_hash(s: &str) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in s.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("{h:08x}")
}

impl NameMap {
    /// Builds the map for `server`'s tools, in the order given. `taken` holds names already
    /// used by other tools of the toolbox; new names avoid them (and each other).
    pub fn build<'a>(
        server: &str,
        upstream: impl IntoIterator<Item = &'a str>,
        taken: &HashSet<String>,
    ) -> Self {
        Self::build_renamed(server, upstream, &BTreeMap::new(), taken)
    }

    /// Like [`NameMap::build`], serving the tools `rename` names under their new name (the
    /// part after `server__`).
    pub fn build_renamed<'a>(
        server: &str,
        upstream: impl IntoIterator<Item = &'a str>,
        rename: &BTreeMap<String, String>,
        taken: &HashSet<String>,
    ) -> Self {
        let prefix = format!("{}{SEPARATOR}", sanitize(server));
        let mut map = Self {
            server: server.to_owned(),
            ..Self::default()
        };
        let mut used: HashSet<String> = taken.clone();
        for name in upstream {
            if map.to_local.contains_key(name) {
                continue;
            }
            let part = rename.get(name).map_or(name, String::as_str);
            let local = unique_name(&prefix, part, &used);
            used.insert(local.clone());
            map.to_upstream.insert(local.clone(), name.to_owned());
            map.to_local.insert(name.to_owned(), local);
        }
        map
    }

    /// The server this map belongs to.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The upstream name for a local name.
    pub fn upstream(&self, local: &str) -> Option<&str> {
        self.to_upstream.get(local).map(String::as_str)
    }

    /// The local name for an upstream name.
    pub fn local(&self, upstream: &str) -> Option<&str> {
        self.to_local.get(upstream).map(String::as_str)
    }

    /// Every `(local, upstream)` pair, sorted by local name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.to_upstream
            .iter()
            .map(|(l, u)| (l.as_str(), u.as_str()))
    }

    /// How many tools are mapped.
    pub fn len(&self) -> usize {
        self.to_upstream.len()
    }

    /// Whether no tool is mapped.
    pub fn is_empty(&self) -> bool {
        self.to_upstream.is_empty()
    }
}

fn truncate(s: &str, max: usize) -> &str {
    // Names are ASCII after sanitising, so byte slicing is on char boundaries.
    if s.len() <= max { s } else { &s[..max] }
}

fn unique_name(prefix: &str, upstream: &str, used: &HashSet<String>) -> String {
    let clean = sanitize(upstream);
    let plain = format!("{prefix}{clean}");
    // A sanitised or truncated name could collide with another tool's; those get a hash suffix
    // of the *original* upstream name, which is what makes them distinct.
    if plain.len() <= MAX_TOOL_NAME && clean == upstream && !used.contains(&plain) {
        return plain;
    }
    let hash = short_hash(upstream);
    let mut salt = 0u32;
    loop {
        let suffix = if salt == 0 {
            format!("_{hash}")
        } else {
            format!("_{hash}{salt}")
        };
        let room = MAX_TOOL_NAME.saturating_sub(suffix.len());
        let head = truncate(&plain, room);
        let candidate = format!("{head}{suffix}");
        if !used.contains(&candidate) {
            return candidate;
        }
        salt += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn plain_names_are_prefixed() {
        let m = NameMap::build("fs", ["read_file", "list"], &HashSet::new());
        assert_eq!(m.local("read_file"), Some("fs__read_file"));
        assert_eq!(m.upstream("fs__list"), Some("list"));
    }

    #[test]
    fn odd_characters_and_collisions_get_distinct_names() {
        let m = NameMap::build("s", ["a.b", "a_b", "a b"], &HashSet::new());
        let locals: HashSet<_> = ["a.b", "a_b", "a b"]
            .iter()
            .filter_map(|n| m.local(n))
            .collect();
        assert_eq!(locals.len(), 3);
        assert_eq!(m.local("a_b"), Some("s__a_b"));
    }

    #[test]
    fn avoids_names_already_taken() {
        let taken: HashSet<String> = ["s__x".to_owned()].into();
        let m = NameMap::build("s", ["x"], &taken);
        assert_ne!(m.local("x"), Some("s__x"));
        assert_eq!(m.upstream(m.local("x").unwrap_or_default()), Some("x"));
    }

    proptest! {
        #[test]
        fn names_are_valid_unique_and_map_back(
            server in "[a-z]{1,20}",
            tools in proptest::collection::vec("[ -~]{1,90}", 1..20),
        ) {
            let m = NameMap::build(&server, tools.iter().map(String::as_str), &HashSet::new());
            let mut seen = HashSet::new();
            for t in &tools {
                let local = m.local(t).unwrap_or_default().to_owned();
                prop_assert!(!local.is_empty() && local.len() <= MAX_TOOL_NAME, "{local}");
                prop_assert!(local.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
                prop_assert_eq!(m.upstream(&local), Some(t.as_str()));
                seen.insert(local);
            }
            let distinct: HashSet<_> = tools.iter().collect();
            prop_assert_eq!(seen.len(), distinct.len());
        }
    }
}
