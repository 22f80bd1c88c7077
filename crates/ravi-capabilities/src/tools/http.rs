//! `http_get` (Sensitive): fetches a URL with SSRF guards.
//!
//! Guards, in order: scheme http/https only; host deny-list; host allow-list (when non-empty,
//! only listed hosts); literal IP hosts and every address a name resolves to must be public
//! unless the host is on the allow-list (or the policy allows private ranges). The address
//! check runs inside the client's DNS resolver, at connection time, so a name that resolves to
//! a public address for the check and a private one for the request (DNS rebinding) is still
//! refused; redirects are re-checked hop by hop and limited in number. No proxy from the
//! environment is used (a proxy would resolve names itself). The body is capped.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use ravi_agents::TypedTool;
use ravi_kernel::{
    ContentBlock, ToolContext, ToolEffects, ToolError, ToolErrorKind, ToolExecutionResult, ToolRisk,
};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::files::sniff_image;
pub use super::http_policy::HttpPolicy;

fn host_matches(pattern: &str, host: &str) -> bool {
    let pattern = pattern.trim().trim_end_matches('.').to_ascii_lowercase();
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match pattern.strip_prefix("*.") {
        Some(suffix) => host.len() > suffix.len() && host.ends_with(&format!(".{suffix}")),
        None => pattern.trim_start_matches('[').trim_end_matches(']') == host,
    }
}

impl HttpPolicy {
    /// A policy that reaches only the given hosts (which may be private, e.g. `127.0.0.1`).
    pub fn allow_only<I, S>(hosts: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            allow_hosts: hosts.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }

    fn is_listed(&self, host: &str) -> bool {
        self.allow_hosts.iter().any(|p| host_matches(p, host))
    }

    /// Checks a URL's scheme and host against the lists and, for literal IPs, the address
    /// ranges. Names are checked again at resolution time.
    pub fn check_url(&self, url: &url::Url) -> Result<(), String> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "scheme `{}` is not allowed; only http and https URLs can be fetched",
                url.scheme()
            ));
        }
        let Some(host) = url.host_str() else {
            return Err("the URL has no host".into());
        };
        if self.deny_hosts.iter().any(|p| host_matches(p, host)) {
            return Err(format!("host `{host}` is on the deny-list"));
        }
        let listed = self.is_listed(host);
        if !self.allow_hosts.is_empty() && !listed {
            return Err(format!(
                "host `{host}` is not on the allow-list ({})",
                self.allow_hosts.join(", ")
            ));
        }
        let ip = match url.host() {
            Some(url::Host::Ipv4(v4)) => Some(IpAddr::V4(v4)),
            Some(url::Host::Ipv6(v6)) => Some(IpAddr::V6(v6)),
            _ => None,
        };
        if let Some(ip) = ip
            && !listed
            && !self.allow_private
            && !is_public(ip)
        {
            return Err(format!(
                "address {ip} is private, loopback, link-local or in another special-purpose range; http_get only reaches public addresses"
            ));
        }
        Ok(())
    }
}

impl HttpPolicy {
    /// The verdict on one redirect hop to `url`, after `followed` earlier URLs (the original
    /// request counts as one): the redirect limit, then every check of
    /// [`check_url`](Self::check_url) again, so a public page cannot bounce the client to a
    /// private address. Names are checked once more at connection time by the resolver.
    pub fn check_redirect(&self, url: &url::Url, followed: usize) -> Result<(), String> {
        if followed > self.max_redirects {
            return Err(format!("more than {} redirects", self.max_redirects));
        }
        self.check_url(url)
            .map_err(|why| format!("redirect to {url} refused: {why}"))
    }
}

/// Whether `ip` is a globally routable unicast address (not private, loopback, link-local,
/// shared, documentation, benchmarking, reserved, multicast or unspecified).
///
/// IPv6 is allow-listed rather than deny-listed: only global unicast (`2000::/3`) counts, which
/// leaves out loopback, unspecified, IPv4-compatible `::a.b.c.d`, link-local, site-local
/// `fec0::/10`, unique-local, multicast, discard-only and local-use NAT64 `64:ff9b:1::/48`.
/// Inside `2000::/3` the special blocks are refused too: `2001::/23` (IETF assignments,
/// Teredo `2001::/32` among them), `2001:db8::/32` and `3fff::/20` (documentation) and 6to4
/// `2002::/16`. Two forms that carry an IPv4 address the host stack will reach directly are
/// judged by that address: IPv4-mapped `::ffff:a.b.c.d` and NAT64 `64:ff9b::/96`.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public_v4(v4);
            }
            let seg = v6.segments();
            // NAT64 well-known prefix 64:ff9b::/96 embeds an IPv4 address.
            if seg[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                let o = v6.octets();
                return is_public_v4(Ipv4Addr::new(o[12], o[13], o[14], o[15]));
            }
            let global_unicast = seg[0] & 0xe000 == 0x2000;
            let special = match seg[0] {
                // 2001::/23 (IETF assignments, Teredo 2001::/32 among them), documentation
                // 2001:db8::/32.
                0x2001 => seg[1] < 0x0200 || seg[1] == 0x0db8,
                // 6to4: the embedded IPv4 address is reached through a relay.
                0x2002 => true,
                // Documentation 3fff::/20.
                0x3fff => seg[1] < 0x1000,
                _ => false,
            };
            global_unicast && !special
        }
    }
}

fn is_public_v4(v4: Ipv4Addr) -> bool {
    let o = v4.octets();
    !(v4.is_private()
        || v4.is_loopback()
        || v4.is_link_local()
        || v4.is_unspecified()
        || v4.is_broadcast()
        || v4.is_documentation()
        || v4.is_multicast()
        || o[0] == 0
        || (o[0] == 100 && (64..128).contains(&o[1])) // shared address space (CGNAT)
        || (o[0] == 198 && (o[1] == 18 || o[1] == 19)) // benchmarking
        || (o[0] == 192 && o[1] == 0 && o[2] == 0) // IETF protocol assignments
        || o[0] >= 240) // reserved
}

/// The DNS resolver that enforces the address rule at connection time.
struct GuardedResolver {
    policy: Arc<HttpPolicy>,
}

async fn resolve_checked(policy: &HttpPolicy, host: &str) -> Result<Vec<SocketAddr>, String> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, 0))
        .await
        .map_err(|e| format!("cannot resolve host `{host}`: {e}"))?
        .collect();
    let trusted = policy.allow_private || policy.is_listed(host);
    let allowed: Vec<SocketAddr> = addrs
        .iter()
        .copied()
        .filter(|a| trusted || is_public(a.ip()))
        .collect();
    if allowed.is_empty() {
        let shown: Vec<String> = addrs.iter().map(|a| a.ip().to_string()).collect();
        return Err(format!(
            "host `{host}` resolves only to private, loopback or link-local addresses ({}); http_get only reaches public addresses",
            shown.join(", ")
        ));
    }
    Ok(allowed)
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = Arc::clone(&self.policy);
        Box::pin(async move {
            let addrs = resolve_checked(&policy, name.as_str()).await.map_err(|m| {
                Box::new(std::io::Error::new(std::io::ErrorKind::PermissionDenied, m))
            })?;
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// `http_get` (Sensitive): a GET request under an [`HttpPolicy`].
#[derive(Clone)]
pub struct HttpGet {
    policy: Arc<HttpPolicy>,
    client: reqwest::Client,
    /// For requests carrying configured headers (credentials): redirects stay on the host.
    same_host_client: reqwest::Client,
}

impl std::fmt::Debug for HttpGet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpGet")
            .field("policy", &self.policy)
            .finish()
    }
}

impl HttpGet {
    /// The tool under `policy`.
    pub fn new(policy: HttpPolicy) -> Result<Self, ToolError> {
        let policy = Arc::new(policy);
        let client = Self::client(&policy, false)?;
        let same_host_client = Self::client(&policy, true)?;
        Ok(Self {
            policy,
            client,
            same_host_client,
        })
    }

    /// A client under `policy`; `same_host`: redirects to another host are refused.
    fn client(policy: &Arc<HttpPolicy>, same_host: bool) -> Result<reqwest::Client, ToolError> {
        let hop_policy = Arc::clone(policy);
        let redirect = reqwest::redirect::Policy::custom(move |attempt| {
            if same_host
                && attempt.url().host_str() != attempt.previous().first().and_then(|u| u.host_str())
            {
                return attempt.error(
                    "a request carrying configured credentials follows no redirect to another host",
                );
            }
            match hop_policy.check_redirect(attempt.url(), attempt.previous().len()) {
                Ok(()) => attempt.follow(),
                Err(why) => attempt.error(why),
            }
        });
        reqwest::Client::builder()
            .no_proxy()
            .redirect(redirect)
            .timeout(policy.timeout)
            .connect_timeout(policy.timeout.min(Duration::from_secs(10)))
            .user_agent(concat!("ravi-http-get/", env!("CARGO_PKG_VERSION")))
            .dns_resolver(Arc::new(GuardedResolver {
                policy: Arc::clone(policy),
            }))
            .build()
            .map_err(|e| ToolError::internal(format!("cannot build the HTTP client: {e}")))
    }

    /// The policy in force.
    pub fn policy(&self) -> &HttpPolicy {
        &self.policy
    }
}

/// `http_get`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HttpGetArgs {
    /// The absolute http or https URL to fetch (the schema gives the model an example).
    #[schemars(
        length(min = 1),
        description = "Absolute http or https URL, e.g. \"https://example.com/data.json\"."
    )]
    pub url: String,
}

/// Whether the guarded resolver refused the connection (it fails with an
/// `io::ErrorKind::PermissionDenied` error, which reqwest keeps in the error's source chain).
fn refused_by_resolver(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(err);
    while let Some(e) = source {
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::PermissionDenied)
        {
            return true;
        }
        source = e.source();
    }
    false
}

/// The innermost message of an error chain, where reqwest keeps the resolver's or redirect
/// policy's own words.
fn chain_message(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![err.to_string()];
    let mut source = err.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}

fn is_text(content_type: &str) -> bool {
    let ct = content_type.to_ascii_lowercase();
    ct.starts_with("text/")
        || ct.contains("json")
        || ct.contains("xml")
        || ct.contains("javascript")
        || ct.contains("x-www-form-urlencoded")
}

#[ravi_kernel::async_trait]
impl TypedTool for HttpGet {
    type Args = HttpGetArgs;
    type Output = Result<ToolExecutionResult, ToolError>;

    fn name(&self) -> &str {
        "http_get"
    }

    fn description(&self) -> &str {
        "Fetch a web page or API response with an HTTP GET and return its status and body \
         (text, JSON, or an image). Only http and https; private, loopback and link-local \
         addresses are refused unless the operator allowed the host; at most 5 redirects; \
         bodies over the size limit (default 5 MiB) are refused."
    }

    fn risk(&self) -> ToolRisk {
        ToolRisk::Sensitive
    }

    /// A GET changes nothing (read-only, idempotent) but reaches the network (open-world).
    fn effects(&self) -> ToolEffects {
        ToolEffects::read_only_closed().with_open_world(true)
    }

    async fn call(
        &self,
        _ctx: &ToolContext,
        HttpGetArgs { url }: HttpGetArgs,
    ) -> Result<ToolExecutionResult, ToolError> {
        let parsed = url::Url::parse(&url).map_err(|e| {
            ToolError::invalid_arguments(format!(
                "`{url}` is not a valid absolute URL ({e}); give a full URL such as https://example.com/page"
            ))
        })?;
        self.policy
            .check_url(&parsed)
            .map_err(|why| ToolError::permission_denied(format!("cannot fetch {url}: {why}")))?;
        if let Some(url::Host::Domain(host)) = parsed.host() {
            resolve_checked(&self.policy, host).await.map_err(|why| {
                ToolError::permission_denied(format!("cannot fetch {url}: {why}"))
            })?;
        }
        // Configured headers for this host, their secret references resolved now.
        let mut redactor = ravi_agents::secrets::Redactor::default();
        let mut extra = reqwest::header::HeaderMap::new();
        if let Some(host) = parsed.host_str() {
            for (pattern, headers) in &self.policy.headers {
                if !host_matches(pattern, host) {
                    continue;
                }
                for (name, value) in headers {
                    let value =
                        ravi_agents::secrets::expand(value, &mut redactor).map_err(|why| {
                            ToolError::internal(format!(
                                "http_get's header `{name}` for {pattern}: {why}"
                            ))
                        })?;
                    let (Ok(n), Ok(v)) = (
                        reqwest::header::HeaderName::from_bytes(name.as_bytes()),
                        reqwest::header::HeaderValue::from_str(&value),
                    ) else {
                        return Err(ToolError::internal(format!(
                            "http_get's header `{name}` for {pattern} is not a valid HTTP header"
                        )));
                    };
                    extra.insert(n, v);
                }
            }
        }
        let client = if extra.is_empty() {
            &self.client
        } else {
            &self.same_host_client
        };
        let outcome = self.fetch(client, parsed, extra, &url).await;
        match outcome {
            Ok(mut result) if !redactor.is_empty() => {
                for block in &mut result.content {
                    if let ContentBlock::Text { text, .. } = block {
                        *text = redactor.redact(text);
                    }
                }
                Ok(result)
            }
            Ok(result) => Ok(result),
            Err(e) if !redactor.is_empty() => {
                Err(ToolError::new(e.kind, redactor.redact(&e.message)))
            }
            Err(e) => Err(e),
        }
    }
}

impl HttpGet {
    /// Sends the request and turns the response into the tool's result.
    async fn fetch(
        &self,
        client: &reqwest::Client,
        parsed: url::Url,
        headers: reqwest::header::HeaderMap,
        url: &str,
    ) -> Result<ToolExecutionResult, ToolError> {
        let mut response = client
            .get(parsed)
            .headers(headers)
            .send()
            .await
            .map_err(|e| {
                let why = chain_message(&e);
                let kind = if e.is_timeout() {
                    ToolErrorKind::Timeout
                } else if e.is_redirect() || refused_by_resolver(&e) {
                    ToolErrorKind::PermissionDenied
                } else {
                    ToolErrorKind::Unavailable
                };
                ToolError::new(kind, format!("GET {url} failed: {why}"))
            })?;
        let status = response.status();
        let final_url = response.url().to_string();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let max = self.policy.max_bytes;
        let too_big = |size: String| {
            ToolError::limit_exceeded(format!(
                "the response from {final_url} ({size}) is larger than http_get's limit of {max} \
                 bytes, so none of it is returned. Fetch something smaller instead: one page of \
                 the results, a narrower query, a specific file or an API endpoint rather than a \
                 whole site or archive; or ask the operator to raise http_get's size limit."
            ))
        };
        if let Some(n) = response.content_length().filter(|n| *n > max as u64) {
            return Err(too_big(format!("{n} bytes announced")));
        }
        let mut body = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if body.len() + chunk.len() > max {
                        return Err(too_big(format!("more than {max} bytes received")));
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => {
                    let kind = if e.is_timeout() {
                        ToolErrorKind::Timeout
                    } else {
                        ToolErrorKind::Unavailable
                    };
                    return Err(ToolError::new(
                        kind,
                        format!(
                            "reading the body of {final_url} failed: {}",
                            chain_message(&e)
                        ),
                    ));
                }
            }
        }
        let head = format!(
            "HTTP {} from {final_url} ({}, {} bytes)",
            status,
            if content_type.is_empty() {
                "no content type"
            } else {
                &content_type
            },
            body.len()
        );
        let structured = json!({
            "url": final_url,
            "status": status.as_u16(),
            "content_type": content_type,
            "bytes": body.len(),
        });
        let mut content = vec![];
        if let Some(media_type) = sniff_image(&body) {
            content.push(ContentBlock::text(head));
            content.push(ContentBlock::image_bytes(media_type, &body));
        } else {
            match String::from_utf8(body) {
                Ok(text) if is_text(&content_type) || !text.contains('\0') => {
                    content.push(ContentBlock::text(format!("{head}\n\n{text}")));
                }
                _ => {
                    content.push(ContentBlock::text(format!(
                        "{head}\n\n[binary body not shown: it is neither text nor a PNG/JPEG/GIF/WebP image]"
                    )));
                }
            }
        }
        Ok({
            let mut r = ToolExecutionResult::default();
            r.content = content;
            r.is_error = status.is_client_error() || status.is_server_error();
            r.structured_content = Some(structured);
            r
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_ranges() {
        for private in [
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "127.0.0.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "255.255.255.255",
            "224.0.0.1",
            "198.18.0.1",
            "192.0.2.1",
            "240.0.0.1",
            "::1",
            "::",
            "fe80::1",
            "fc00::1",
            "fd12::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "2001:db8::1",
            "ff02::1",
        ] {
            let ip: IpAddr = private.parse().unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
            assert!(!is_public(ip), "{private} counted as public");
        }
        for public in [
            "8.8.8.8",
            "1.1.1.1",
            "172.32.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            let ip: IpAddr = public.parse().unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
            assert!(is_public(ip), "{public} counted as private");
        }
    }

    /// The IPv6 forms that embed or tunnel to an IPv4 address, and the non-global IPv6 blocks.
    #[test]
    fn tunnelled_and_special_ipv6_forms() {
        for refused in [
            "2002:7f00:1::1",   // 6to4 of 127.0.0.1
            "2002:a9fe:a9fe::", // 6to4 of 169.254.169.254
            "2002:808:808::1",  // 6to4 of a public address: still relayed, refused
            "::127.0.0.1",      // IPv4-compatible
            "::10.0.0.1",
            "::8.8.8.8", // IPv4-compatible is deprecated whatever it embeds
            "2001::1",   // Teredo
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "2001:2::1",  // benchmarking
            "2001:10::1", // ORCHID
            "fec0::1",    // site-local
            "feff::1",
            "64:ff9b:1::a00:1", // local-use NAT64
            "100::1",           // discard-only
            "3fff::1",          // documentation
            "5f00::1",          // SRv6 SIDs
            "::ffff:169.254.169.254",
            "::ffff:192.168.0.1",
            "64:ff9b::7f00:1",    // NAT64 of 127.0.0.1
            "64:ff9b::a9fe:a9fe", // NAT64 of 169.254.169.254
        ] {
            let ip: IpAddr = refused.parse().unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
            assert!(!is_public(ip), "{refused} counted as public");
        }
        for public in [
            "2001:200::1",
            "2a00:1450:4001::1",
            "2400:cb00::1",
            "3ffe::1",
        ] {
            let ip: IpAddr = public.parse().unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
            assert!(is_public(ip), "{public} counted as private");
        }
    }

    proptest::proptest! {
        /// The forms the host stack reaches as IPv4 are judged exactly like the address they
        /// carry; 6to4, IPv4-compatible and Teredo are never public, whatever they embed.
        #[test]
        fn embedded_ipv4_follows_the_ipv4_rules(bits in proptest::prelude::any::<u32>(), tail in proptest::prelude::any::<u64>()) {
            let v4 = Ipv4Addr::from(bits);
            let o = v4.octets();
            let mapped = v4.to_ipv6_mapped();
            let nat64 = std::net::Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0,
                u16::from_be_bytes([o[0], o[1]]), u16::from_be_bytes([o[2], o[3]]));
            proptest::prop_assert_eq!(is_public(IpAddr::V6(mapped)), is_public_v4(v4), "{}", mapped);
            proptest::prop_assert_eq!(is_public(IpAddr::V6(nat64)), is_public_v4(v4), "{}", nat64);
            let t = tail.to_be_bytes();
            let seg = |i: usize| u16::from_be_bytes([t[i], t[i + 1]]);
            let six_to_four = std::net::Ipv6Addr::new(0x2002,
                u16::from_be_bytes([o[0], o[1]]), u16::from_be_bytes([o[2], o[3]]), seg(0), seg(2), seg(4), seg(6), 0);
            let compatible = std::net::Ipv6Addr::new(0, 0, 0, 0, 0, 0,
                u16::from_be_bytes([o[0], o[1]]), u16::from_be_bytes([o[2], o[3]]));
            let teredo = std::net::Ipv6Addr::new(0x2001, 0, seg(0), seg(2), seg(4), seg(6),
                u16::from_be_bytes([o[0], o[1]]), u16::from_be_bytes([o[2], o[3]]));
            let site_local = std::net::Ipv6Addr::new(0xfec0 | (seg(0) & 0x3f), seg(2), seg(4), seg(6), 0, 0, 0, 1);
            for ip in [six_to_four, compatible, teredo, site_local] {
                proptest::prop_assert!(!is_public(IpAddr::V6(ip)), "{} counted as public", ip);
            }
        }

        /// Nothing outside global unicast 2000::/3 is public, apart from the two IPv4 forms.
        #[test]
        fn only_global_unicast_ipv6_is_public(bits in proptest::prelude::any::<u128>()) {
            let ip = std::net::Ipv6Addr::from(bits);
            let seg = ip.segments();
            let embeds_v4 = ip.to_ipv4_mapped().is_some() || seg[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
            if !embeds_v4 && seg[0] & 0xe000 != 0x2000 {
                proptest::prop_assert!(!is_public(IpAddr::V6(ip)), "{} counted as public", ip);
            }
        }
    }

    /// Every redirect hop is judged by the policy's own rules: the default policy refuses a
    /// redirect to a literal private, loopback or link-local address in any spelling.
    #[test]
    fn default_policy_refuses_redirects_to_private_literals() {
        let p = HttpPolicy::default();
        for to in [
            "http://10.0.0.1/",
            "http://192.168.1.1:8080/admin",
            "http://169.254.169.254/latest/meta-data/",
            "http://127.0.0.1/",
            "http://2130706433/",
            "http://0x7f.1/",
            "http://[::1]/",
            "http://[fe80::1]/",
            "http://[::ffff:169.254.169.254]/",
            "http://[64:ff9b::a9fe:a9fe]/",
            "http://[2002:a9fe:a9fe::1]/",
            "http://[::127.0.0.1]/",
            "http://[2001::1]/",
            "http://[fec0::1]/",
        ] {
            let url = url::Url::parse(to).unwrap_or_else(|e| panic!("{to}: {e}"));
            let why = p.check_redirect(&url, 1).unwrap_err();
            assert!(why.starts_with("redirect to http://"), "{to}: {why}");
            assert!(why.contains("only reaches public addresses"), "{to}: {why}");
        }
        let public = url::Url::parse("https://example.com/next").unwrap_or_else(|_| unreachable!());
        assert!(p.check_redirect(&public, 1).is_ok());
        assert!(p.check_redirect(&public, 5).is_ok());
        assert_eq!(
            p.check_redirect(&public, 6).unwrap_err(),
            "more than 5 redirects"
        );
    }

    #[test]
    fn host_patterns() {
        assert!(host_matches("example.com", "EXAMPLE.com."));
        assert!(host_matches("*.example.com", "api.example.com"));
        assert!(!host_matches("*.example.com", "example.com"));
        assert!(!host_matches("*.example.com", "evilexample.com"));
        assert!(host_matches("::1", "[::1]"));
    }

    #[test]
    fn url_checks() {
        let p = HttpPolicy::default();
        let check = |u: &str| p.check_url(&url::Url::parse(u).unwrap_or_else(|_| unreachable!()));
        assert!(check("https://example.com/").is_ok());
        assert!(
            check("ftp://example.com/")
                .unwrap_err()
                .contains("scheme `ftp`")
        );
        assert!(
            check("file:///etc/passwd")
                .unwrap_err()
                .contains("scheme `file`")
        );
        assert!(
            check("http://127.0.0.1:8080/")
                .unwrap_err()
                .contains("private")
        );
        assert!(check("http://[::1]/").unwrap_err().contains("private"));
        assert!(
            check("http://169.254.169.254/latest/meta-data")
                .unwrap_err()
                .contains("private")
        );
        assert!(check("http://2130706433/").unwrap_err().contains("private")); // 127.0.0.1 as an integer
        let only = HttpPolicy::allow_only(["127.0.0.1"]);
        assert!(
            only.check_url(
                &url::Url::parse("http://127.0.0.1:9/").unwrap_or_else(|_| unreachable!())
            )
            .is_ok()
        );
        assert!(
            only.check_url(
                &url::Url::parse("https://example.com/").unwrap_or_else(|_| unreachable!())
            )
            .unwrap_err()
            .contains("allow-list")
        );
        let deny = HttpPolicy {
            deny_hosts: vec!["*.internal".into()],
            ..HttpPolicy::default()
        };
        assert!(
            deny.check_url(
                &url::Url::parse("https://db.internal/").unwrap_or_else(|_| unreachable!())
            )
            .unwrap_err()
            .contains("deny-list")
        );
    }
}
