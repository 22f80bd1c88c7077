//! Skills: prompt packages that add instructions and narrow the tools an agent may use.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// A named package of instructions plus the tools it is allowed to use.
///
/// Attaching a skill appends `instructions` to the system prompt; when `allowed_tools` is set,
/// the agent's tool view shrinks to those names and the invoker denies calls to anything else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skill {
    /// Unique name.
    pub name: String,
    /// What the skill is for, in one line.
    #[serde(default)]
    pub description: String,
    /// Prompt text appended to the system prompt.
    pub instructions: String,
    /// The tools usable while the skill is active; `None` means no restriction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_tools: Option<Vec<String>>,
    /// Where the skill was loaded from, if from disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// Version string, e.g. `1.0.0`.
    #[serde(default = "default_version")]
    pub version: String,
}

fn default_version() -> String {
    "0.0.0".into()
}

impl Skill {
    /// Whether the skill lets `tool` be called.
    pub fn allows(&self, tool: &str) -> bool {
        self.allowed_tools
            .as_ref()
            .is_none_or(|names| names.iter().any(|n| n == tool))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_tools_restrict() {
        let mut s = Skill {
            name: "s".into(),
            description: String::new(),
            instructions: "do it".into(),
            allowed_tools: None,
            path: None,
            version: default_version(),
        };
        assert!(s.allows("anything"));
        s.allowed_tools = Some(vec!["read_file".into()]);
        assert!(s.allows("read_file"));
        assert!(!s.allows("shell"));
    }
}
