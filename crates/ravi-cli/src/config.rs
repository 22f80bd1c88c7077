//! `ravi.toml`: the configuration `ravi serve`, `ravi run` and `ravi agent` read — which
//! built-in tools, which upstream MCP servers, risk overrides per tool, policy limits and the
//! workspace root.
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
//! [hitl]                              # how to wait for approval, by tool name
//! write_file = "fire_and_continue"    # blocking | continue_on_timeout | fire_and_continue
//!
//! [hitl_timeout_secs]                 # how long to wait for that approval, by tool name
//! shell = 10                          # (default: the tool's own, else approval_timeout_secs)
//!
//! [idempotent]                        # running twice = running once, by tool name: a call a
//! write_file = true                   # crash interrupted runs again on resume, not in doubt
//!
//! [access.default]                    # who may use what through `ravi serve --auth keys`
//! tools = ["read_*", "list_files"]    # tool patterns; `deny = [...]`, `max_risk = "high"`
//! [access.groups.ops]                 # by group; [access.principals."key:ci"] by principal
//! tools = ["*"]                       # (a JWT's scopes count as groups "scope:NAME")
//! [access.rates]                      # per principal and tool pattern
//! "http_*" = "30/min"
//!
//! [http]                              # where http_get may go (default: any public host)
//! allow_hosts = ["api.github.com"]
//! [http.headers."api.github.com"]     # sent to that host; secrets by reference
//! Authorization = "Bearer ${secret:GH_TOKEN}"
//!
//! [secrets.GH_TOKEN]                  # a call's arguments may name ${secret:GH_TOKEN}
//! tools = ["http_get", "gh__*"]       # ... for these tools only,
//! hosts = ["api.github.com"]          # and http_get to these hosts only
//!
//! [audit]                             # the audit chain's signed checkpoints
//! key = "audit.pem"                   # Ed25519, PKCS#8 PEM (`ravi audit key --new audit.pem`),
//!                                     # or "${secret:AUDIT_KEY}"
//! checkpoint_secs = 60                # sign the chains' heads this often (and at exit)
//! trusted_keys = ["ed25519:…"]        # also trusted by `ravi audit verify` (older keys)
//!
//! [[access.conditions]]               # CEL rules over a call's arguments (docs/gateway.md)
//! when = 'tool.name == "http_get" && !args.url.startsWith("https://api.internal/")'
//! effect = "deny"                     # or "require_approval", "allow"
//! message = "http_get may only reach api.internal"
//!
//! [auth.jwt]                          # `ravi serve --auth jwt`: an OAuth resource server
//! issuer = "https://login.example.com"
//! resource = "https://tools.example.com/mcp"
//! jwks_url = "https://login.example.com/.well-known/jwks.json"
//!
//! [console]                           # `ravi serve --http --console`: who may use it
//! operators = ["key:alice", "group:ops"] # principal ids, group:NAME, scope:NAME
//!
//! [blobs]                             # where artifacts live (`--blobs`); default: per run
//! url = "s3://arts/ravi?endpoint=http://127.0.0.1:9000&allow_http=true"  # or "file:PATH"
//!
//! [store]                             # the durable store (journal, approvals, runs)
//! url = "sqlite:state/ravi.db"        # or "postgres://…", or "none"; default: the state dir
//!
//! [[mcp]]
//! name = "fs"
//! transport = "stdio"                 # or "http" / "sse" (legacy) with url, bearer, headers
//! command = "npx"
//! args = ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]
//! allow = ["read_*", "list_*"]        # which upstream tools to serve (default: all)
//! deny = ["write_*"]                  # never these
//! rename = { read_text_file = "read" } # served as fs__read
//! env = { TOKEN = "${secret:FS_TOKEN}" } # a secret by reference: env var FS_TOKEN, or the
//!                                     # file FS_TOKEN in $RAVI_SECRETS_DIR
//! ```
//!
//! A file that does not parse, an unknown key or a bad value is an error naming the file, the
//! line and the key.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use ravi_agents::overrides::{ToolOverride, apply_overrides};
use ravi_integrations::mcp::McpServerSpec;
use ravi_kernel::{AnyTool, ChainPolicy, HitlMode, ToolRisk};
use serde::Deserialize;
use toml::Spanned;

/// The file name looked for in the current directory when `--config` is not given.
pub const DEFAULT_FILE: &str = "ravi.toml";

/// A parsed `ravi.toml`.
#[derive(Debug, Default)]
pub struct RaviConfig {
    /// The workspace root of the built-in file and shell tools (relative to the file).
    pub workspace: Option<PathBuf>,
    /// Which built-in tools to offer (default: all).
    pub builtin: Option<Vec<String>>,
    /// Policy limits.
    pub policy: PolicyConfig,
    /// Risk overrides by tool name.
    pub risk: BTreeMap<String, ToolRisk>,
    /// Approval-mode overrides by tool name.
    pub hitl: BTreeMap<String, HitlMode>,
    /// Approval waits by tool name, in seconds.
    pub hitl_timeout_secs: BTreeMap<String, f64>,
    /// Idempotence by tool name (a crash-interrupted call of an idempotent tool is run again
    /// on resume instead of being reported in doubt).
    pub idempotent: BTreeMap<String, bool>,
    /// Upstream MCP servers: `name`, `transport = "stdio"` with `command`/`args`/`env`, or
    /// `transport = "http"` (or `"sse"`, the legacy HTTP+SSE transport) with
    /// `url`/`bearer`/`headers`; optional `risk` and `timeout_ms`.
    pub mcp: Vec<McpServerSpec>,
    /// `[access]`: which principals (API keys `key:NAME`, groups) may use which tools through
    /// `ravi serve --auth`; `None`: everyone authenticated may use every tool (a key's own
    /// rule still applies).
    pub access: Option<ravi_agents::access::AccessPolicy>,
    /// `[[access.conditions]]`, compiled: every invoker of `run`, `agent`, `tools call` and
    /// `serve` judges its calls by them.
    pub conditions: Option<Arc<ravi_policy::CelConditions>>,
    /// `[secrets.NAME]`: the secrets a call's arguments may name, and the tools (and
    /// `http_get` hosts) each is granted to.
    pub secret_grants: Arc<ravi_agents::secrets::SecretGrants>,
    /// `[store] url`: the durable store (`sqlite:PATH`, relative to the file; `postgres://…`;
    /// `none`).
    pub store_url: Option<String>,
    /// `[auth.jwt]`: how `ravi serve --auth jwt` checks access tokens (a relative
    /// `jwks_file` is relative to the file).
    pub jwt: Option<ravi_gateway::auth::JwtConfig>,
    /// `[http]`: `http_get`'s reach and per-host headers.
    pub http: FileHttp,
    /// `[blobs] url`: where artifacts live (`file:PATH`, relative to the file; `s3://…`).
    pub blobs_url: Option<String>,
    /// `[console] operators`: who may use the operator console (principal ids,
    /// `group:NAME`, `scope:NAME`); `None`: the console's default.
    pub console_operators: Option<Vec<String>>,
    /// `[sandbox.shell]`: how `shell` commands are confined; `None`: the defaults (mode
    /// `workspace`).
    pub shell_sandbox: Option<ravi_confine::Settings>,
    /// `[sandbox.mcp.NAME]`: how each stdio MCP server is confined (absent: the defaults).
    pub mcp_sandbox: BTreeMap<String, ravi_confine::Settings>,
    /// `[audit]`: the key that signs the audit chain's checkpoints, and how often.
    pub audit: AuditConfig,
    /// Where things are in the file, so later checks can name the line.
    lines: Lines,
}

/// `[audit]`: who signs the audit chain's checkpoints, how often, and which other keys a
/// verifier trusts.
#[derive(Debug, Clone)]
pub struct AuditConfig {
    /// The Ed25519 private key (PKCS#8 PEM): a file (relative paths from the config file's
    /// directory), or `${secret:NAME}` (the PEM text as a secret by reference).
    pub key: Option<String>,
    /// How often `ravi serve`, `run` and `agent` sign a checkpoint (and once as they end).
    pub checkpoint_every: Duration,
    /// Public keys (`ed25519:BASE64`) `ravi audit verify` trusts besides the key's own: keys
    /// used before a rotation, or a replica's.
    pub trusted_keys: Vec<String>,
    /// The config file, for errors.
    pub file: Option<PathBuf>,
}

impl Default for AuditConfig {
    fn default() -> Self {
        Self {
            key: None,
            checkpoint_every: Duration::from_secs(60),
            trusted_keys: Vec::new(),
            file: None,
        }
    }
}

impl AuditConfig {
    /// The private key's PEM text and where it came from, when one is configured. An unset
    /// secret or an unreadable file is an error naming the config file and the key.
    pub fn key_pem(&self) -> anyhow::Result<Option<(String, String)>> {
        let Some(key) = &self.key else {
            return Ok(None);
        };
        let file = self
            .file
            .as_ref()
            .map_or_else(|| "ravi.toml".to_owned(), |f| f.display().to_string());
        if key.contains("${secret:") {
            let mut redactor = ravi_agents::secrets::Redactor::default();
            let pem = ravi_agents::secrets::expand(key, &mut redactor)
                .map_err(|e| anyhow::anyhow!("{file}: [audit] key: {e}"))?;
            return Ok(Some((pem, format!("{key} ([audit] key of {file})"))));
        }
        let pem = std::fs::read_to_string(key).map_err(|e| {
            anyhow::anyhow!("{file}: [audit] key: cannot read the key file {key}: {e}")
        })?;
        // A signing key others can read signs for them too: refused, as ssh refuses one.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(key).map_or(0, |m| m.permissions().mode());
            if mode & 0o077 != 0 {
                bail!(
                    "{file}: [audit] key: the key file {key} can be read by others (mode \
                     {:o}): `chmod 600 {key}`, or pass the key as ${{secret:NAME}}",
                    mode & 0o777
                );
            }
        }
        Ok(Some((pem, key.clone())))
    }
}

/// Line numbers (1-based) of the keys later checks report on.
#[derive(Debug, Default, Clone)]
struct Lines {
    call_timeout_secs: Option<usize>,
    approval_timeout_secs: Option<usize>,
    total_timeout_secs: Option<usize>,
    /// The line of each `[[mcp]]` entry's `name`, in order.
    mcp_names: Vec<usize>,
}

/// The `[policy]` table; unset keys keep the `ChainPolicy` defaults.
#[derive(Debug, Default, Clone)]
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

// The file as written, with the position of every value later checks report on. Every table
// denies unknown keys, so a misspelt key is an error naming its line (from the TOML parser).

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    workspace: Option<PathBuf>,
    builtin: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    policy: FilePolicy,
    #[serde(default)]
    risk: BTreeMap<String, ToolRisk>,
    #[serde(default)]
    hitl: BTreeMap<String, HitlMode>,
    #[serde(default)]
    hitl_timeout_secs: BTreeMap<String, Spanned<f64>>,
    #[serde(default)]
    idempotent: BTreeMap<String, bool>,
    #[serde(default)]
    mcp: Vec<FileMcp>,
    #[serde(default)]
    store: FileStore,
    access: Option<ravi_agents::access::AccessPolicy>,
    #[serde(default)]
    auth: FileAuth,
    #[serde(default)]
    http: FileHttp,
    #[serde(default)]
    console: FileConsole,
    #[serde(default)]
    blobs: FileBlobs,
    #[serde(default)]
    sandbox: FileSandbox,
    #[serde(default)]
    secrets: BTreeMap<String, ravi_agents::secrets::SecretGrant>,
    #[serde(default)]
    audit: FileAudit,
}

/// `[audit]`: the audit chain's signing key.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileAudit {
    key: Option<String>,
    checkpoint_secs: Option<Spanned<f64>>,
    #[serde(default)]
    trusted_keys: Vec<String>,
}

/// `[sandbox]`: kernel confinement per kind of process.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileSandbox {
    shell: Option<ravi_confine::Settings>,
    #[serde(default)]
    mcp: BTreeMap<String, ravi_confine::Settings>,
}

/// `[blobs]`: the artifact store.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileBlobs {
    url: Option<String>,
}

/// `[console]`: the operator console.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileConsole {
    operators: Option<Vec<String>>,
}

/// `[http]`: where `http_get` may go, and headers (credentials) per host.
#[derive(Deserialize, Default, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct FileHttp {
    #[serde(default)]
    allow_hosts: Vec<String>,
    #[serde(default)]
    deny_hosts: Vec<String>,
    #[serde(default)]
    allow_private: bool,
    #[serde(default)]
    headers: BTreeMap<String, BTreeMap<String, String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileAuth {
    jwt: Option<ravi_gateway::auth::JwtConfig>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileStore {
    url: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FilePolicy {
    max_tool_calls: Option<u32>,
    call_timeout_secs: Option<Spanned<f64>>,
    total_timeout_secs: Option<Spanned<f64>>,
    approval_timeout_secs: Option<Spanned<f64>>,
    max_inline_result_bytes: Option<usize>,
    max_risk_unapproved: Option<ToolRisk>,
}

/// One `[[mcp]]` entry. Written out rather than reusing `McpServerSpec`'s serde form: that one
/// flattens the transport, and serde cannot deny unknown keys through a flatten.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileMcp {
    name: Spanned<String>,
    transport: Spanned<String>,
    command: Option<Spanned<String>>,
    args: Option<Spanned<Vec<String>>>,
    env: Option<Spanned<BTreeMap<String, String>>>,
    url: Option<Spanned<String>>,
    bearer: Option<Spanned<String>>,
    headers: Option<Spanned<BTreeMap<String, String>>>,
    #[serde(default)]
    risk: BTreeMap<String, ToolRisk>,
    timeout_ms: Option<Spanned<u64>>,
    #[serde(default)]
    allow: Vec<ravi_agents::access::ToolPattern>,
    #[serde(default)]
    deny: Vec<ravi_agents::access::ToolPattern>,
    rename: Option<Spanned<BTreeMap<String, String>>>,
    oauth: Option<Spanned<ravi_integrations::mcp::OAuthSettings>>,
}

/// Line of a byte offset in `text` (1-based).
fn line_of(text: &str, span: &Range<usize>) -> usize {
    text.get(..span.start)
        .map_or(1, |head| head.bytes().filter(|&b| b == b'\n').count() + 1)
}

fn secs(file: &Path, line: Option<usize>, key: &str, v: f64) -> anyhow::Result<Duration> {
    if !(v.is_finite() && v > 0.0 && v <= 86_400.0) {
        bail!(
            "{}{}: [policy] {key} must be a number of seconds between 0 and 86400, got {v}",
            file.display(),
            at(line)
        );
    }
    Ok(Duration::from_secs_f64(v))
}

/// `, line N` when the line is known.
fn at(line: Option<usize>) -> String {
    line.map(|l| format!(", line {l}")).unwrap_or_default()
}

impl FileHttp {
    /// The `http_get` policy this table describes.
    pub fn policy(&self) -> ravi_capabilities::HttpPolicy {
        let mut p = ravi_capabilities::HttpPolicy::default();
        p.allow_hosts.clone_from(&self.allow_hosts);
        p.deny_hosts.clone_from(&self.deny_hosts);
        p.allow_private = self.allow_private;
        p.headers = self
            .headers
            .iter()
            .map(|(host, h)| (host.clone(), h.clone()))
            .collect();
        p
    }
}

impl FileMcp {
    /// The server specification this entry describes; every problem names the file, the line
    /// and the key.
    fn into_spec(mut self, file: &Path, text: &str) -> anyhow::Result<McpServerSpec> {
        let mut oauth = self.oauth.take();
        let line = |span: &Range<usize>| line_of(text, span);
        let name_line = line(&self.name.span());
        let name = self.name.into_inner();
        let here = |l: usize| format!("{}, line {l}", file.display());
        McpServerSpec::check_name(&name)
            .map_err(|e| anyhow::anyhow!("{}: [[mcp]] name: {e}", here(name_line)))?;
        let transport_line = line(&self.transport.span());
        // Keys that belong to the other transport are mistakes, not options to ignore.
        let misplaced = |keys: &[(&str, Option<Range<usize>>)], transport: &str| {
            for (key, span) in keys {
                if let Some(span) = span {
                    bail!(
                        "{}: [[mcp]] `{name}`: `{key}` does not apply to transport = \
                         \"{transport}\"",
                        here(line(span))
                    );
                }
            }
            Ok(())
        };
        let mut spec = match self.transport.get_ref().as_str() {
            "stdio" => {
                misplaced(
                    &[
                        ("url", self.url.as_ref().map(Spanned::span)),
                        ("bearer", self.bearer.as_ref().map(Spanned::span)),
                        ("headers", self.headers.as_ref().map(Spanned::span)),
                    ],
                    "stdio",
                )?;
                let Some(command) = self.command else {
                    bail!(
                        "{}: [[mcp]] `{name}`: transport = \"stdio\" needs `command` (the \
                         program to start)",
                        here(transport_line)
                    );
                };
                if command.get_ref().trim().is_empty() {
                    bail!(
                        "{}: [[mcp]] `{name}`: `command` is empty",
                        here(line(&command.span()))
                    );
                }
                let mut spec = McpServerSpec::stdio(
                    name.clone(),
                    command.into_inner(),
                    self.args.map(Spanned::into_inner).unwrap_or_default(),
                );
                for (k, v) in self.env.map(Spanned::into_inner).unwrap_or_default() {
                    spec = spec.with_env(k, v);
                }
                spec
            }
            transport @ ("http" | "sse") => {
                misplaced(
                    &[
                        ("command", self.command.as_ref().map(Spanned::span)),
                        ("args", self.args.as_ref().map(Spanned::span)),
                        ("env", self.env.as_ref().map(Spanned::span)),
                    ],
                    transport,
                )?;
                let Some(url) = self.url else {
                    bail!(
                        "{}: [[mcp]] `{name}`: transport = \"{transport}\" needs `url`",
                        here(transport_line)
                    );
                };
                McpServerSpec::check_url(url.get_ref()).map_err(|e| {
                    anyhow::anyhow!("{}: [[mcp]] `{name}` url: {e}", here(line(&url.span())))
                })?;
                if let Some(h) = &self.headers
                    && let Some((k, _)) =
                        h.get_ref().iter().find(|(k, v)| http_header_invalid(k, v))
                {
                    bail!(
                        "{}: [[mcp]] `{name}`: header `{k}` is not a valid HTTP header name and \
                         value",
                        here(line(&h.span()))
                    );
                }
                let mut spec = if transport == "sse" {
                    McpServerSpec::sse(name.clone(), url.into_inner())
                } else {
                    McpServerSpec::http(name.clone(), url.into_inner())
                };
                if let Some(b) = self.bearer {
                    spec = spec.with_bearer(b.into_inner());
                }
                if let Some(o) = oauth.take() {
                    if transport == "sse" {
                        bail!(
                            "{}: [[mcp]] `{name}`: `oauth` is for transport = \"http\"",
                            here(line(&o.span()))
                        );
                    }
                    spec = spec.with_oauth(o.into_inner());
                }
                for (k, v) in self.headers.map(Spanned::into_inner).unwrap_or_default() {
                    spec = spec.with_header(k, v);
                }
                spec
            }
            other => bail!(
                "{}: [[mcp]] `{name}`: transport = \"{other}\" is not a transport; expected \
                 \"stdio\", \"http\" or \"sse\"",
                here(transport_line)
            ),
        };
        if let Some(o) = oauth {
            bail!(
                "{}: [[mcp]] `{name}`: `oauth` is for transport = \"http\"",
                here(line(&o.span()))
            );
        }
        if let Some(t) = self.timeout_ms {
            if *t.get_ref() == 0 {
                bail!(
                    "{}: [[mcp]] `{name}`: timeout_ms must be greater than 0",
                    here(line(&t.span()))
                );
            }
            spec.timeout_ms = Some(t.into_inner());
        }
        spec.risk = self.risk;
        spec.allow = self.allow.iter().map(|p| p.as_str().to_owned()).collect();
        spec.deny = self.deny.iter().map(|p| p.as_str().to_owned()).collect();
        if let Some(rename) = self.rename {
            let at = here(line(&rename.span()));
            for (from, to) in rename.into_inner() {
                if to.is_empty() || to.contains("__") || ravi_integrations::mcp::sanitize(&to) != to
                {
                    bail!(
                        "{at}: [[mcp]] `{name}`: rename `{from}` = \"{to}\": a new name is 1 or \
                         more characters of [A-Za-z0-9_-] without `__` (it becomes `{name}__NAME`)"
                    );
                }
                spec.rename.insert(from, to);
            }
        }
        Ok(spec)
    }
}

/// Header names are tokens; values are visible ASCII and spaces.
fn http_header_invalid(name: &str, value: &str) -> bool {
    name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
        || !value
            .bytes()
            .all(|b| b == b'\t' || (0x20..0x7f).contains(&b))
}

impl RaviConfig {
    /// Reads `path`; every problem names the file, the line and the key.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the config file {}", path.display()))?;
        Self::parse(&text, path)
    }

    /// Parses the text of `path`.
    pub fn parse(text: &str, path: &Path) -> anyhow::Result<Self> {
        let file: FileConfig = toml::from_str(text)
            .map_err(|e| anyhow::anyhow!("{}: {}", path.display(), e.to_string().trim_end()))?;
        let mut builtin = None;
        if let Some(names) = file.builtin {
            let mut out = Vec::with_capacity(names.len());
            for name in names {
                if !ravi_capabilities::BUILTIN_NAMES.contains(&name.get_ref().as_str()) {
                    bail!(
                        "{}, line {}: `builtin` names `{}`, which is not a built-in tool; \
                         expected some of: {}",
                        path.display(),
                        line_of(text, &name.span()),
                        name.get_ref(),
                        ravi_capabilities::BUILTIN_NAMES.join(", ")
                    );
                }
                out.push(name.into_inner());
            }
            builtin = Some(out);
        }
        let mut hitl_timeout_secs = BTreeMap::new();
        for (name, secs) in file.hitl_timeout_secs {
            let value = *secs.get_ref();
            if !(value.is_finite() && value > 0.0) {
                bail!(
                    "{}, line {}: [hitl_timeout_secs] `{name}` = {value}: expected a positive \
                     number of seconds",
                    path.display(),
                    line_of(text, &secs.span()),
                );
            }
            hitl_timeout_secs.insert(name, value);
        }
        let span_line = |v: &Option<Spanned<f64>>| v.as_ref().map(|s| line_of(text, &s.span()));
        let p = file.policy;
        let lines_policy = (
            span_line(&p.call_timeout_secs),
            span_line(&p.approval_timeout_secs),
            span_line(&p.total_timeout_secs),
        );
        let policy = PolicyConfig {
            max_tool_calls: p.max_tool_calls,
            call_timeout_secs: p.call_timeout_secs.map(Spanned::into_inner),
            total_timeout_secs: p.total_timeout_secs.map(Spanned::into_inner),
            approval_timeout_secs: p.approval_timeout_secs.map(Spanned::into_inner),
            max_inline_result_bytes: p.max_inline_result_bytes,
            max_risk_unapproved: p.max_risk_unapproved,
        };
        let mut mcp = Vec::with_capacity(file.mcp.len());
        let mut mcp_names = Vec::with_capacity(file.mcp.len());
        let mut seen: HashMap<String, usize> = HashMap::new();
        for entry in file.mcp {
            let line = line_of(text, &entry.name.span());
            let spec = entry.into_spec(path, text)?;
            if let Some(first) = seen.insert(spec.name.clone(), line) {
                bail!(
                    "{}, line {line}: [[mcp]] name `{}` is already used on line {first}; each \
                     server needs its own name",
                    path.display(),
                    spec.name
                );
            }
            mcp.push(spec);
            mcp_names.push(line);
        }
        let mut workspace = file.workspace;
        if let Some(ws) = &workspace
            && ws.is_relative()
        {
            let base = path.parent().unwrap_or_else(|| Path::new("."));
            workspace = Some(base.join(ws));
        }
        // A relative SQLite path is relative to the file, like the workspace.
        let store_url = file.store.url.map(|u| match u.strip_prefix("sqlite:") {
            Some(p) if !p.starts_with('/') && !p.is_empty() => {
                let base = path.parent().unwrap_or_else(|| Path::new("."));
                format!("sqlite:{}", base.join(p).display())
            }
            _ => u,
        });
        let mut jwt = file.auth.jwt;
        if let Some(jwt) = &mut jwt {
            if let Some(f) = &jwt.jwks_file
                && f.is_relative()
            {
                let base = path.parent().unwrap_or_else(|| Path::new("."));
                jwt.jwks_file = Some(base.join(f));
            }
            jwt.check()
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        }
        for (host, headers) in &file.http.headers {
            if let Some((k, _)) = headers.iter().find(|(k, v)| http_header_invalid(k, v)) {
                bail!(
                    "{}: [http.headers.\"{host}\"]: `{k}` is not a valid HTTP header name and value",
                    path.display()
                );
            }
        }
        if let Some(shell) = &file.sandbox.shell {
            shell
                .check()
                .map_err(|e| anyhow::anyhow!("{}: [sandbox.shell] {e}", path.display()))?;
        }
        for (name, settings) in &file.sandbox.mcp {
            settings
                .check()
                .map_err(|e| anyhow::anyhow!("{}: [sandbox.mcp.{name}] {e}", path.display()))?;
        }
        // Bad conditions fail here, naming the file, the rule and the CEL error.
        let conditions = match file.access.as_ref().map(|a| &a.conditions) {
            Some(rules) if !rules.is_empty() => Some(Arc::new(
                ravi_policy::CelConditions::compile(rules, &path.display().to_string())
                    .map_err(|e| anyhow::anyhow!("{e}"))?,
            )),
            _ => None,
        };
        let shell_sandbox = file.sandbox.shell;
        let mcp_sandbox = file.sandbox.mcp;
        let mut audit = AuditConfig {
            file: Some(path.to_path_buf()),
            trusted_keys: file.audit.trusted_keys,
            ..AuditConfig::default()
        };
        if let Some(secs) = file.audit.checkpoint_secs {
            let v = *secs.get_ref();
            if !(v.is_finite() && (0.1..=86_400.0).contains(&v)) {
                bail!(
                    "{}, line {}: [audit] checkpoint_secs must be a number of seconds between \
                     0.1 and 86400, got {v}",
                    path.display(),
                    line_of(text, &secs.span())
                );
            }
            audit.checkpoint_every = Duration::from_secs_f64(v);
        }
        audit.key = file.audit.key.map(|k| {
            if k.contains("${secret:") || Path::new(&k).is_absolute() {
                k
            } else {
                let base = path.parent().unwrap_or_else(|| Path::new("."));
                base.join(k).display().to_string()
            }
        });
        let config = Self {
            audit,
            jwt,
            http: file.http,
            console_operators: file.console.operators,
            shell_sandbox,
            mcp_sandbox,
            blobs_url: file.blobs.url.map(|u| match u.strip_prefix("file:") {
                Some(p) if !p.starts_with('/') && !p.is_empty() => {
                    let base = path.parent().unwrap_or_else(|| Path::new("."));
                    format!("file:{}", base.join(p).display())
                }
                _ => u,
            }),
            access: file.access.map(|mut a| {
                // `[access]` holding only conditions judges calls; it does not close every
                // tool to every key, as an `[access]` without any rule would.
                if !a.conditions.is_empty()
                    && a.principals.is_empty()
                    && a.groups.is_empty()
                    && a.default.is_none()
                {
                    a.default = Some(ravi_agents::access::AccessRule::tools(["*"]));
                }
                a
            }),
            conditions,
            secret_grants: Arc::new(ravi_agents::secrets::SecretGrants::new(file.secrets)),
            store_url,
            workspace,
            builtin,
            policy,
            risk: file.risk,
            hitl: file.hitl,
            hitl_timeout_secs,
            idempotent: file.idempotent,
            mcp,
            lines: Lines {
                call_timeout_secs: lines_policy.0,
                approval_timeout_secs: lines_policy.1,
                total_timeout_secs: lines_policy.2,
                mcp_names,
            },
        };
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
        let l = &self.lines;
        let mut b = ChainPolicy::builder();
        if let Some(n) = p.max_tool_calls {
            b = b.max_tool_calls(n);
        }
        if let Some(s) = p.call_timeout_secs {
            b = b.call_timeout(secs(file, l.call_timeout_secs, "call_timeout_secs", s)?);
        }
        if let Some(s) = p.total_timeout_secs {
            b = b.total_timeout(secs(file, l.total_timeout_secs, "total_timeout_secs", s)?);
        }
        if let Some(s) = p.approval_timeout_secs {
            b = b.approval_timeout(secs(
                file,
                l.approval_timeout_secs,
                "approval_timeout_secs",
                s,
            )?);
        }
        if let Some(n) = p.max_inline_result_bytes {
            b = b.max_inline_result_bytes(n);
        }
        if let Some(r) = p.max_risk_unapproved {
            b = b.max_risk_unapproved(r);
        }
        b.build().map_err(|e| {
            // The only cross-key rule is approval < call timeout: point at whichever is set.
            let line = l.approval_timeout_secs.or(l.call_timeout_secs);
            anyhow::anyhow!(
                "{}{}: [policy] approval_timeout_secs / call_timeout_secs: {e}",
                file.display(),
                at(line)
            )
        })
    }

    /// The file's `[[mcp]]` servers followed by the ones given with `--mcp`/`--mcp-url`;
    /// a name used by both is an error naming the file's line (a server cannot be attached
    /// twice under one name, and silently preferring one would hide the typo).
    pub fn mcp_with_flags(
        &self,
        file: Option<&Path>,
        flags: Vec<McpServerSpec>,
    ) -> anyhow::Result<Vec<McpServerSpec>> {
        let mut all = self.mcp.clone();
        for spec in flags {
            if let Some(i) = all.iter().position(|s| s.name == spec.name) {
                let line = self.lines.mcp_names.get(i).copied();
                bail!(
                    "MCP server name `{}` is given by a flag and by {}{}; rename one of them",
                    spec.name,
                    file.map_or_else(|| "the config file".to_owned(), |f| f.display().to_string()),
                    at(line)
                );
            }
            all.push(spec);
        }
        Ok(all)
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

    /// The `[risk]` and `[hitl]` overrides by tool name.
    fn overrides(&self) -> BTreeMap<String, ToolOverride> {
        let mut map: BTreeMap<String, ToolOverride> = BTreeMap::new();
        for (name, risk) in &self.risk {
            map.entry(name.clone()).or_default().risk = Some(*risk);
        }
        for (name, mode) in &self.hitl {
            map.entry(name.clone()).or_default().hitl = Some(*mode);
        }
        for (name, secs) in &self.hitl_timeout_secs {
            map.entry(name.clone()).or_default().hitl_timeout =
                Some(std::time::Duration::from_secs_f64(*secs));
        }
        for (name, idempotent) in &self.idempotent {
            map.entry(name.clone()).or_default().idempotent = Some(*idempotent);
        }
        map
    }

    /// Applies the `[risk]` and `[hitl]` overrides to the tools they name.
    pub fn apply_risk(&self, tools: Vec<AnyTool>) -> Vec<AnyTool> {
        apply_overrides(&self.overrides(), tools)
    }

    /// The `[risk]` and `[hitl]` overrides as a function over a tool list, for views that
    /// rebuild their tool list later (an attached server's tools follow its
    /// `tools/list_changed`).
    pub fn risk_overrides(&self) -> Arc<dyn Fn(Vec<AnyTool>) -> Vec<AnyTool> + Send + Sync> {
        let map = self.overrides();
        Arc::new(move |tools| apply_overrides(&map, tools))
    }

    /// Names in `[risk]` or `[hitl]` that match none of `names` (a typo the operator should
    /// hear about).
    pub fn unknown_risk_names(&self, names: &[String]) -> Vec<String> {
        self.overrides()
            .into_keys()
            .filter(|k| !names.contains(k))
            .collect()
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

    /// The message of loading `text`, which must fail.
    fn load_err(text: &str) -> String {
        let (_d, path) = write(text);
        format!("{:#}", RaviConfig::load(&path).unwrap_err())
    }

    fn assert_names(err: &str, line: usize, needles: &[&str]) {
        assert!(err.contains("ravi.toml"), "no file in: {err}");
        assert!(
            err.contains(&format!("line {line}")),
            "no line {line} in: {err}"
        );
        for n in needles {
            assert!(err.contains(n), "no `{n}` in: {err}");
        }
    }

    const FS: &str = "[[mcp]]\nname = \"fs\"\ntransport = \"stdio\"\ncommand = \"npx\"\n";

    #[test]
    fn misspelt_mcp_keys_are_refused_with_file_line_and_key() {
        let err = load_err(&format!("{FS}comand = \"x\"\n"));
        assert_names(&err, 5, &["comand"]);
        let err = load_err(
            "[[mcp]]\nname = \"d\"\ntransport = \"http\"\nurl = \"http://h/mcp\"\nbaerer = \"t\"\n",
        );
        assert_names(&err, 5, &["baerer"]);
        let err = load_err(&format!("{FS}[mcp.risk]\nwrite = \"explosive\"\n"));
        assert_names(&err, 6, &["explosive"]);
    }

    #[test]
    fn mcp_entries_are_checked_across_keys() {
        let err = load_err("[[mcp]]\nname = \"fs\"\ntransport = \"stdio\"\nargs = [\"a\"]\n");
        assert_names(&err, 3, &["`fs`", "needs `command`"]);
        let err = load_err(&format!("{FS}url = \"http://h/mcp\"\n"));
        assert_names(&err, 5, &["`url`", "transport = \"stdio\""]);
        let err = load_err("[[mcp]]\nname = \"d\"\ntransport = \"http\"\ncommand = \"x\"\n");
        assert_names(&err, 4, &["`command`", "\"http\""]);
        let err = load_err("[[mcp]]\nname = \"d\"\ntransport = \"http\"\n\nurl = \"ftp://h\"\n");
        assert_names(&err, 5, &["ftp://h", "http://"]);
        let err = load_err("[[mcp]]\nname = \"d\"\ntransport = \"ws\"\nurl = \"http://h\"\n");
        assert_names(&err, 3, &["\"ws\"", "\"stdio\", \"http\" or \"sse\""]);
        let err = load_err("[[mcp]]\nname = \"d\"\ntransport = \"sse\"\ncommand = \"x\"\n");
        assert_names(&err, 4, &["`command`", "\"sse\""]);
        let err = load_err(&format!("{FS}timeout_ms = 0\n"));
        assert_names(&err, 5, &["timeout_ms"]);
    }

    #[test]
    fn server_names_follow_the_flag_rule_and_are_unique() {
        let err = load_err("\n[[mcp]]\nname = \"a__b\"\ntransport = \"stdio\"\ncommand = \"x\"\n");
        assert_names(&err, 3, &["a__b", "without `__`"]);
        let err =
            load_err("[[mcp]]\nname = \"has space\"\ntransport = \"stdio\"\ncommand = \"x\"\n");
        assert_names(&err, 2, &["has space"]);
        let err = load_err(&format!("{FS}\n{FS}"));
        assert_names(&err, 7, &["`fs`", "line 2"]);
        // The same rule as `--mcp`:
        let flag = McpServerSpec::parse_cli("a__b=x", false)
            .unwrap_err()
            .to_string();
        assert!(flag.contains("without `__`"), "{flag}");
    }

    #[test]
    fn a_name_in_the_file_and_in_a_flag_is_refused_naming_the_line() {
        let (_d, path) = write(&format!("builtin = [\"calculator\"]\n\n{FS}"));
        let c = RaviConfig::load(&path).unwrap();
        let flag = McpServerSpec::parse_cli("fs=other-server", false).unwrap();
        let err = c
            .mcp_with_flags(Some(&path), vec![flag])
            .unwrap_err()
            .to_string();
        assert_names(&err, 4, &["`fs`", "flag"]);
        let other = McpServerSpec::parse_cli("web=http://127.0.0.1:9/mcp", true).unwrap();
        let all = c.mcp_with_flags(Some(&path), vec![other]).unwrap();
        let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["fs", "web"]);
    }

    #[test]
    fn semantic_errors_name_the_line() {
        let err = load_err("workspace = \".\"\nbuiltin = [\n  \"calculator\",\n  \"rm_rf\",\n]\n");
        assert_names(&err, 4, &["rm_rf", "calculator"]);
        let err = load_err("[policy]\nmax_tool_calls = 3\ncall_timeout_secs = -1\n");
        assert_names(&err, 3, &["call_timeout_secs", "-1"]);
        let err = load_err("[policy]\ntotal_timeout_secs = 1e9\n");
        assert_names(&err, 2, &["total_timeout_secs"]);
        let err = load_err("[policy]\ncall_timeout_secs = 5\n\napproval_timeout_secs = 9\n");
        assert_names(&err, 4, &["approval_timeout_secs", "shorter"]);
        // Only the approval timeout is set, and it exceeds the default call timeout.
        let err = load_err("[policy]\napproval_timeout_secs = 4000\n");
        assert_names(&err, 2, &["approval_timeout_secs"]);
        let err = load_err("[hitl_timeout_secs]\nshell = 5\nwrite_file = 0\n");
        assert_names(&err, 3, &["hitl_timeout_secs", "write_file", "positive"]);
    }

    #[test]
    fn hitl_timeouts_become_overrides() {
        use ravi_agents::TypedTool as _;
        let (_d, path) = write("[hitl_timeout_secs]\ncalculator = 2.5\n");
        let c = RaviConfig::load(&path).unwrap();
        let tools = c.apply_risk(vec![ravi_capabilities::tools::Calculator.into_any()]);
        let t = tools[0].as_function().unwrap();
        assert_eq!(t.hitl_timeout(), Some(Duration::from_millis(2500)));
    }

    #[test]
    fn idempotence_and_the_store_come_from_the_file() {
        use ravi_agents::TypedTool as _;
        let (d, path) =
            write("[idempotent]\ncalculator = true\n[store]\nurl = \"sqlite:st/r.db\"\n");
        let c = RaviConfig::load(&path).unwrap();
        let tools = c.apply_risk(vec![ravi_capabilities::tools::Calculator.into_any()]);
        assert!(tools[0].as_function().unwrap().idempotent());
        let want = format!("sqlite:{}", d.path().join("st/r.db").display());
        assert_eq!(c.store_url.as_deref(), Some(want.as_str()));
        let err = format!(
            "{:#}",
            RaviConfig::load(&write("[store]\nurll = 1\n").1).unwrap_err()
        );
        assert!(err.contains("unknown field `urll`"), "{err}");
    }

    #[test]
    fn http_entries_carry_bearer_headers_and_risk() {
        let (_d, path) = write(
            "[[mcp]]\nname = \"docs\"\ntransport = \"http\"\nurl = \"http://127.0.0.1:3001/mcp\"\n\
             bearer = \"tok\"\ntimeout_ms = 5000\n[mcp.headers]\nX-Tenant = \"acme\"\n[mcp.risk]\nsearch = \"safe\"\n",
        );
        let c = RaviConfig::load(&path).unwrap();
        let want = McpServerSpec::http("docs", "http://127.0.0.1:3001/mcp")
            .with_bearer("tok")
            .with_header("X-Tenant", "acme")
            .with_risk("search", ToolRisk::Safe)
            .with_timeout(Duration::from_secs(5));
        assert_eq!(c.mcp, [want]);
        let err = load_err(
            "[[mcp]]\nname = \"d\"\ntransport = \"http\"\nurl = \"http://h/mcp\"\n[mcp.headers]\n\"bad header\" = \"v\"\n",
        );
        assert_names(&err, 5, &["bad header"]);
    }
}
