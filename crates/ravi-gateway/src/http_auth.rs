//! Authentication of the HTTP transport: every request to the MCP endpoint presents a bearer
//! token an [`Authenticator`] accepts, or gets the RFC 6750 answer (`401` with a
//! `WWW-Authenticate` challenge, `403 insufficient_scope`, `503` when the token cannot be
//! checked now) — MCP never sees the request. The body is a JSON-RPC error response
//! (`"id": null`), since that is the one body MCP clients read at any status: the SDKs surface
//! its message (which names the status and what to do about the token) instead of a bare
//! "Server returned an error response". A resource server also publishes its RFC 9728 metadata
//! at `/.well-known/oauth-protected-resource`, which the challenge points to, so an MCP client
//! can discover where to get a token.

use std::sync::Arc;

use ravi_agents::access::{AuthFailureKind, Authenticator};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// RFC 9728 protected-resource metadata: which resource this server is and which
/// authorization servers issue tokens for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ResourceMetadata {
    /// The resource identifier (this server's MCP endpoint URL).
    pub resource: String,
    /// Where clients get tokens.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub authorization_servers: Vec<String>,
    /// The scopes the resource understands.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes_supported: Vec<String>,
    /// How tokens are sent: always `header`.
    pub bearer_methods_supported: Vec<String>,
    /// A human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_name: Option<String>,
}

impl ResourceMetadata {
    /// The metadata of `resource`, with no authorization server named yet.
    pub fn new(resource: impl Into<String>) -> Self {
        Self {
            resource: resource.into(),
            authorization_servers: Vec::new(),
            scopes_supported: Vec::new(),
            bearer_methods_supported: vec!["header".into()],
            resource_name: Some("Ravi MCP gateway".into()),
        }
    }

    /// The same metadata naming `servers` as where tokens come from.
    #[must_use]
    pub fn with_authorization_servers(mut self, servers: Vec<String>) -> Self {
        self.authorization_servers = servers;
        self
    }

    /// The same metadata announcing `scopes`.
    #[must_use]
    pub fn with_scopes(mut self, scopes: Vec<String>) -> Self {
        self.scopes_supported = scopes;
        self
    }

    /// The resource URL split into its origin (`https://host`) and path (`/mcp`, empty at
    /// the root).
    fn split(&self) -> (&str, &str) {
        let after_scheme = self.resource.find("://").map_or(0, |i| i + 3);
        let path_at = self.resource[after_scheme..]
            .find('/')
            .map_or(self.resource.len(), |i| after_scheme + i);
        let (origin, path) = self.resource.split_at(path_at);
        (origin, path.trim_end_matches('/'))
    }

    /// Where the metadata is served, as RFC 9728 §3.1 builds it: the well-known path inserted
    /// between the resource's host and its path.
    pub fn url(&self) -> String {
        let (origin, path) = self.split();
        format!("{origin}{WELL_KNOWN}{path}")
    }

    /// The paths it is served at: the RFC 9728 one and the bare well-known path (which some
    /// clients try first).
    pub(crate) fn paths(&self) -> Vec<String> {
        let (_, path) = self.split();
        let mut paths = vec![format!("{WELL_KNOWN}{path}")];
        if !path.is_empty() {
            paths.push(WELL_KNOWN.to_owned());
        }
        paths
    }
}

/// The well-known path of RFC 9728 metadata.
pub const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// What the authentication layer needs per request.
#[derive(Clone)]
pub(crate) struct AuthState {
    pub(crate) auth: Arc<dyn Authenticator>,
    /// The metadata URL the challenge names, if the server publishes metadata.
    pub(crate) metadata_url: Option<String>,
    /// Where refused requests are counted.
    pub(crate) metrics: Option<Arc<crate::GatewayMetrics>>,
}

/// Authenticates a request to the MCP endpoint before MCP sees it: the caller's
/// [`Grant`](ravi_agents::access::Grant) for an accepted token, which travels with the
/// request; the RFC 6750 answer for a missing or refused one.
pub(crate) async fn authenticate(
    state: &AuthState,
    headers: &http::HeaderMap,
) -> Result<Arc<ravi_agents::access::Grant>, axum::response::Response> {
    let bearer = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, token) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then_some(token)
        })
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_owned);
    let failure = match state.auth.authenticate(bearer.as_deref()).await {
        Ok(grant) => return Ok(grant),
        Err(failure) => failure,
    };
    let mut challenge = String::from("Bearer realm=\"ravi\"");
    let status = match &failure.kind {
        AuthFailureKind::InsufficientScope { scope } => {
            challenge.push_str(&format!(
                ", error=\"insufficient_scope\", scope=\"{}\"",
                quoted(scope)
            ));
            http::StatusCode::FORBIDDEN
        }
        AuthFailureKind::Unavailable => http::StatusCode::SERVICE_UNAVAILABLE,
        // RFC 6750 §3.1: a request with no token gets no error code.
        _ if bearer.is_none() => http::StatusCode::UNAUTHORIZED,
        _ => {
            challenge.push_str(&format!(
                ", error=\"invalid_token\", error_description=\"{}\"",
                quoted(&failure.message)
            ));
            http::StatusCode::UNAUTHORIZED
        }
    };
    if let Some(url) = &state.metadata_url {
        challenge.push_str(&format!(", resource_metadata=\"{}\"", quoted(url)));
    }
    let error = match status {
        http::StatusCode::FORBIDDEN => "insufficient_scope",
        http::StatusCode::SERVICE_UNAVAILABLE => "temporarily_unavailable",
        _ => "unauthorized",
    };
    if let Some(m) = &state.metrics {
        m.record_auth_failure(match status {
            http::StatusCode::FORBIDDEN => "insufficient_scope",
            http::StatusCode::SERVICE_UNAVAILABLE => "unavailable",
            _ if bearer.is_none() => "missing_token",
            _ => "invalid_token",
        });
    }
    let body = refusal_body(status, error, &failure.message).to_string();
    let mut response = axum::response::Response::new(axum::body::Body::from(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    if status == http::StatusCode::SERVICE_UNAVAILABLE {
        headers.insert(
            http::header::RETRY_AFTER,
            http::HeaderValue::from_static("5"),
        );
    } else if let Ok(value) = http::HeaderValue::from_str(&challenge) {
        headers.insert(http::header::WWW_AUTHENTICATE, value);
    }
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    // The refused request's body is never read, so the connection cannot carry another
    // request: say so, or a client that pools connections (httpx, under every Python SDK)
    // may send its next request on one the server is closing and read "disconnected".
    headers.insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
    Err(response)
}

/// The JSON-RPC error code of a request the gateway refused before MCP saw it: the token was
/// missing or refused (`401`), lacked a scope (`403`), or could not be checked (`503`).
pub const AUTH_ERROR_CODE: i64 = -32001;

/// The body of an authentication refusal: a JSON-RPC error response with `"id": null` (the
/// request was refused before its id was read), whose message says the HTTP status and why
/// (`"HTTP 401 Unauthorized: the API key is not valid (unknown or revoked)"`), and whose
/// `data` carries the status and the RFC 6750 error code for programs.
fn refusal_body(status: http::StatusCode, error: &str, message: &str) -> serde_json::Value {
    json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {
            "code": AUTH_ERROR_CODE,
            "message": format!(
                "HTTP {} {}: {message}",
                status.as_u16(),
                status.canonical_reason().unwrap_or("")
            ),
            "data": {"status": status.as_u16(), "error": error},
        },
    })
}

/// `text` made safe inside a quoted header parameter (no quotes, backslashes or controls).
fn quoted(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '"' | '\\' => '\'',
            c if c.is_control() || !c.is_ascii() => ' ',
            c => c,
        })
        .collect()
}

/// Serves the metadata document.
pub(crate) async fn serve_metadata(
    axum::extract::State(metadata): axum::extract::State<Arc<ResourceMetadata>>,
) -> axum::response::Response {
    let body = serde_json::to_string(&*metadata).unwrap_or_else(|_| "{}".into());
    let mut response = axum::response::Response::new(axum::body::Body::from(body));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_urls_follow_rfc_9728() {
        let m = ResourceMetadata::new("https://tools.example.com/mcp");
        assert_eq!(
            m.url(),
            "https://tools.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            m.paths(),
            [
                "/.well-known/oauth-protected-resource/mcp",
                "/.well-known/oauth-protected-resource"
            ]
        );
        let root = ResourceMetadata::new("http://127.0.0.1:8765/");
        assert_eq!(
            root.url(),
            "http://127.0.0.1:8765/.well-known/oauth-protected-resource"
        );
        assert_eq!(root.paths(), ["/.well-known/oauth-protected-resource"]);
        assert_eq!(quoted("a \"b\"\n"), "a 'b' ");
    }

    #[test]
    fn refusals_are_json_rpc_errors() {
        ravi_test_support::Goldens::of_crate(env!("CARGO_MANIFEST_DIR")).check(
            "auth_refusal",
            &refusal_body(
                http::StatusCode::UNAUTHORIZED,
                "unauthorized",
                "the API key is not valid (unknown or revoked)",
            ),
        );
        let forbidden = refusal_body(
            http::StatusCode::FORBIDDEN,
            "insufficient_scope",
            "the token lacks the scope `mcp`",
        );
        assert_eq!(
            forbidden["error"]["message"],
            "HTTP 403 Forbidden: the token lacks the scope `mcp`"
        );
        assert_eq!(forbidden["id"], serde_json::Value::Null);
    }
}
