//! [`HttpPolicy`]: where `http_get` may go and how much it may fetch. Plain data, so a
//! configuration can name it in a build without the `http` feature (and its HTTP client).

use std::time::Duration;

/// Where `http_get` may go and how much it may fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HttpPolicy {
    /// When non-empty, only these hosts are reachable. An entry is a host name or IP
    /// (`api.example.com`, `127.0.0.1`) or a suffix pattern (`*.example.com`). Listed hosts may
    /// resolve to private addresses: listing one is the operator's explicit consent.
    pub allow_hosts: Vec<String>,
    /// Hosts never reachable, same syntax; checked first.
    pub deny_hosts: Vec<String>,
    /// Reach private, loopback and link-local addresses even for unlisted hosts (default false).
    pub allow_private: bool,
    /// Whole-request time limit (default 30 s).
    pub timeout: Duration,
    /// Largest body returned (default 5 MiB); bigger responses are a tool error.
    pub max_bytes: usize,
    /// Most redirects followed (default 5).
    pub max_redirects: usize,
    /// Headers sent to matching hosts (same syntax as `allow_hosts`), e.g. an
    /// `Authorization` header whose value names a secret (`Bearer ${secret:GH_TOKEN}`): the
    /// reference is resolved per request and the value redacted from the result. A request
    /// carrying them follows no redirect to another host.
    pub headers: Vec<(String, std::collections::BTreeMap<String, String>)>,
}

impl Default for HttpPolicy {
    fn default() -> Self {
        Self {
            allow_hosts: Vec::new(),
            deny_hosts: Vec::new(),
            allow_private: false,
            timeout: Duration::from_secs(30),
            max_bytes: 5 << 20,
            max_redirects: 5,
            headers: Vec::new(),
        }
    }
}
