//! Tool declarations in each provider's exact wire shape.
//!
//! One tool, five consumers: OpenAI Chat Completions, OpenAI Responses, Anthropic Messages,
//! Google Gemini and MCP `tools/list`. Function tools are encoded from their [`FunctionSpec`]
//! (with the strict and Gemini transforms where the provider needs them); hosted and
//! provider-defined tools send their `provider_specs` entry for that provider verbatim and are
//! left out for a provider with no entry, so nothing malformed is ever sent.
//!
//! [`Toolbox::schemas`] gives the value of the request's `tools` array, [`Toolbox::schema_for`]
//! one entry, [`Toolbox::deferred_schemas`] the `defer_loading` tools that `schemas` leaves
//! out, and [`Toolbox::lint`] what each provider would reject or silently lose.
//!
//! ```
//! use ravi_agents::{Toolbox, tool_fn};
//! use ravi_agents::kernel::Provider;
//! use serde_json::json;
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Args { city: String, days: Option<u8> }
//!
//! let tools = Toolbox::from(vec![tool_fn("forecast", "Weather forecast for a city.",
//!     |a: Args| async move { format!("sunny in {} for {:?} days", a.city, a.days) }).into()]);
//! let openai = tools.schemas(Provider::Openai);
//! assert_eq!(openai[0]["type"], "function");
//! assert_eq!(openai[0]["function"]["name"], "forecast");
//! let anthropic = tools.schema_for("forecast", Provider::Anthropic).unwrap();
//! assert_eq!(anthropic["input_schema"]["required"], json!(["city"]));
//! ```

mod anthropic;
mod gemini;
mod mcp;
mod openai;
mod strict;

use ravi_kernel::{AnyTool, FunctionSpec, Provider, Tool};
use serde::Serialize;
use serde_json::Value;

pub use gemini::{ALLOWED as GEMINI_ALLOWED, to_gemini};
pub use mcp::{annotations_for_risk, mcp_annotations, mcp_tool_entry};
pub use strict::{MAX_NESTING, MAX_PROPERTIES, make_strict};

use crate::toolbox::{Toolbox, validate_tool_name};

/// The outcome of a schema transform.
#[derive(Debug, Clone, PartialEq)]
pub struct Transformed {
    /// The rewritten schema.
    pub schema: Value,
    /// Why the transform could not be applied; the caller sends the original instead.
    pub blocking: Vec<String>,
    /// Constraints dropped or weakened by the rewrite.
    pub lossy: Vec<String>,
}

/// How to encode schemas.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SchemaOptions {
    /// Ask for strict schemas (OpenAI Chat/Responses `strict: true`, Anthropic `strict: true`).
    /// A tool whose schema cannot be made strict is sent non-strict and reported.
    pub strict: bool,
}

impl SchemaOptions {
    /// Options with strict mode on.
    pub fn strict() -> Self {
        Self { strict: true }
    }
}

/// How serious a lint finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Severity {
    /// Something the provider silently loses or that changes what the model sees.
    Warning,
    /// The provider would reject the request.
    Error,
}

/// One thing a provider would reject or silently lose about one tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LintFinding {
    /// The tool's name (`*` for the toolbox as a whole).
    pub tool: String,
    /// The provider concerned.
    pub provider: Provider,
    /// How serious it is.
    pub severity: Severity,
    /// What happens and why, naming the schema path where there is one.
    pub message: String,
}

impl std::fmt::Display for LintFinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sev = match self.severity {
            Severity::Warning => "warning",
            Severity::Error => "error",
        };
        write!(
            f,
            "{sev}: {} ({}): {}",
            self.tool, self.provider, self.message
        )
    }
}

/// Declarations plus what was lost producing them.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    /// The provider's `tools` array (for Gemini: one `functionDeclarations` object followed by
    /// hosted tool objects).
    pub tools: Vec<Value>,
    /// Findings about the tools rendered.
    pub findings: Vec<LintFinding>,
}

/// Most tools OpenAI accepts in one request.
pub const OPENAI_MAX_TOOLS: usize = 128;

/// One encoded entry with its findings.
pub(crate) struct Entry {
    value: Option<Value>,
    findings: Vec<(Severity, String)>,
}

impl Entry {
    fn some(value: Value) -> Self {
        Self {
            value: Some(value),
            findings: Vec::new(),
        }
    }
}

fn encode_function(tool: &dyn Tool, provider: &Provider, opts: SchemaOptions) -> Entry {
    let spec = tool.spec();
    let mut findings = common_findings(&spec, provider);
    let mut entry = match provider {
        Provider::Openai => openai::chat(&spec, opts),
        Provider::OpenaiResponses => openai::responses(&spec, opts),
        Provider::Anthropic => anthropic::function(&spec, &tool.input_examples(), opts),
        Provider::Gemini => gemini_function(&spec),
        Provider::Mcp => mcp::function(tool, &spec),
        _ => Entry {
            value: None,
            findings: vec![(
                Severity::Error,
                format!("no encoder for provider `{provider}`"),
            )],
        },
    };
    findings.append(&mut entry.findings);
    entry.findings = findings;
    entry
}

fn gemini_function(spec: &FunctionSpec) -> Entry {
    let t = to_gemini(&spec.parameters);
    let mut decl = serde_json::json!({"name": spec.name, "description": spec.description});
    // Gemini rejects an OBJECT schema with no properties; a tool without arguments omits
    // `parameters` altogether.
    if t.schema.get("properties").is_some() {
        decl["parameters"] = t.schema;
    }
    let mut findings: Vec<(Severity, String)> = t
        .blocking
        .into_iter()
        .map(|b| (Severity::Error, b))
        .collect();
    findings.extend(
        t.lossy
            .into_iter()
            .map(|l| (Severity::Warning, format!("lossy rewrite: {l}"))),
    );
    Entry {
        value: Some(decl),
        findings,
    }
}

/// Checks every provider shares, plus per-provider name rules.
fn common_findings(spec: &FunctionSpec, provider: &Provider) -> Vec<(Severity, String)> {
    let mut out = Vec::new();
    if let Err(e) = validate_tool_name(&spec.name) {
        out.push((Severity::Error, e.to_string()));
    }
    if *provider == Provider::Gemini
        && !spec
            .name
            .starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
    {
        out.push((
            Severity::Error,
            "Gemini function names must start with a letter or an underscore".into(),
        ));
    }
    if spec.description.trim().is_empty() {
        out.push((
            Severity::Warning,
            "empty description: the model has only the name to decide when to call it".into(),
        ));
    }
    if spec.parameters.get("type").and_then(Value::as_str) != Some("object") {
        out.push((
            Severity::Error,
            "input schema is not `\"type\": \"object\"`, which every provider requires".into(),
        ));
    }
    if !jsonschema::meta::is_valid(&spec.parameters) {
        let detail = jsonschema::meta::validate(&spec.parameters)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        out.push((
            Severity::Error,
            format!("input schema is not a valid JSON Schema: {detail}"),
        ));
    }
    out
}

fn encode(tool: &AnyTool, provider: &Provider, opts: SchemaOptions) -> Entry {
    match tool {
        AnyTool::Function(t) => encode_function(t.as_ref(), provider, opts),
        other => match other.provider_specs().remove(provider) {
            Some(spec) => Entry::some(spec.spec),
            None => Entry {
                value: None,
                findings: vec![(
                    Severity::Warning,
                    format!(
                        "{} has no declaration for {provider}; left out of its tools",
                        crate::toolbox::describe(other)
                    ),
                )],
            },
        },
    }
}

fn is_lazy(tool: &AnyTool) -> bool {
    tool.as_function().is_some_and(|t| t.lazy_schema())
}

/// Marks an entry as deferred for the providers that support `defer_loading`.
fn mark_deferred(value: &mut Value, provider: &Provider) {
    if matches!(provider, Provider::Anthropic | Provider::OpenaiResponses)
        && let Some(obj) = value.as_object_mut()
    {
        obj.insert("defer_loading".into(), Value::Bool(true));
    }
}

/// The `tools` array of one request to `provider`, for `tools` in order: each function tool
/// through the provider's encoder (strict mode per tool where asked and possible, else sent
/// non-strict with a finding; Anthropic `input_examples`), hosted and provider-defined tools
/// as their declaration for that provider (left out without one). Tools marked
/// `defer_loading` are sent with `defer_loading: true` where the provider loads tools on
/// demand (Anthropic, OpenAI Responses) — the caller adds the provider's search tool — and in
/// full elsewhere. What the provider clients send, and what `ravi tools schema` prints.
pub fn encode_tools(tools: &[AnyTool], provider: Provider, opts: SchemaOptions) -> Rendered {
    render_iter(tools.iter(), provider, opts)
}

fn render_iter<'a>(
    tools: impl Iterator<Item = &'a AnyTool>,
    provider: Provider,
    opts: SchemaOptions,
) -> Rendered {
    let mut entries = Vec::new();
    let mut findings = Vec::new();
    for tool in tools {
        let entry = encode(tool, &provider, opts);
        findings.extend(
            entry
                .findings
                .into_iter()
                .map(|(severity, message)| LintFinding {
                    tool: tool.name().to_owned(),
                    provider: provider.clone(),
                    severity,
                    message,
                }),
        );
        if let Some(mut v) = entry.value {
            if is_lazy(tool) {
                mark_deferred(&mut v, &provider);
            }
            entries.push((tool.is_hosted() || tool.is_provider_defined(), v));
        }
    }
    let tools = if provider == Provider::Gemini {
        // Function declarations travel together in one Tool object; hosted tools
        // (`googleSearch`, `codeExecution`) are Tool objects of their own.
        let (hosted, functions): (Vec<_>, Vec<_>) = entries.into_iter().partition(|e| e.0);
        let mut tools = Vec::new();
        if !functions.is_empty() {
            let decls: Vec<Value> = functions.into_iter().map(|e| e.1).collect();
            tools.push(serde_json::json!({"functionDeclarations": decls}));
        }
        tools.extend(hosted.into_iter().map(|e| e.1));
        tools
    } else {
        entries.into_iter().map(|e| e.1).collect()
    };
    if matches!(provider, Provider::Openai | Provider::OpenaiResponses)
        && tools.len() > OPENAI_MAX_TOOLS
    {
        findings.push(LintFinding {
            tool: "*".into(),
            provider: provider.clone(),
            severity: Severity::Error,
            message: format!(
                "{} tools exceed OpenAI's limit of {OPENAI_MAX_TOOLS} per request; mark some `defer_loading` or filter the toolbox",
                tools.len()
            ),
        });
    }
    Rendered { tools, findings }
}

impl Toolbox {
    /// Renders the tools selected by `deferred` for `provider`, with every finding.
    pub fn render(&self, provider: Provider, opts: SchemaOptions, deferred: bool) -> Rendered {
        render_iter(
            self.iter().filter(|t| is_lazy(t) == deferred),
            provider,
            opts,
        )
    }

    /// The provider's `tools` array for every tool not marked `defer_loading`.
    pub fn schemas(&self, provider: Provider) -> Vec<Value> {
        self.render(provider, SchemaOptions::default(), false).tools
    }

    /// As [`Toolbox::schemas`], with options (strict mode).
    pub fn schemas_with(&self, provider: Provider, opts: SchemaOptions) -> Vec<Value> {
        self.render(provider, opts, false).tools
    }

    /// The `defer_loading` tools only, marked `defer_loading: true` where the provider
    /// supports it (Anthropic, OpenAI Responses); other providers get the plain shape, to be
    /// sent once the tool is asked for.
    pub fn deferred_schemas(&self, provider: Provider) -> Vec<Value> {
        self.render(provider, SchemaOptions::default(), true).tools
    }

    /// The declaration of one tool (for Gemini, its function declaration), or `None` when the
    /// tool is unknown or has no declaration for the provider.
    pub fn schema_for(&self, name: &str, provider: Provider) -> Option<Value> {
        self.schema_for_with(name, provider, SchemaOptions::default())
    }

    /// As [`Toolbox::schema_for`], with options.
    pub fn schema_for_with(
        &self,
        name: &str,
        provider: Provider,
        opts: SchemaOptions,
    ) -> Option<Value> {
        let tool = ravi_kernel::ToolRegistry::get(self, name)?;
        let mut v = encode(&tool, &provider, opts).value?;
        if is_lazy(&tool) {
            mark_deferred(&mut v, &provider);
        }
        Some(v)
    }

    /// What `provider` would reject or silently lose, per tool, for deferred and non-deferred
    /// tools alike. Strict-capable providers are checked as if strict mode were asked for, so
    /// a schema that cannot be strict is reported.
    pub fn lint(&self, provider: Provider) -> Vec<LintFinding> {
        let opts = SchemaOptions {
            strict: matches!(
                provider,
                Provider::Openai | Provider::OpenaiResponses | Provider::Anthropic
            ),
        };
        let mut out = self.render(provider.clone(), opts, false).findings;
        out.extend(self.render(provider, opts, true).findings);
        out
    }
}

/// The constant a branch of a union pins (`{"const": x}` or `{"enum": [x]}`).
pub(crate) fn branch_const(branch: &Value) -> Option<&Value> {
    branch.get("const").or_else(|| match branch.get("enum") {
        Some(Value::Array(values)) if values.len() == 1 => values.first(),
        _ => None,
    })
}

/// Whether a union's branches are all distinct constants (how schemars spells a documented
/// unit enum): such a `oneOf` is exactly an `anyOf`, or an `enum`.
pub(crate) fn is_const_union(branches: &Value) -> bool {
    let Some(bs) = branches.as_array() else {
        return false;
    };
    let consts: Vec<&Value> = bs.iter().filter_map(branch_const).collect();
    !bs.is_empty()
        && consts.len() == bs.len()
        && consts
            .iter()
            .enumerate()
            .all(|(i, c)| !consts.iter().skip(i + 1).any(|d| d == c))
}

/// Turns a strict transform into an entry's schema, strict flag and findings.
pub(crate) fn strict_or_not(
    parameters: &Value,
    opts: SchemaOptions,
) -> (Value, bool, Vec<(Severity, String)>) {
    if !opts.strict {
        return (parameters.clone(), false, Vec::new());
    }
    let t = make_strict(parameters);
    if t.blocking.is_empty() {
        let findings = t
            .lossy
            .into_iter()
            .map(|l| (Severity::Warning, format!("strict mode: {l}")))
            .collect();
        (t.schema, true, findings)
    } else {
        let findings = t
            .blocking
            .into_iter()
            .map(|b| (Severity::Warning, format!("sent non-strict: {b}")))
            .collect();
        (parameters.clone(), false, findings)
    }
}
