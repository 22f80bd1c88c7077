//! Who is calling a gateway: authenticators beyond the API keys of
//! [`ravi_agents::access::KeyAuthenticator`].
//!
//! [`JwtAuthenticator`] makes `ravi serve --http` an OAuth 2.1 resource server: clients present
//! access tokens from the team's identity provider, checked against its published keys.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use ravi_agents::access::{AccessPolicy, AccessRule};
//! use ravi_gateway::auth::{JwtAuthenticator, JwtConfig};
//! use ravi_gateway::HttpOptions;
//!
//! let config = JwtConfig::new(
//!     "https://login.example.com",
//!     "https://tools.example.com/mcp",
//!     "https://login.example.com/.well-known/jwks.json",
//! );
//! let policy = AccessPolicy::new().with_group("ops", AccessRule::tools(["*"]));
//! let jwt = JwtAuthenticator::new(config.clone(), Arc::new(policy)).await?;
//! let mut opts = HttpOptions::default();
//! opts.auth = Some(Arc::new(jwt));
//! opts.resource_metadata = Some(config.metadata()); // /.well-known/oauth-protected-resource
//! # Ok(()) }
//! ```

#[cfg(feature = "jwt")]
mod jwt;

#[cfg(feature = "jwt")]
pub use jwt::{JwtAuthenticator, JwtConfig, JwtError};
