//! `ravi.toml`: the configuration `ravi serve` and `ravi run` read — which built-in tools, which
//! upstream MCP servers, risk overrides per tool, policy limits and the workspace root.
//!
//! ```toml
//! workspace = "data"                  # relative to the file's directory
//! builtin = ["calculator", "read_file", "list_files"]   # default: all built-in tools
//!
//! [policy]
//! max_tool_calls = 20
//! call_timeout_secs = 30
//! approval_timeout_secs = 25
//! max_risk_unapproved = "safe"
//!
//! [risk]                              # overrides by tool name (built-in or `server__tool`)
//! list_files = "safe"
//!
//! [[mcp]]
//! name = "fs"
//! transport = "stdio"                 # or "http" with url = "...", bearer, headers
//! command = "npx"
//! args = ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]
//! ```
//!
//! A file that does not parse, an unknown key or a bad value is an error naming the file, the
//! line and the key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use async_trait::async_trait;
use ravi_integrations::mcp::McpServerSpec;
use ravi_kernel::{
    AnyTool, ChainPolicy, HitlMode, Tool, ToolContext, ToolError, ToolExecutionResult, ToolRisk,
};
use serde::Deserialize;

/// The file name looked for in the current directory when `--config` is not given.
pub const DEFAULT_FILE: &str = "ravi.toml";

/// A parsed `ravi.toml`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RaviConfig {
    /// The workspace root of the built-in file and shell tools (relative to the file).
    pub workspace: Option<PathBuf>,
    /// Which built-in tools to offer (default: all).
    pub builtin: Option<Vec<String>>,
    /// Policy limits.
    #[serde(default)]
    pub policy: PolicyConfig,
    /// Risk overrides by tool name.
    #[serde(default)]
    pub risk: BTreeMap<String, ToolRisk>,
    /// Upstream MCP servers: `name`, `transport = "stdio"` with `command`/`args`/`env`, or
    /// `transport = "http"` with `url`/`bearer`/`headers`; optional `risk` and `timeout_ms`.
    #[serde(default)]
    pub mcp: Vec<McpServerSpec>,
}

/// The `[policy]` table; unset keys keep the `ChainPolicy` defaults.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// Calls allowed per chain or run.
    pub max_tool_calls: Option<u32>,
    /// Limit of one call, in seconds.
    pub call_timeout_secs: Option<f64>,
    /// Limit of a whole chain, in seconds.
    pub total_timeout_secs: Option<f64>,
    /// How long an approval may take, in seconds (shorter than the call timeout).
    pub approval_timeout_secs: Option<f64>,
    /// Results larger than this many bytes are offloaded and passed by reference.
    pub max_inline_result_bytes: Option<usize>,
    /// The highest risk that runs without asking.
    pub max_risk_unapproved: Option<ToolRisk>,
}

fn secs(file: &Path, key: &str, v: f64) -> anyhow::Result<Duration> {
    if !(v.is_finite() && v > 0.0 && v <= 86_400.0) {
        bail!(
            "{}: [policy] {key} must be a number of seconds between 0 and 86400, got {v}",
            file.display()
        );
    }
    Ok(Duration::from_secs_f64(v))
}

impl RaviConfig {
    /// Reads `path`; every problem names the file (and, from the TOML parser, line and key).
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the config file {}", path.display()))?;
        let mut config: RaviConfig = toml::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{}: {}", path.display(), e.to_string().trim_end()))?;
        if let Some(names) = &config.builtin {
            for name in names {
                if !ravi_capabilities::BUILTIN_NAMES.contains(&name.as_str()) {
                    bail!(
                        "{}: `builtin` names `{name}`, which is not a built-in tool; expected \
                         some of: {}",
                        path.display(),
                        ravi_capabilities::BUILTIN_NAMES.join(", ")
                    );
                }
            }
        }
        if let Some(ws) = &config.workspace
            && ws.is_relative()
        {
            let base = path.parent().unwrap_or_else(|| Path::new("."));
            config.workspace = Some(base.join(ws));
        }
        config.policy(path)?;
        Ok(config)
    }

    /// `--config FILE`, else `./ravi.toml` when it exists, else the defaults.
    pub fn discover(explicit: Option<&Path>) -> anyhow::Result<(Self, Option<PathBuf>)> {
        match explicit {
            Some(p) => Ok((Self::load(p)?, Some(p.to_path_buf()))),
            None => {
                let p = PathBuf::from(DEFAULT_FILE);
                if p.is_file() {
                    Ok((Self::load(&p)?, Some(p)))
                } else {
                    Ok((Self::default(), None))
                }
            }
        }
    }

    /// The policy the file describes (defaults for unset keys).
    pub fn policy(&self, file: &Path) -> anyhow::Result<ChainPolicy> {
        let p = &self.policy;
        let mut b = ChainPolicy::builder();
        if let Some(n) = p.max_tool_calls {
            b = b.max_tool_calls(n);
        }
        if let Some(s) = p.call_timeout_secs {
            b = b.call_timeout(secs(file, "call_timeout_secs", s)?);
        }
        if let Some(s) = p.total_timeout_secs {
            b = b.total_timeout(secs(file, "total_timeout_secs", s)?);
        }
        if let Some(s) = p.approval_timeout_secs {
            b = b.approval_timeout(secs(file, "approval_timeout_secs", s)?);
        }
        if let Some(n) = p.max_inline_result_bytes {
            b = b.max_inline_result_bytes(n);
        }
        if let Some(r) = p.max_risk_unapproved {
            b = b.max_risk_unapproved(r);
        }
        b.build()
            .map_err(|e| anyhow::anyhow!("{}: [policy]: {e}", file.display()))
    }

    /// Keeps the built-in tools the file selects.
    pub fn select_builtins(&self, tools: Vec<AnyTool>) -> Vec<AnyTool> {
        match &self.builtin {
            None => tools,
            Some(names) => tools
                .into_iter()
                .filter(|t| names.iter().any(|n| n == t.name()))
                .collect(),
        }
    }

    /// Applies the `[risk]` overrides to the tools they name.
    pub fn apply_risk(&self, tools: Vec<AnyTool>) -> Vec<AnyTool> {
        tools
            .into_iter()
            .map(|t| match (&t, self.risk.get(t.name())) {
                (AnyTool::Function(inner), Some(risk)) => {
                    AnyTool::Function(Arc::new(RiskOverride {
                        inner: Arc::clone(inner),
                        risk: *risk,
                    }))
                }
                _ => t,
            })
            .collect()
    }

    /// Names in `[risk]` that match none of `names` (a typo the operator should hear about).
    pub fn unknown_risk_names(&self, names: &[String]) -> Vec<String> {
        self.risk
            .keys()
            .filter(|k| !names.contains(k))
            .cloned()
            .collect()
    }
}

/// A tool whose risk the operator set in `ravi.toml`; everything else is the tool's own.
struct RiskOverride {
    inner: Arc<dyn Tool>,
    risk: ToolRisk,
}

#[async_trait]
impl Tool for RiskOverride {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn description(&self) -> &str {
        self.inner.description()
    }
    fn input_schema(&self) -> serde_json::Value {
        self.inner.input_schema()
    }
    fn output_schema(&self) -> Option<serde_json::Value> {
        self.inner.output_schema()
    }
    fn risk(&self) -> ToolRisk {
        self.risk
    }
    fn hitl_mode(&self) -> HitlMode {
        self.inner.hitl_mode()
    }
    fn lazy_schema(&self) -> bool {
        self.inner.lazy_schema()
    }
    fn input_examples(&self) -> Vec<serde_json::Value> {
        self.inner.input_examples()
    }
    async fn execute(
        &self,
        ctx: &ToolContext,
        args: serde_json::Value,
    ) -> Result<ToolExecutionResult, ToolError> {
        self.inner.execute(ctx, args).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ravi.toml");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[test]
    fn a_full_file_parses_and_applies() {
        let (dir, path) = write(
            r#"
workspace = "data"
builtin = ["calculator", "read_file"]

[policy]
max_tool_calls = 3
call_timeout_secs = 10
approval_timeout_secs = 5
max_risk_unapproved = "safe"

[risk]
read_file = "high"

[[mcp]]
name = "fs"
transport = "stdio"
command = "npx"
args = ["-y", "server"]
"#,
        );
        let c = RaviConfig::load(&path).unwrap();
        assert_eq!(
            c.workspace.as_deref(),
            Some(dir.path().join("data").as_path())
        );
        let p = c.policy(&path).unwrap();
        assert_eq!(p.max_tool_calls(), 3);
        assert_eq!(p.max_risk_unapproved(), ToolRisk::Safe);
        assert_eq!(c.mcp.len(), 1);
        assert_eq!(c.mcp[0].name, "fs");
        let tools = ravi_capabilities::builtin_tools_in(
            dir.path(),
            ravi_capabilities::HttpPolicy::default(),
        )
        .unwrap();
        let tools = c.apply_risk(c.select_builtins(tools));
        let names: Vec<&str> = tools.iter().map(AnyTool::name).collect();
        assert_eq!(names, ["calculator", "read_file"]);
        let read = tools.iter().find(|t| t.name() == "read_file").unwrap();
        assert!(matches!(read, AnyTool::Function(t) if t.risk() == ToolRisk::High));
    }

    #[test]
    fn errors_name_the_file_line_and_key() {
        let (_d, path) = write("builtin = [\"calculator\"]\n\n[policy]\nmax_tool_cals = 3\n");
        let err = RaviConfig::load(&path).unwrap_err().to_string();
        assert!(err.contains("ravi.toml"), "{err}");
        assert!(err.contains("line 4"), "{err}");
        assert!(err.contains("max_tool_cals"), "{err}");

        let (_d, path) = write("[risk]\nshell = \"harmless\"\n");
        let err = RaviConfig::load(&path).unwrap_err().to_string();
        assert!(err.contains("line 2") && err.contains("harmless"), "{err}");

        let (_d, path) = write("builtin = [\"rm_rf\"]\n");
        let err = RaviConfig::load(&path).unwrap_err().to_string();
        assert!(err.contains("rm_rf") && err.contains("calculator"), "{err}");

        let (_d, path) = write("[policy]\ncall_timeout_secs = 5\napproval_timeout_secs = 9\n");
        let err = RaviConfig::load(&path).unwrap_err().to_string();
        assert!(
            err.contains("[policy]") && err.contains("ravi.toml"),
            "{err}"
        );
    }
}
