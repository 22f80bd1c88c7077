//! The egress proxy of a confined process granted some network: an HTTP proxy (`CONNECT` for
//! TLS and any TCP stream, absolute-form requests for plain HTTP) that forwards only to the
//! hosts its allow-list names, and to local addresses (loopback, link-local, unspecified)
//! only when `loopback` is set.
//!
//! The process reaches it as `http://127.0.0.1:3128` inside its own network namespace;
//! `HTTP_PROXY`, `HTTPS_PROXY` and `ALL_PROXY` point there. A host is
//! checked by name, then every address it resolves to is checked, and the connection goes to
//! the checked address (a name that resolves to loopback is not a way around the rule).
//!
//! ```
//! use ravi_confine::egress::{Request, host_matches, parse_head};
//!
//! let req = parse_head(b"CONNECT api.github.com:443 HTTP/1.1\r\nHost: api.github.com\r\n\r\n").unwrap();
//! assert_eq!((req.host.as_str(), req.port), ("api.github.com", 443));
//! assert!(host_matches("*.github.com", "api.github.com"));
//! assert!(!host_matches("*.github.com", "github.com.evil.example"));
//! # let _: Request = req;
//! ```

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

/// The largest request head the proxy reads.
pub const MAX_HEAD: usize = 16 * 1024;

/// One request to the proxy, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Request {
    /// The destination host (a name or an IP address, without brackets), lowercase.
    pub host: String,
    /// The destination port.
    pub port: u16,
    /// `CONNECT` (a tunnel) rather than a plain HTTP request.
    pub tunnel: bool,
    /// For a plain HTTP request: the head to send upstream, its target made origin-form and
    /// the proxy's own headers removed.
    pub upstream_head: Vec<u8>,
}

/// Parses a request head (up to and including the blank line). The error says what is wrong.
pub fn parse_head(head: &[u8]) -> Result<Request, String> {
    let text = std::str::from_utf8(head).map_err(|_| "the request head is not UTF-8")?;
    // Exactly one head: its lines, then the blank line that ends it, then nothing.
    let Some(body) = text.strip_suffix("\r\n\r\n") else {
        return Err("the request head does not end with a blank line".into());
    };
    if body.contains("\r\n\r\n") {
        return Err("more than one request head".into());
    }
    let mut lines = body.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let mut parts = first.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(format!("`{}` is not an HTTP request line", shorten(first)));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(format!("unsupported protocol `{}`", shorten(version)));
    }
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(format!("`{}` is not an HTTP method", shorten(method)));
    }
    if method == "CONNECT" {
        let (host, port) = split_authority(target, None)?;
        return Ok(Request {
            host,
            port,
            tunnel: true,
            upstream_head: Vec::new(),
        });
    }
    let Some(rest) = target.strip_prefix("http://") else {
        return Err(format!(
            "`{}`: a proxy request names an absolute http:// URL (use CONNECT for https)",
            shorten(target)
        ));
    };
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_owned()
    };
    let (host, port) = split_authority(authority, Some(80))?;
    let mut upstream = format!("{method} {path} {version}\r\n");
    for line in lines {
        let Some((name, _)) = line.split_once(':') else {
            return Err(format!("`{}` is not a header line", shorten(line)));
        };
        if name.to_ascii_lowercase().starts_with("proxy-") {
            continue;
        }
        upstream.push_str(line);
        upstream.push_str("\r\n");
    }
    upstream.push_str("\r\n");
    Ok(Request {
        host,
        port,
        tunnel: false,
        upstream_head: upstream.into_bytes(),
    })
}

fn shorten(s: &str) -> String {
    s.chars().take(80).collect()
}

/// `host[:port]` or `[v6]:port`; the port defaults to `default` (required when `None`).
fn split_authority(authority: &str, default: Option<u16>) -> Result<(String, u16), String> {
    if authority.contains('@') {
        return Err("credentials in the proxy target are not accepted".into());
    }
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("`{}`: an unclosed IPv6 bracket", shorten(authority)))?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match (port, default) {
        (Some(p), _) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("`{}` is not a port", shorten(p)))?,
        (None, Some(d)) => d,
        (None, None) => return Err(format!("`{}` names no port", shorten(authority))),
    };
    let host = host.to_ascii_lowercase();
    let valid = !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._:".contains(&b));
    if !valid {
        return Err(format!("`{}` is not a host name", shorten(&host)));
    }
    Ok((host, port))
}

/// Whether `pattern` (`*`, `*.example.com` for its subdomains, or an exact host) allows
/// `host`. Case-insensitive.
pub fn host_matches(pattern: &str, host: &str) -> bool {
    let (pattern, host) = (pattern.to_ascii_lowercase(), host.to_ascii_lowercase());
    if pattern == "*" {
        return true;
    }
    match pattern.strip_prefix("*.") {
        Some(suffix) => host.len() > suffix.len() + 1 && host.ends_with(&format!(".{suffix}")),
        None => pattern == host,
    }
}

/// Whether `pattern` is a valid allow-list entry; the error says what is expected.
pub fn check_pattern(pattern: &str) -> Result<(), String> {
    let host = pattern.strip_prefix("*.").unwrap_or(pattern);
    if pattern == "*" {
        return Ok(());
    }
    let valid = !host.is_empty()
        && !host.contains('*')
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._:".contains(&b));
    if valid {
        Ok(())
    } else {
        Err(format!(
            "`{pattern}` is not a host pattern: expected a host name or address \
             (`api.github.com`, `10.0.0.5`), `*.example.com` for subdomains, or `*`"
        ))
    }
}

/// A loopback, link-local or unspecified address: reached only with `loopback = true`.
pub fn is_local(ip: IpAddr) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    match ip {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_link_local() || v4.is_unspecified(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.is_unspecified() || (v6.segments()[0] & 0xffc0) == 0xfe80
        }
    }
}

/// What the proxy of one confined process lets through.
#[derive(Debug, Clone)]
pub(crate) struct Rules {
    pub(crate) allow: Vec<String>,
    pub(crate) loopback: bool,
    /// The settings table that grants it (`[sandbox.mcp.fs]`), named in refusals.
    pub(crate) table: String,
}

impl Rules {
    /// The addresses of `req` this process may reach, or why none.
    async fn resolve(&self, req: &Request) -> Result<Vec<SocketAddr>, String> {
        let named = self.allow.iter().any(|p| host_matches(p, &req.host));
        let loopback_name = req.host == "localhost" || req.host.ends_with(".localhost");
        let literal: Option<IpAddr> = req.host.parse().ok();
        if !named && !(self.loopback && (loopback_name || literal.is_some_and(is_local))) {
            return Err(format!(
                "{} is not in the network allow-list of this sandbox ({} network)",
                req.host, self.table
            ));
        }
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((req.host.as_str(), req.port))
            .await
            .map_err(|e| format!("{} does not resolve: {e}", req.host))?
            .collect();
        let reachable: Vec<SocketAddr> = addrs
            .iter()
            .copied()
            .filter(|a| self.loopback || !is_local(a.ip()))
            .collect();
        if reachable.is_empty() {
            return Err(format!(
                "{} resolves to a local address ({}), which this sandbox reaches only with \
                 loopback = true in {}",
                req.host,
                addrs
                    .first()
                    .map(|a| a.ip().to_string())
                    .unwrap_or_default(),
                self.table
            ));
        }
        Ok(reachable)
    }
}

/// Serves `listener` until it fails (the namespace is gone) or the task is aborted.
pub(crate) async fn serve(listener: TcpListener, rules: Arc<Rules>) {
    loop {
        match listener.accept().await {
            Ok((conn, _)) => {
                tokio::spawn(handle(conn, Arc::clone(&rules)));
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionAborted => continue,
            Err(_) => return,
        }
    }
}

async fn handle(mut conn: TcpStream, rules: Arc<Rules>) {
    let Ok(Ok((head, rest))) =
        tokio::time::timeout(Duration::from_secs(30), read_head(&mut conn)).await
    else {
        return;
    };
    let req = match parse_head(&head) {
        Ok(req) => req,
        Err(why) => return refuse(&mut conn, "400 Bad Request", &why).await,
    };
    let addrs = match rules.resolve(&req).await {
        Ok(addrs) => addrs,
        Err(why) => return refuse(&mut conn, "403 Forbidden", &why).await,
    };
    let connect = tokio::time::timeout(
        Duration::from_secs(30),
        TcpStream::connect(addrs.as_slice()),
    );
    let mut upstream = match connect.await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            return refuse(
                &mut conn,
                "502 Bad Gateway",
                &format!("{}:{}: {e}", req.host, req.port),
            )
            .await;
        }
        Err(_) => {
            return refuse(
                &mut conn,
                "504 Gateway Timeout",
                &format!("{}:{} did not answer", req.host, req.port),
            )
            .await;
        }
    };
    let started = if req.tunnel {
        conn.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await
    } else {
        upstream.write_all(&req.upstream_head).await
    };
    if started.is_err() || upstream.write_all(&rest).await.is_err() {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut conn, &mut upstream).await;
}

/// Reads up to the blank line that ends a head; returns the head and what came after it.
async fn read_head(conn: &mut TcpStream) -> std::io::Result<(Vec<u8>, Vec<u8>)> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Ok((buf, rest));
        }
        if buf.len() > MAX_HEAD {
            return Err(std::io::ErrorKind::InvalidData.into());
        }
    }
}

async fn refuse(conn: &mut TcpStream, status: &str, why: &str) {
    let body = format!("ravi sandbox: {why}\n");
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = conn.write_all(response.as_bytes()).await;
    let _ = conn.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_parse_and_bad_ones_say_why() {
        let req = parse_head(b"GET http://example.com:8080/a?b=1 HTTP/1.1\r\nHost: example.com\r\nProxy-Connection: keep-alive\r\n\r\n").unwrap();
        assert_eq!(
            (req.host.as_str(), req.port, req.tunnel),
            ("example.com", 8080, false)
        );
        assert_eq!(
            String::from_utf8(req.upstream_head).unwrap(),
            "GET /a?b=1 HTTP/1.1\r\nHost: example.com\r\n\r\n"
        );
        let req = parse_head(b"GET http://Example.COM?x HTTP/1.0\r\n\r\n").unwrap();
        assert_eq!((req.host.as_str(), req.port), ("example.com", 80));
        assert!(
            String::from_utf8(req.upstream_head)
                .unwrap()
                .starts_with("GET /?x HTTP/1.0\r\n")
        );
        let req = parse_head(b"CONNECT [::1]:443 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(
            (req.host.as_str(), req.port, req.tunnel),
            ("::1", 443, true)
        );
        for (bad, says) in [
            (
                &b"CONNECT example.com HTTP/1.1\r\n\r\n"[..],
                "names no port",
            ),
            (b"GET https://x/ HTTP/1.1\r\n\r\n", "use CONNECT"),
            (b"GET /local HTTP/1.1\r\n\r\n", "absolute http://"),
            (b"GET http://u:p@x/ HTTP/1.1\r\n\r\n", "credentials"),
            (b"CONNECT x:0 HTTP/1.1\r\n\r\n", "not a port"),
            (b"CONNECT x:99999 HTTP/1.1\r\n\r\n", "not a port"),
            (b"CONNECT a/b:1 HTTP/1.1\r\n\r\n", "not a host name"),
            (b"hello\r\n\r\n", "not an HTTP request line"),
            (b"GET http://x/ SPDY/3\r\n\r\n", "unsupported protocol"),
            (
                b"GET http://x/ HTTP/1.1\r\nHost: x\r\n",
                "does not end with a blank line",
            ),
            (
                b"GET http://x/ HTTP/1.1\r\n\r\nGET http://y/ HTTP/1.1\r\n\r\n",
                "more than one",
            ),
            (
                b"GET http://x/ HTTP/1.1\r\nno colon\r\n\r\n",
                "not a header line",
            ),
        ] {
            let err = parse_head(bad).unwrap_err();
            assert!(err.contains(says), "{err}");
        }
    }

    #[test]
    fn patterns_match_hosts_and_subdomains_only() {
        assert!(host_matches("*", "anything.example"));
        assert!(host_matches("API.github.com", "api.GITHUB.com"));
        assert!(host_matches("*.github.com", "api.github.com"));
        assert!(!host_matches("*.github.com", "github.com"));
        assert!(!host_matches("*.github.com", "evilgithub.com"));
        assert!(!host_matches("github.com", "api.github.com"));
        assert!(check_pattern("*.example.com").is_ok());
        assert!(check_pattern("10.0.0.5").is_ok());
        assert!(check_pattern("https://x").is_err());
        assert!(check_pattern("a*b").is_err());
        assert!(check_pattern("").is_err());
    }

    #[test]
    fn local_addresses_are_recognised() {
        for local in [
            "127.0.0.1",
            "127.9.9.9",
            "::1",
            "0.0.0.0",
            "169.254.169.254",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_local(local.parse().unwrap()), "{local}");
        }
        for public in ["93.184.216.34", "10.0.0.1", "2606:4700::1111"] {
            assert!(!is_local(public.parse().unwrap()), "{public}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_parse_or_fail_without_panicking(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
            let _ = parse_head(&bytes);
        }

        #[test]
        fn a_parsed_plain_request_keeps_one_blank_line(path in "[a-z/]{0,20}", header in "[a-z]{1,8}") {
            let head = format!("GET http://h.example/{path} HTTP/1.1\r\n{header}: v\r\n\r\n");
            let req = parse_head(head.as_bytes()).unwrap();
            let up = String::from_utf8(req.upstream_head).unwrap();
            proptest::prop_assert!(up.ends_with("v\r\n\r\n"));
            proptest::prop_assert_eq!(up.matches("\r\n\r\n").count(), 1);
        }
    }
}
