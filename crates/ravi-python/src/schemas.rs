//! `ravi.tool_schemas`: the declarations Ravi would send a provider for a toolbox.

use pyo3::prelude::*;
use ravi_agents::{SchemaOptions, Toolbox};
use ravi_kernel::Provider;

use crate::sandbox::collect;
use crate::{bad_value, guarded};

/// The `tools` array `provider` (`openai`, `openai-responses`, `anthropic`, `gemini`, `mcp`)
/// would be sent for `tools` (tool specs and tool sets), as JSON text, with the findings
/// (what a provider cannot express) as a second JSON text.
#[pyfunction]
#[pyo3(signature = (tools, provider="openai", strict=false))]
pub(crate) fn tool_schemas(
    tools: Vec<Bound<'_, PyAny>>,
    provider: &str,
    strict: bool,
) -> PyResult<(String, String)> {
    guarded("ravi.tool_schemas", || {
        let parsed: Provider = provider.parse().map_err(|_| {
            bad_value(
                "provider",
                format!("{provider:?}"),
                "one of \"openai\", \"openai-responses\", \"anthropic\", \"gemini\", \"mcp\"",
            )
        })?;
        let toolbox = Toolbox::try_from_tools(collect(&tools)?)
            .map_err(|e| bad_value("tools", "[...]", &e.to_string()))?;
        let opts = if strict {
            SchemaOptions::strict()
        } else {
            SchemaOptions::default()
        };
        let rendered = toolbox.render(parsed, opts, false);
        let findings: Vec<String> = rendered.findings.iter().map(ToString::to_string).collect();
        Ok((
            serde_json::Value::Array(rendered.tools).to_string(),
            serde_json::to_string(&findings).unwrap_or_else(|_| "[]".into()),
        ))
    })
}
