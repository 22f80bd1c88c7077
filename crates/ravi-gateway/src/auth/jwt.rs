//! JWT access tokens, checked as an OAuth 2.1 resource server does (what the MCP authorization
//! specification asks of a server): the signature against the issuer's published keys (a
//! JWKS URL or file, re-read when a token names a key it does not know, so the issuer can
//! rotate keys), `exp` and `nbf` with a small leeway, the issuer, and the audience (RFC 8707:
//! the token must be meant for this server). The token's claims become the caller's
//! [`Principal`]: `sub` its id, a configurable claim its groups, `scope`/`scp` its scopes.
//!
//! Only asymmetric algorithms are accepted (RS*, PS*, ES256/ES384, EdDSA), and a key is used
//! only for the algorithm family it is: a token whose header says `HS256` or `none`, or pairs an
//! RSA key with an EC algorithm, is refused before any signature check.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, JwkSet, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use ravi_agents::access::{AccessPolicy, AuthFailure, Authenticator, Grant, RateLimits};
use ravi_kernel::Principal;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ResourceMetadata;

/// How a gateway checks JWT access tokens (`[auth.jwt]` in ravi.toml).
///
/// ```toml
/// [auth.jwt]
/// issuer = "https://login.example.com/realms/team"
/// resource = "https://tools.example.com/mcp"      # this server; tokens' audience must name it
/// jwks_url = "https://login.example.com/realms/team/protocol/openid-connect/certs"
/// groups_claim = "groups"                         # or a dotted path: "realm_access.roles"
/// required_scopes = ["mcp:tools"]
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct JwtConfig {
    /// The issuer (`iss`) every token must carry, exactly.
    pub issuer: String,
    /// This server's resource identifier (RFC 8707 / RFC 9728), e.g.
    /// `https://tools.example.com/mcp`: served in the protected-resource metadata, and the
    /// audience tokens must name unless `audience` says otherwise.
    pub resource: String,
    /// The audiences accepted (`aud` must contain one; default: `resource`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audience: Vec<String>,
    /// Where the issuer publishes its keys (`https://…/jwks.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks_url: Option<String>,
    /// A JWKS file instead (re-read when it changes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks_file: Option<PathBuf>,
    /// The authorization servers clients should get tokens from, announced in the metadata
    /// (default: the issuer).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub authorization_servers: Vec<String>,
    /// The signature algorithms accepted (default: RS256, RS384, RS512, PS256, PS384, PS512,
    /// ES256, ES384, EdDSA). Symmetric ones (HS*) are refused.
    #[serde(default = "default_algorithms")]
    pub algorithms: Vec<Algorithm>,
    /// The claim listing the caller's groups (default `groups`); a dotted path reaches into
    /// objects (`realm_access.roles`).
    #[serde(default = "default_groups_claim")]
    pub groups_claim: String,
    /// Scopes every token must carry; a token without one gets `403 insufficient_scope`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_scopes: Vec<String>,
    /// The scopes announced in the metadata (default: `required_scopes`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes_supported: Vec<String>,
    /// Clock skew tolerated on `exp` and `nbf`, in seconds (default 30).
    #[serde(default = "default_leeway")]
    pub leeway_secs: u64,
    /// How long fetched keys are trusted before they are fetched again, in seconds (default
    /// 300).
    #[serde(default = "default_max_age")]
    pub jwks_max_age_secs: u64,
    /// The shortest time between two fetches prompted by tokens naming unknown keys, in
    /// seconds (default 10): a flood of forged `kid`s cannot make the gateway hammer the
    /// issuer.
    #[serde(default = "default_min_refresh")]
    pub jwks_min_refresh_secs: u64,
}

fn default_algorithms() -> Vec<Algorithm> {
    use Algorithm::*;
    vec![
        RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, EdDSA,
    ]
}
fn default_groups_claim() -> String {
    "groups".into()
}
fn default_leeway() -> u64 {
    30
}
fn default_max_age() -> u64 {
    300
}
fn default_min_refresh() -> u64 {
    10
}

impl JwtConfig {
    /// Tokens of `issuer`, for the resource `resource`, with keys from `jwks_url`.
    pub fn new(
        issuer: impl Into<String>,
        resource: impl Into<String>,
        jwks_url: impl Into<String>,
    ) -> Self {
        Self {
            issuer: issuer.into(),
            resource: resource.into(),
            audience: Vec::new(),
            jwks_url: Some(jwks_url.into()),
            jwks_file: None,
            authorization_servers: Vec::new(),
            algorithms: default_algorithms(),
            groups_claim: default_groups_claim(),
            required_scopes: Vec::new(),
            scopes_supported: Vec::new(),
            leeway_secs: default_leeway(),
            jwks_max_age_secs: default_max_age(),
            jwks_min_refresh_secs: default_min_refresh(),
        }
    }

    /// Checks what serde cannot: one key source, asymmetric algorithms, a usable resource.
    pub fn check(&self) -> Result<(), String> {
        match (&self.jwks_url, &self.jwks_file) {
            (Some(_), Some(_)) => {
                return Err("[auth.jwt]: give `jwks_url` or `jwks_file`, not both".into());
            }
            (None, None) => {
                return Err(
                    "[auth.jwt]: `jwks_url` (the issuer's published keys) or `jwks_file` is required"
                        .into(),
                );
            }
            _ => {}
        }
        if let Some(bad) = self.algorithms.iter().find(|a| family(**a).is_none()) {
            return Err(format!(
                "[auth.jwt] algorithms: {bad:?} is symmetric; a resource server verifies \
                 tokens with the issuer's public keys (RS256, ES256, EdDSA, …)"
            ));
        }
        if self.algorithms.is_empty() {
            return Err("[auth.jwt] algorithms: name at least one (e.g. RS256)".into());
        }
        if !(self.resource.starts_with("https://") || self.resource.starts_with("http://")) {
            return Err(format!(
                "[auth.jwt] resource: `{}` is not an absolute http(s) URL (expected this \
                 server's MCP endpoint, e.g. https://tools.example.com/mcp)",
                self.resource
            ));
        }
        if self.issuer.trim().is_empty() {
            return Err("[auth.jwt] issuer: cannot be empty".into());
        }
        Ok(())
    }

    /// The RFC 9728 protected-resource metadata this configuration announces.
    pub fn metadata(&self) -> ResourceMetadata {
        let servers = if self.authorization_servers.is_empty() {
            vec![self.issuer.clone()]
        } else {
            self.authorization_servers.clone()
        };
        let scopes = if self.scopes_supported.is_empty() {
            self.required_scopes.clone()
        } else {
            self.scopes_supported.clone()
        };
        ResourceMetadata::new(self.resource.clone())
            .with_authorization_servers(servers)
            .with_scopes(scopes)
    }
}

/// Why a JWT setup could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JwtError {
    /// The configuration is inconsistent.
    #[error("{0}")]
    Config(String),
    /// The keys could not be loaded.
    #[error("{0}")]
    Keys(String),
}

/// The key families a JWK can serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Rsa,
    EcP256,
    EcP384,
    Ed,
}

/// The family an algorithm needs (`None`: symmetric, never accepted).
fn family(alg: Algorithm) -> Option<Family> {
    use Algorithm::*;
    match alg {
        RS256 | RS384 | RS512 | PS256 | PS384 | PS512 => Some(Family::Rsa),
        ES256 => Some(Family::EcP256),
        ES384 => Some(Family::EcP384),
        EdDSA => Some(Family::Ed),
        HS256 | HS384 | HS512 => None,
    }
}

/// One usable key of the set.
struct Key {
    kid: Option<String>,
    family: Family,
    /// The algorithm the JWK pins (`alg`), if any.
    alg: Option<String>,
    key: DecodingKey,
}

/// The keys as last loaded.
#[derive(Default)]
struct KeySet {
    keys: Vec<Arc<Key>>,
    loaded: Option<Instant>,
    file_modified: Option<SystemTime>,
}

impl KeySet {
    /// The key for a token naming `kid` (or none, when the set has exactly one key of the
    /// family) with algorithm `alg`.
    fn find(&self, kid: Option<&str>, alg: Algorithm) -> Option<Arc<Key>> {
        let family = family(alg)?;
        let fits = |k: &&Arc<Key>| {
            k.family == family && k.alg.as_deref().is_none_or(|a| a == format!("{alg:?}"))
        };
        match kid {
            Some(kid) => self
                .keys
                .iter()
                .filter(fits)
                .find(|k| k.kid.as_deref() == Some(kid))
                .cloned(),
            None => {
                let mut candidates = self.keys.iter().filter(fits);
                let first = candidates.next()?;
                candidates.next().is_none().then(|| Arc::clone(first))
            }
        }
    }
}

/// Parses a JWKS document into usable keys; keys this server cannot or must not use
/// (symmetric, encryption keys, unknown curves) are skipped.
fn parse_jwks(text: &str, from: &str) -> Result<Vec<Arc<Key>>, String> {
    let set: JwkSet = serde_json::from_str(text)
        .map_err(|e| format!("{from}: not a JWKS document (expected {{\"keys\": [...]}}): {e}"))?;
    let mut keys = Vec::new();
    for jwk in &set.keys {
        if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
            continue;
        }
        let Some(family) = jwk_family(jwk) else {
            continue;
        };
        match DecodingKey::from_jwk(jwk) {
            Ok(key) => keys.push(Arc::new(Key {
                kid: jwk.common.key_id.clone(),
                family,
                alg: jwk
                    .common
                    .key_algorithm
                    .map(|a| format!("{a:?}"))
                    .filter(|a| a != "HS256" && a != "HS384" && a != "HS512"),
                key,
            })),
            Err(e) => {
                tracing::warn!(from, kid = ?jwk.common.key_id, error = %e, "skipping a JWK that cannot be read")
            }
        }
    }
    if keys.is_empty() {
        return Err(format!(
            "{from}: the JWKS has no signature key this server can use (RSA, EC P-256/P-384, Ed25519)"
        ));
    }
    Ok(keys)
}

fn jwk_family(jwk: &Jwk) -> Option<Family> {
    match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Some(Family::Rsa),
        AlgorithmParameters::EllipticCurve(p) => match p.curve {
            EllipticCurve::P256 => Some(Family::EcP256),
            EllipticCurve::P384 => Some(Family::EcP384),
            _ => None,
        },
        AlgorithmParameters::OctetKeyPair(p) => {
            (p.curve == EllipticCurve::Ed25519).then_some(Family::Ed)
        }
        AlgorithmParameters::OctetKey(_) => None,
    }
}

/// The issuer's keys, fetched on demand and cached.
struct Jwks {
    url: Option<String>,
    file: Option<PathBuf>,
    http: reqwest::Client,
    set: tokio::sync::RwLock<KeySet>,
    /// When the last fetch prompted by an unknown key started (single-flight and cooldown).
    refreshing: tokio::sync::Mutex<Option<Instant>>,
    max_age: Duration,
    min_refresh: Duration,
}

impl Jwks {
    fn source(&self) -> String {
        match (&self.url, &self.file) {
            (Some(url), _) => url.clone(),
            (None, Some(file)) => file.display().to_string(),
            (None, None) => "(no key source)".into(),
        }
    }

    /// Loads the keys now.
    async fn load(&self) -> Result<(), String> {
        let from = self.source();
        let (text, modified) = if let Some(url) = &self.url {
            let resp = self
                .http
                .get(url)
                .send()
                .await
                .map_err(|e| format!("{from}: could not fetch the JWKS: {e}"))?;
            if !resp.status().is_success() {
                return Err(format!("{from}: the JWKS answered HTTP {}", resp.status()));
            }
            let text = resp
                .text()
                .await
                .map_err(|e| format!("{from}: could not read the JWKS: {e}"))?;
            (text, None)
        } else if let Some(file) = &self.file {
            let modified = std::fs::metadata(file).and_then(|m| m.modified()).ok();
            let text = tokio::fs::read_to_string(file)
                .await
                .map_err(|e| format!("{from}: could not read the JWKS file: {e}"))?;
            (text, modified)
        } else {
            return Err("no JWKS source".into());
        };
        let keys = parse_jwks(&text, &from)?;
        let mut set = self.set.write().await;
        set.keys = keys;
        set.loaded = Some(Instant::now());
        set.file_modified = modified;
        Ok(())
    }

    /// Whether the cached keys should be fetched again before use.
    async fn stale(&self) -> bool {
        let set = self.set.read().await;
        if let Some(file) = &self.file {
            let modified = std::fs::metadata(file).and_then(|m| m.modified()).ok();
            if modified != set.file_modified {
                return true;
            }
        }
        set.loaded.is_none_or(|t| t.elapsed() >= self.max_age)
    }

    /// The key for `kid`/`alg`: from the cache, else after one fetch (at most one per
    /// `min_refresh`, shared by concurrent requests).
    async fn key(&self, kid: Option<&str>, alg: Algorithm) -> Result<Option<Arc<Key>>, String> {
        if self.stale().await
            && let Err(e) = self.refresh(Duration::ZERO).await
        {
            // Expired keys still serve while the issuer is unreachable; none at all cannot.
            if self.set.read().await.keys.is_empty() {
                return Err(e);
            }
            tracing::warn!(error = %e, "could not refresh the JWKS; using the keys already loaded");
        }
        if let Some(key) = self.set.read().await.find(kid, alg) {
            return Ok(Some(key));
        }
        // A key we do not know: the issuer may have rotated.
        if let Err(e) = self.refresh(self.min_refresh).await {
            tracing::warn!(error = %e, "could not refresh the JWKS for an unknown key");
        }
        Ok(self.set.read().await.find(kid, alg))
    }

    /// Fetches the keys unless a fetch started less than `cooldown` ago.
    async fn refresh(&self, cooldown: Duration) -> Result<(), String> {
        let mut last = self.refreshing.lock().await;
        if let Some(t) = *last
            && t.elapsed() < cooldown
        {
            return Ok(());
        }
        *last = Some(Instant::now());
        self.load().await
    }
}

/// Authenticates JWT access tokens (`ravi serve --auth jwt`): each valid token becomes a
/// [`Grant`] for its principal under the access policy.
pub struct JwtAuthenticator {
    config: JwtConfig,
    jwks: Jwks,
    policy: Arc<AccessPolicy>,
    limits: Arc<RateLimits>,
}

impl std::fmt::Debug for JwtAuthenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtAuthenticator")
            .field("issuer", &self.config.issuer)
            .field("resource", &self.config.resource)
            .finish_non_exhaustive()
    }
}

impl JwtAuthenticator {
    /// Checks `config` and loads the issuer's keys once (a server that cannot verify any token
    /// should not start).
    pub async fn new(config: JwtConfig, policy: Arc<AccessPolicy>) -> Result<Self, JwtError> {
        config.check().map_err(JwtError::Config)?;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| JwtError::Keys(format!("could not build an HTTP client: {e}")))?;
        let jwks = Jwks {
            url: config.jwks_url.clone(),
            file: config.jwks_file.clone(),
            http,
            set: tokio::sync::RwLock::default(),
            refreshing: tokio::sync::Mutex::default(),
            max_age: Duration::from_secs(config.jwks_max_age_secs),
            min_refresh: Duration::from_secs(config.jwks_min_refresh_secs),
        };
        jwks.refresh(Duration::ZERO).await.map_err(JwtError::Keys)?;
        Ok(Self {
            config,
            jwks,
            policy,
            limits: Arc::default(),
        })
    }

    /// The same authenticator drawing calls from `limits` (shared with the server's other
    /// authenticators).
    #[must_use]
    pub fn with_rate_limits(mut self, limits: Arc<RateLimits>) -> Self {
        self.limits = limits;
        self
    }

    /// The configuration it checks tokens against.
    pub fn config(&self) -> &JwtConfig {
        &self.config
    }

    /// The principal a valid `token` stands for, or why it is refused.
    pub async fn principal(&self, token: &str) -> Result<Principal, AuthFailure> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| {
            AuthFailure::new(
                "the access token is not a JWT this server accepts (malformed, or its \
                 algorithm is not an asymmetric one: RS*, PS*, ES256, ES384, EdDSA)",
            )
        })?;
        if !self.config.algorithms.contains(&header.alg) || family(header.alg).is_none() {
            return Err(AuthFailure::new(format!(
                "the access token is signed with {:?}, which this server does not accept",
                header.alg
            )));
        }
        let key = self
            .jwks
            .key(header.kid.as_deref(), header.alg)
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, "no JWKS to check tokens against");
                AuthFailure::unavailable(
                    "the issuer's signing keys could not be loaded; try again later",
                )
            })?
            .ok_or_else(|| {
                AuthFailure::new(
                    "the access token is signed with a key the issuer does not publish",
                )
            })?;
        let mut validation = Validation::new(header.alg);
        validation.algorithms = vec![header.alg];
        validation.leeway = self.config.leeway_secs;
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.config.issuer]);
        if self.config.audience.is_empty() {
            validation.set_audience(&[&self.config.resource]);
        } else {
            validation.set_audience(&self.config.audience);
        }
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let data =
            jsonwebtoken::decode::<serde_json::Map<String, Value>>(token, &key.key, &validation)
                .map_err(|e| AuthFailure::new(refusal(e.kind())))?;
        let claims = data.claims;
        let sub = claims
            .get("sub")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| AuthFailure::new("the access token has no subject (`sub`)"))?;
        if sub.starts_with("key:") {
            return Err(AuthFailure::new(
                "the access token's subject starts with `key:`, which names API keys here",
            ));
        }
        let scopes = scopes_of(&claims);
        let missing: Vec<&str> = self
            .config
            .required_scopes
            .iter()
            .filter(|s| !scopes.contains(*s))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            return Err(AuthFailure::insufficient_scope(
                self.config.required_scopes.join(" "),
                format!(
                    "the access token lacks the scope(s) {} this server requires",
                    missing.join(", ")
                ),
            ));
        }
        let groups = strings_at(&claims, &self.config.groups_claim);
        Ok(Principal::new(sub).with_groups(groups).with_scopes(scopes))
    }
}

/// What to tell a client whose token failed validation (never echoing the token).
fn refusal(kind: &jsonwebtoken::errors::ErrorKind) -> String {
    use jsonwebtoken::errors::ErrorKind as K;
    match kind {
        K::ExpiredSignature => "the access token has expired".into(),
        K::ImmatureSignature => "the access token is not valid yet (`nbf`)".into(),
        K::InvalidIssuer => {
            "the access token was issued by an issuer this server does not trust".into()
        }
        K::InvalidAudience => {
            "the access token is not meant for this server (its audience does not name it)".into()
        }
        K::InvalidSignature => "the access token's signature does not verify".into(),
        K::MissingRequiredClaim(claim) => format!("the access token has no `{claim}` claim"),
        K::InvalidAlgorithm => "the access token's algorithm does not fit its key".into(),
        _ => "the access token cannot be read".into(),
    }
}

/// The token's scopes: `scope` (space-separated, RFC 9068) or `scp` (a list or a string).
fn scopes_of(claims: &serde_json::Map<String, Value>) -> Vec<String> {
    let mut scopes: Vec<String> = Vec::new();
    for claim in ["scope", "scp"] {
        match claims.get(claim) {
            Some(Value::String(s)) => scopes.extend(s.split_whitespace().map(str::to_owned)),
            Some(Value::Array(items)) => {
                scopes.extend(items.iter().filter_map(Value::as_str).map(str::to_owned))
            }
            _ => {}
        }
    }
    let mut seen = HashSet::new();
    scopes.retain(|s| seen.insert(s.clone()));
    scopes
}

/// The strings at a dotted `path` of the claims (a list, or one string).
fn strings_at(claims: &serde_json::Map<String, Value>, path: &str) -> Vec<String> {
    let mut parts = path.split('.');
    let Some(first) = parts.next() else {
        return Vec::new();
    };
    let mut at = claims.get(first);
    for part in parts {
        at = at.and_then(|v| v.get(part));
    }
    match at {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

#[async_trait::async_trait]
impl Authenticator for JwtAuthenticator {
    async fn authenticate(&self, bearer: Option<&str>) -> Result<Arc<Grant>, AuthFailure> {
        let Some(token) = bearer else {
            return Err(AuthFailure::new(
                "this server requires an OAuth access token: send `Authorization: Bearer TOKEN` \
                 (see the protected-resource metadata for where to get one)",
            ));
        };
        let principal = self.principal(token).await?;
        Ok(Arc::new(
            Grant::new(Arc::clone(&self.policy), Some(principal))
                .with_rate_limits(Arc::clone(&self.limits)),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn claims_map_to_scopes_and_groups() {
        let claims = json!({
            "scope": "a b a", "scp": ["c"],
            "groups": ["ops"], "realm_access": {"roles": ["admin", 3]}, "team": "red"
        });
        let claims = claims.as_object().unwrap();
        assert_eq!(scopes_of(claims), ["a", "b", "c"]);
        assert_eq!(strings_at(claims, "groups"), ["ops"]);
        assert_eq!(strings_at(claims, "realm_access.roles"), ["admin"]);
        assert_eq!(strings_at(claims, "team"), ["red"]);
        assert!(strings_at(claims, "nope.deeper").is_empty());
    }

    #[test]
    fn configs_are_checked() {
        let mut c = JwtConfig::new("https://idp", "https://gw/mcp", "https://idp/jwks");
        assert!(c.check().is_ok());
        c.algorithms = vec![Algorithm::HS256];
        assert!(c.check().unwrap_err().contains("symmetric"));
        c.algorithms = default_algorithms();
        c.jwks_file = Some("/x".into());
        assert!(c.check().unwrap_err().contains("not both"));
        c.jwks_url = None;
        c.resource = "gw/mcp".into();
        assert!(
            c.check()
                .unwrap_err()
                .contains("not an absolute http(s) URL")
        );
        let parsed: Result<JwtConfig, _> =
            serde_json::from_value(json!({"issuer": "i", "resource": "r", "jwks": "x"}));
        assert!(
            parsed
                .unwrap_err()
                .to_string()
                .contains("unknown field `jwks`")
        );
    }

    #[test]
    fn symmetric_and_foreign_keys_are_skipped() {
        let jwks = json!({"keys": [
            {"kty": "oct", "k": "c2VjcmV0", "kid": "h"},
            {"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo", "kid": "e"}
        ]})
        .to_string();
        let keys = parse_jwks(&jwks, "t").unwrap();
        assert_eq!(keys.len(), 1);
        let set = KeySet {
            keys,
            ..KeySet::default()
        };
        assert!(set.find(Some("e"), Algorithm::EdDSA).is_some());
        assert!(
            set.find(None, Algorithm::EdDSA).is_some(),
            "one key: no kid needed"
        );
        assert!(
            set.find(Some("e"), Algorithm::RS256).is_none(),
            "family must fit"
        );
        assert!(set.find(Some("h"), Algorithm::HS256).is_none());
        let err = parse_jwks(r#"{"keys": [{"kty": "oct", "k": "eA"}]}"#, "t")
            .err()
            .unwrap();
        assert!(err.contains("no signature key"), "{err}");
        assert!(parse_jwks("[]", "t").err().unwrap().contains("not a JWKS"));
    }
}
