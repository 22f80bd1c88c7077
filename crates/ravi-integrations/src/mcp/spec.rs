//! How to reach an MCP server: a command to spawn (stdio), a URL (streamable HTTP, falling back
//! to the legacy HTTP+SSE transport), or a URL of a legacy HTTP+SSE server.

use std::collections::BTreeMap;
use std::time::Duration;

use ravi_kernel::ToolRisk;
use serde::{Deserialize, Serialize};

use super::error::McpError;

/// The transport part of a server specification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "transport", rename_all = "snake_case")]
#[non_exhaustive]
pub enum McpTransportSpec {
    /// Spawn `command args…` and speak JSON-RPC over its stdin/stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        #[serde(default)]
        args: Vec<String>,
        /// Extra environment variables.
        #[serde(default)]
        env: BTreeMap<String, String>,
    },
    /// Connect to a streamable HTTP endpoint; a server that refuses it is tried with the
    /// legacy HTTP+SSE transport at the same URL, as the MCP specification's
    /// backwards-compatibility section describes.
    Http {
        /// The endpoint, e.g. `http://127.0.0.1:3001/mcp`.
        url: String,
        /// A bearer token sent as `Authorization: Bearer …`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bearer: Option<String>,
        /// Extra headers sent with every request.
        #[serde(default)]
        headers: BTreeMap<String, String>,
    },
    /// Connect with the legacy HTTP+SSE transport (protocol 2024-11-05) only: `GET url` opens
    /// the event stream, whose `endpoint` event says where to post (`sse+http://…` on the
    /// command line, `transport = "sse"` in ravi.toml).
    Sse {
        /// The event-stream URL, e.g. `http://127.0.0.1:3001/sse`.
        url: String,
        /// A bearer token sent as `Authorization: Bearer …`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bearer: Option<String>,
        /// Extra headers sent with every request.
        #[serde(default)]
        headers: BTreeMap<String, String>,
    },
}

/// One upstream MCP server: its name (the tool-name prefix), how to reach it, and per-tool
/// settings the operator configured.
///
/// Its `env` values, `bearer` and header values may name secrets instead of holding them:
/// `${secret:NAME}` is replaced when the client connects, from the environment variable `NAME`
/// or the file `NAME` in `$RAVI_SECRETS_DIR` (or systemd's `$CREDENTIALS_DIRECTORY`). The spec
/// keeps the reference, and whatever the server sends back has the values redacted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct McpServerSpec {
    /// The server's name; tools appear as `name__tool`.
    pub name: String,
    /// How to reach it.
    #[serde(flatten)]
    pub transport: McpTransportSpec,
    /// Risk overrides by upstream tool name; they win over the server's annotations.
    #[serde(default)]
    pub risk: BTreeMap<String, ToolRisk>,
    /// Per-call timeout in milliseconds (default 60 000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// The upstream tools served (name patterns, `*` and `?`); empty: all of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// Upstream tools never served, even when `allow` matches them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
    /// New names by upstream tool name: the part after `server__` (`{search = "find"}` serves
    /// `search` as `server__find`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rename: BTreeMap<String, String>,
    /// How a stdio server's process is confined by the kernel (ravi.toml's
    /// `[sandbox.mcp.NAME]`): by default read-only on the system and its own program, read-write
    /// in the folders its arguments name and a private `TMPDIR`, no network. Not used for
    /// HTTP servers.
    #[serde(default, skip_serializing_if = "is_default")]
    pub sandbox: ravi_confine::Settings,
    /// OAuth 2.1 for a streamable HTTP server that asks for it (ravi.toml's
    /// `[mcp.servers.NAME.oauth]`): when the server answers 401, Ravi discovers its
    /// authorization server (RFC 9728, RFC 8414), registers itself or uses the configured
    /// client, takes the user through the authorization (PKCE), and sends the token it gets —
    /// refreshed when it expires. Not used for stdio servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<OAuthSettings>,
}

/// How Ravi authorizes itself with an MCP server's OAuth 2.1 authorization server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct OAuthSettings {
    /// A client id registered beforehand. Without one, Ravi names its client metadata document
    /// (`client_metadata_url`, CIMD) when the authorization server accepts those, else
    /// registers itself (dynamic client registration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// The secret of `client_id`, when it has one (may be `${secret:NAME}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// The URL of Ravi's client metadata document (CIMD), when published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_metadata_url: Option<String>,
    /// Scopes to ask for; empty: what the server's challenge or metadata names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// Where the authorization server sends the browser back (default
    /// `http://127.0.0.1:8976/callback`, where Ravi listens while it waits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_uri: Option<String>,
}

/// Where the authorization server sends the browser back, unless configured.
pub const DEFAULT_REDIRECT_URI: &str = "http://127.0.0.1:8976/callback";

impl OAuthSettings {
    /// Settings that register Ravi with the authorization server (or use CIMD) and ask for
    /// what the server names.
    pub fn new() -> Self {
        Self::default()
    }

    /// Uses a client registered beforehand.
    #[must_use]
    pub fn with_client(mut self, id: impl Into<String>, secret: Option<String>) -> Self {
        self.client_id = Some(id.into());
        self.client_secret = secret;
        self
    }

    /// Names Ravi's client metadata document (CIMD).
    #[must_use]
    pub fn with_client_metadata_url(mut self, url: impl Into<String>) -> Self {
        self.client_metadata_url = Some(url.into());
        self
    }

    /// Sets where the browser is sent back.
    #[must_use]
    pub fn with_redirect_uri(mut self, uri: impl Into<String>) -> Self {
        self.redirect_uri = Some(uri.into());
        self
    }
}

fn is_default(s: &ravi_confine::Settings) -> bool {
    *s == ravi_confine::Settings::default()
}

/// The default per-call timeout.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

fn valid_server_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && !name.contains("__")
}

/// The rule for server names, as told to whoever wrote a bad one.
pub const SERVER_NAME_RULE: &str = "1-32 characters of [A-Za-z0-9_-] without `__`";

impl McpServerSpec {
    /// A stdio server.
    pub fn stdio(name: impl Into<String>, command: impl Into<String>, args: Vec<String>) -> Self {
        Self {
            name: name.into(),
            transport: McpTransportSpec::Stdio {
                command: command.into(),
                args,
                env: BTreeMap::new(),
            },
            risk: BTreeMap::new(),
            timeout_ms: None,
            allow: Vec::new(),
            deny: Vec::new(),
            rename: BTreeMap::new(),
            sandbox: ravi_confine::Settings::default(),
            oauth: None,
        }
    }

    /// A streamable HTTP server.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            transport: McpTransportSpec::Http {
                url: url.into(),
                bearer: None,
                headers: BTreeMap::new(),
            },
            risk: BTreeMap::new(),
            timeout_ms: None,
            allow: Vec::new(),
            deny: Vec::new(),
            rename: BTreeMap::new(),
            sandbox: ravi_confine::Settings::default(),
            oauth: None,
        }
    }

    /// A legacy HTTP+SSE server (its event-stream URL).
    pub fn sse(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            transport: McpTransportSpec::Sse {
                url: url.into(),
                bearer: None,
                headers: BTreeMap::new(),
            },
            risk: BTreeMap::new(),
            timeout_ms: None,
            allow: Vec::new(),
            deny: Vec::new(),
            rename: BTreeMap::new(),
            sandbox: ravi_confine::Settings::default(),
            oauth: None,
        }
    }

    /// Sets how a stdio server is confined (`[sandbox.mcp.NAME]`; ignored for HTTP).
    #[must_use]
    pub fn with_sandbox(mut self, sandbox: ravi_confine::Settings) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// Sets an environment variable for a stdio server (ignored for HTTP).
    #[must_use]
    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        if let McpTransportSpec::Stdio { env, .. } = &mut self.transport {
            env.insert(key.into(), value.into());
        }
        self
    }

    /// Authorizes with OAuth 2.1 when the (streamable HTTP) server asks for it.
    #[must_use]
    pub fn with_oauth(mut self, oauth: OAuthSettings) -> Self {
        self.oauth = Some(oauth);
        self
    }

    /// Sets the bearer token of an HTTP server (ignored for stdio).
    #[must_use]
    pub fn with_bearer(mut self, token: impl Into<String>) -> Self {
        if let McpTransportSpec::Http { bearer, .. } | McpTransportSpec::Sse { bearer, .. } =
            &mut self.transport
        {
            *bearer = Some(token.into());
        }
        self
    }

    /// Sets a header sent to an HTTP server (ignored for stdio).
    #[must_use]
    pub fn with_header(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        if let McpTransportSpec::Http { headers, .. } | McpTransportSpec::Sse { headers, .. } =
            &mut self.transport
        {
            headers.insert(key.into(), value.into());
        }
        self
    }

    /// Overrides the risk of one upstream tool.
    #[must_use]
    pub fn with_risk(mut self, tool: impl Into<String>, risk: ToolRisk) -> Self {
        self.risk.insert(tool.into(), risk);
        self
    }

    /// Serves only the upstream tools matching `patterns` (and not denied).
    #[must_use]
    pub fn with_allow<I, S>(mut self, patterns: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.allow = patterns.into_iter().map(Into::into).collect();
        self
    }

    /// Never serves the upstream tools matching `patterns`.
    #[must_use]
    pub fn with_deny<I, S>(mut self, patterns: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.deny = patterns.into_iter().map(Into::into).collect();
        self
    }

    /// Serves the upstream tool `tool` as `server__new_name`.
    #[must_use]
    pub fn with_rename(mut self, tool: impl Into<String>, new_name: impl Into<String>) -> Self {
        self.rename.insert(tool.into(), new_name.into());
        self
    }

    /// Whether the upstream tool `tool` is served (its `allow` and `deny` patterns).
    pub fn serves(&self, tool: &str) -> bool {
        let matches = |p: &String| ravi_agents::access::ToolPattern::new(p.as_str()).matches(tool);
        (self.allow.is_empty() || self.allow.iter().any(matches)) && !self.deny.iter().any(matches)
    }

    /// Sets the per-call timeout.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout_ms = Some(ravi_kernel::ms(timeout));
        self
    }

    /// The per-call timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout_ms
            .map_or(DEFAULT_CALL_TIMEOUT, Duration::from_millis)
    }

    /// Checks a server name: it prefixes every tool name (`name__tool`), so it must be
    /// [`SERVER_NAME_RULE`]; `__` would make the split back into server and tool ambiguous.
    /// The same rule holds for `--mcp`, `--mcp-url` and `ravi.toml`.
    pub fn check_name(name: &str) -> Result<(), String> {
        if valid_server_name(name) {
            Ok(())
        } else {
            Err(format!("server name `{name}` must be {SERVER_NAME_RULE}"))
        }
    }

    /// Checks the URL of an HTTP server: `http://…`, or `https://…` when built with TLS.
    pub fn check_url(url: &str) -> Result<(), String> {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!("URL `{url}` must start with http:// or https://"));
        }
        if url.starts_with("https://") && !cfg!(feature = "mcp-tls") {
            return Err(format!(
                "URL `{url}` needs TLS; build ravi-integrations with the `mcp-tls` feature"
            ));
        }
        Ok(())
    }

    /// Parses a command-line attachment: `NAME=COMMAND ARGS…` (split like a shell) for stdio,
    /// or, with `http = true`, `NAME=URL` (streamable HTTP, falling back to legacy SSE) or
    /// `NAME=sse+URL` (legacy SSE only).
    ///
    /// ```
    /// use ravi_integrations::mcp::{McpServerSpec, McpTransportSpec};
    /// let s = McpServerSpec::parse_cli("fs=npx -y '@modelcontextprotocol/server-filesystem' /tmp", false).unwrap();
    /// assert_eq!(s.name, "fs");
    /// let McpTransportSpec::Stdio { command, args, .. } = s.transport else { unreachable!() };
    /// assert_eq!((command.as_str(), args.len()), ("npx", 3));
    /// ```
    pub fn parse_cli(text: &str, http: bool) -> Result<Self, McpError> {
        let invalid = |reason: String| McpError::InvalidSpec {
            spec: text.to_owned(),
            reason,
        };
        let flag = if http { "--mcp-url" } else { "--mcp" };
        let Some((name, rest)) = text.split_once('=') else {
            return Err(invalid(format!(
                "expected NAME={} (e.g. {flag} {})",
                if http { "URL" } else { "COMMAND ARGS..." },
                if http {
                    "docs=http://127.0.0.1:3001/mcp"
                } else {
                    "'fs=npx @modelcontextprotocol/server-filesystem /tmp'"
                }
            )));
        };
        let name = name.trim();
        Self::check_name(name).map_err(invalid)?;
        let rest = rest.trim();
        if http {
            if let Some(url) = rest.strip_prefix("sse+") {
                Self::check_url(url).map_err(invalid)?;
                return Ok(Self::sse(name, url));
            }
            Self::check_url(rest).map_err(invalid)?;
            return Ok(Self::http(name, rest));
        }
        let words = shlex::split(rest)
            .ok_or_else(|| invalid("unbalanced quotes in the command".to_owned()))?;
        let mut words = words.into_iter();
        let Some(command) = words.next() else {
            return Err(invalid("the command is empty".to_owned()));
        };
        Ok(Self::stdio(name, command, words.collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stdio_and_http() {
        let s = McpServerSpec::parse_cli("e=node 'a b.js' stdio", false).unwrap();
        assert_eq!(
            s.transport,
            McpTransportSpec::Stdio {
                command: "node".into(),
                args: vec!["a b.js".into(), "stdio".into()],
                env: BTreeMap::new()
            }
        );
        let h = McpServerSpec::parse_cli("docs=http://127.0.0.1:9/mcp", true).unwrap();
        assert!(
            matches!(h.transport, McpTransportSpec::Http { ref url, .. } if url == "http://127.0.0.1:9/mcp")
        );
    }

    #[test]
    fn bad_specs_name_the_problem() {
        for (text, http, needle) in [
            ("nodash", false, "expected NAME=COMMAND"),
            ("a__b=x", false, "server name `a__b`"),
            ("x=", false, "command is empty"),
            ("x='unterminated", false, "unbalanced quotes"),
            ("x=ftp://h", true, "must start with http://"),
        ] {
            let err = McpServerSpec::parse_cli(text, http)
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{text}: {err}");
            assert!(err.contains(text), "{text}: {err}");
        }
    }

    #[test]
    fn spec_json_is_stable() {
        let s = McpServerSpec::http("d", "http://h/mcp")
            .with_bearer("t")
            .with_risk("rm", ToolRisk::Critical);
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"name": "d", "transport": "http", "url": "http://h/mcp",
                "bearer": "t", "headers": {}, "risk": {"rm": "critical"}})
        );
        let back: McpServerSpec = serde_json::from_value(v).unwrap();
        assert_eq!(back, s);
    }
}
