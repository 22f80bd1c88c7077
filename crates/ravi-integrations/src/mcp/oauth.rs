//! OAuth 2.1 for a streamable HTTP upstream that asks for it.
//!
//! When the server answers 401 with its challenge, Ravi — through rmcp's OAuth client, which
//! the authorization conformance scenarios check — reads the protected-resource metadata the
//! challenge names (RFC 9728) and the authorization server's metadata (RFC 8414, or OpenID
//! discovery), picks the client (a pre-registered one from [`OAuthSettings`], a client metadata
//! document URL, or dynamic registration), and builds the authorization URL with PKCE, the
//! `resource` indicator and the scopes the challenge or metadata name. An [`Authorize`] takes
//! the user through it and returns where the authorization server redirected; the code is
//! exchanged for tokens, checked against the issuer (RFC 9207), and the access token goes on
//! every request — refreshed when it expires.
//!
//! The [`Authorize`] decides how the user is involved: [`BrowserAuthorize`] prints the URL and
//! waits on the redirect URI's loopback port for the browser to come back; [`HeadlessAuthorize`]
//! follows the URL without a browser, for authorization servers that approve without asking a
//! person (test setups, the conformance suite's).

use std::sync::Arc;

use async_trait::async_trait;
use rmcp::transport::auth::{
    AuthClient, AuthError, AuthorizationCallback, AuthorizationManager, AuthorizationRequest,
    CredentialStore, OAuthState, StoredCredentials,
};

use super::spec::{DEFAULT_REDIRECT_URI, OAuthSettings};

/// Takes the user through an OAuth authorization: given the authorization URL, returns the URL
/// the authorization server sent the browser back to (the redirect URI with `code`, `state`
/// and perhaps `iss`).
#[async_trait]
pub trait Authorize: Send + Sync + std::fmt::Debug {
    /// Authorizes Ravi with server `server` at `url`; the answer goes to `redirect_uri`.
    async fn authorize(
        &self,
        server: &str,
        url: &str,
        redirect_uri: &str,
    ) -> Result<String, String>;
}

/// Follows the authorization URL without a browser and takes the redirect it answers with:
/// for an authorization server that approves without asking a person.
#[derive(Debug, Clone, Copy, Default)]
pub struct HeadlessAuthorize;

#[async_trait]
impl Authorize for HeadlessAuthorize {
    async fn authorize(&self, server: &str, url: &str, _redirect: &str) -> Result<String, String> {
        let http = reqwest_mcp::Client::builder()
            .redirect(reqwest_mcp::redirect::Policy::none())
            .build()
            .map_err(|e| e.to_string())?;
        let response =
            http.get(url).send().await.map_err(|e| {
                format!("{server}: the authorization URL could not be fetched: {e}")
            })?;
        response
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .ok_or_else(|| {
                format!(
                    "{server}: the authorization server did not redirect back (HTTP {}): it \
                     wants a person to approve; use a browser",
                    response.status()
                )
            })
    }
}

/// Prints the authorization URL for the user to open, and waits — at most 5 minutes — on the
/// redirect URI's loopback address for the browser to come back.
#[derive(Debug, Clone, Copy, Default)]
pub struct BrowserAuthorize;

#[async_trait]
impl Authorize for BrowserAuthorize {
    async fn authorize(&self, server: &str, url: &str, redirect: &str) -> Result<String, String> {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let target = reqwest_mcp::Url::parse(redirect)
            .map_err(|e| format!("redirect URI `{redirect}`: {e}"))?;
        let host = target.host_str().unwrap_or("127.0.0.1");
        if host != "127.0.0.1" && host != "localhost" && host != "[::1]" {
            return Err(format!(
                "redirect URI `{redirect}` is not a loopback address Ravi can listen on"
            ));
        }
        let port = target.port_or_known_default().unwrap_or(80);
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .map_err(|e| format!("listening for the authorization on 127.0.0.1:{port}: {e}"))?;
        eprintln!(
            "ravi: MCP server `{server}` asks for authorization; open this URL to approve:\n  {url}"
        );
        let wait = async {
            loop {
                let (mut socket, _) = listener.accept().await.map_err(|e| e.to_string())?;
                let mut head = vec![0u8; 8192];
                let n = socket.read(&mut head).await.map_err(|e| e.to_string())?;
                let head = String::from_utf8_lossy(&head[..n]).into_owned();
                let path = head
                    .lines()
                    .next()
                    .and_then(|l| l.split_whitespace().nth(1))
                    .unwrap_or("/")
                    .to_owned();
                if !path.starts_with(target.path()) {
                    let _ = socket.write_all(b"HTTP/1.1 404 Not Found\r\n\r\n").await;
                    continue;
                }
                let _ = socket
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nRavi is \
                          authorized; you can close this tab.\n",
                    )
                    .await;
                let mut back = target.clone();
                back.set_path("");
                return Ok(format!("{}{}", back.as_str().trim_end_matches('/'), path));
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(300), wait)
            .await
            .map_err(|_| "nobody approved the authorization within 5 minutes".to_owned())?
    }
}

/// Credentials kept in Ravi's durable store (`Store::put_credentials`), under an id naming the
/// server and its URL: a restarted process, or another replica, uses the tokens (refreshing
/// them) instead of asking the user again.
pub(crate) struct StoreCredentials {
    store: Arc<dyn ravi_kernel::Store>,
    id: String,
}

impl StoreCredentials {
    pub(crate) fn new(store: Arc<dyn ravi_kernel::Store>, server: &str, url: &str) -> Self {
        Self {
            store,
            id: Self::id(server, url),
        }
    }

    /// The store id of the credentials of server `server` at `url`.
    pub(crate) fn id(server: &str, url: &str) -> String {
        format!("mcp-oauth:{server}:{url}")
    }
}

fn store_err(e: impl std::fmt::Display) -> AuthError {
    AuthError::InternalError(format!("the credential store failed: {e}"))
}

#[async_trait]
impl CredentialStore for StoreCredentials {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        match self.store.credentials(&self.id).await.map_err(store_err)? {
            Some(v) => serde_json::from_value(v).map(Some).map_err(store_err),
            None => Ok(None),
        }
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let v = serde_json::to_value(&credentials).map_err(store_err)?;
        self.store
            .put_credentials(&self.id, &v)
            .await
            .map_err(store_err)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.store
            .delete_credentials(&self.id)
            .await
            .map_err(store_err)
    }
}

/// An authorization manager for the server at `url` with the credentials the store holds for
/// it, when it holds usable ones.
pub(crate) async fn from_store(
    url: &str,
    credentials: StoreCredentials,
) -> Result<Option<AuthorizationManager>, String> {
    let mut manager = AuthorizationManager::new(url)
        .await
        .map_err(|e| format!("OAuth setup: {e}"))?;
    manager.set_credential_store(credentials);
    match manager.initialize_from_store().await {
        Ok(true) => Ok(Some(manager)),
        Ok(false) => Ok(None),
        Err(e) => {
            tracing::warn!(url, error = %e, "stored OAuth credentials could not be used");
            Ok(None)
        }
    }
}

/// Authorizes Ravi with the server at `url`, which answered with `challenge`
/// (`WWW-Authenticate`); returns the authorization manager holding the tokens (saved in
/// `credentials` when given).
pub(crate) async fn authorize(
    server: &str,
    url: &str,
    challenge: Option<String>,
    settings: &OAuthSettings,
    authorizer: &Arc<dyn Authorize>,
    credentials: Option<StoreCredentials>,
) -> Result<AuthorizationManager, String> {
    let fail = |what: &str, e: &dyn std::fmt::Display| format!("OAuth {what}: {e}");
    let redirect = settings
        .redirect_uri
        .clone()
        .unwrap_or_else(|| DEFAULT_REDIRECT_URI.to_owned());
    let mut manager = AuthorizationManager::new(url)
        .await
        .map_err(|e| fail("setup", &e))?;
    if let Some(c) = credentials {
        manager.set_credential_store(c);
    }
    let mut state = OAuthState::Unauthorized(manager);
    let mut request = AuthorizationRequest::new(redirect.clone()).with_client_name("ravi");
    if let Some(id) = &settings.client_id {
        request = request.with_preregistered_client(id.clone());
        if let Some(secret) = &settings.client_secret {
            request = request.with_client_secret(secret.clone());
        }
    }
    if let Some(cimd) = &settings.client_metadata_url {
        request = request.with_client_metadata_url(cimd.clone());
    }
    if !settings.scopes.is_empty() {
        request = request.with_scopes(settings.scopes.iter().cloned());
    }
    if let Some(c) = challenge {
        request = request.with_challenge(c);
    }
    state
        .start_authorization(request)
        .await
        .map_err(|e| fail("discovery and registration", &e))?;
    let auth_url = state
        .get_authorization_url()
        .await
        .map_err(|e| fail("authorization URL", &e))?;
    let back = authorizer.authorize(server, &auth_url, &redirect).await?;
    let callback = AuthorizationCallback::from_redirect_url(&back)
        .map_err(|e| fail("authorization answer", &e))?;
    state
        .handle_callback_with_issuer(
            &callback.code,
            &callback.csrf_token,
            callback.issuer.as_deref(),
        )
        .await
        .map_err(|e| fail("token exchange", &e))?;
    state
        .into_authorization_manager()
        .ok_or_else(|| "OAuth: the authorization did not complete".to_owned())
}

/// The scopes a `WWW-Authenticate` challenge names (`scope="a b"`).
pub(crate) fn challenge_scopes(challenge: &str) -> Vec<String> {
    let Some(at) = challenge.find("scope=") else {
        return Vec::new();
    };
    let rest = &challenge[at + "scope=".len()..];
    let value = match rest.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next().unwrap_or_default(),
        None => rest.split([',', ' ']).next().unwrap_or_default(),
    };
    value.split_whitespace().map(str::to_owned).collect()
}

/// An HTTP client sending the tokens of `manager`.
pub(crate) fn client<C>(http: C, manager: AuthorizationManager) -> AuthClient<C> {
    AuthClient::new(http, manager)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_challenge_names_its_scopes() {
        assert_eq!(
            challenge_scopes(
                r#"Bearer error="insufficient_scope", scope="mcp:basic mcp:write", resource_metadata="https://x""#
            ),
            ["mcp:basic", "mcp:write"]
        );
        assert_eq!(
            challenge_scopes("Bearer scope=files:read, realm=x"),
            ["files:read"]
        );
        assert!(challenge_scopes(r#"Bearer realm="x""#).is_empty());
    }
}
