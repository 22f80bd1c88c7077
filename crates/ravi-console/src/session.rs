//! Console sign-in: sessions behind an `HttpOnly`, `SameSite=Strict` cookie, each with its own
//! CSRF token, plus the `Host` and `Origin` checks every console request passes.
//!
//! The cookie and header handling is a few lines over `http`'s types (one cookie, one
//! attribute set); a cookie crate would add a dependency for nothing this needs.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use base64::Engine as _;
use http::HeaderMap;
use rand::Rng as _;
use ravi_kernel::Principal;

/// The session cookie's name.
pub(super) const COOKIE: &str = "ravi_console";
/// Sessions kept at most (the oldest expire first when more sign in).
const MAX_SESSIONS: usize = 10_000;

/// A signed-in operator.
#[derive(Debug, Clone)]
pub(super) struct Session {
    pub principal: Principal,
    pub csrf: String,
    pub expires: Instant,
}

/// The live sessions, by cookie value.
#[derive(Debug, Default)]
pub(super) struct Sessions {
    by_token: Mutex<HashMap<String, Session>>,
}

/// 32 random bytes, base64url: a session token or a CSRF token.
fn token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

impl Sessions {
    /// Starts a session for `principal`; returns its cookie value and the session.
    pub fn start(&self, principal: Principal) -> (String, Session) {
        let session = Session {
            principal,
            csrf: token(),
            expires: Instant::now() + crate::SESSION_TTL,
        };
        let cookie = token();
        if let Ok(mut map) = self.by_token.lock() {
            let now = Instant::now();
            map.retain(|_, s| s.expires > now);
            if map.len() >= MAX_SESSIONS
                && let Some(oldest) = map
                    .iter()
                    .min_by_key(|(_, s)| s.expires)
                    .map(|(k, _)| k.clone())
            {
                map.remove(&oldest);
            }
            map.insert(cookie.clone(), session.clone());
        }
        (cookie, session)
    }

    /// The unexpired session of this cookie value.
    pub fn get(&self, cookie: &str) -> Option<Session> {
        let map = self.by_token.lock().ok()?;
        map.get(cookie)
            .filter(|s| s.expires > Instant::now())
            .cloned()
    }

    /// Ends the session of this cookie value.
    pub fn end(&self, cookie: &str) {
        if let Ok(mut map) = self.by_token.lock() {
            map.remove(cookie);
        }
    }
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub(super) fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim_matches('"').to_owned())
}

/// The `Set-Cookie` value that stores `value` (or, with `None`, clears the cookie).
pub(super) fn set_cookie(value: Option<&str>, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    match value {
        Some(v) => format!(
            "{COOKIE}={v}; Path={}; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
            crate::CONSOLE_PATH,
            crate::SESSION_TTL.as_secs()
        ),
        None => format!(
            "{COOKIE}=; Path={}; HttpOnly; SameSite=Strict; Max-Age=0{secure}",
            crate::CONSOLE_PATH
        ),
    }
}

/// The request's `Host` without its port (`[::1]` keeps its brackets).
fn host_name(host: &str) -> &str {
    if host.starts_with('[') {
        return host
            .split_once(']')
            .map_or(host, |(h, _)| &host[..=h.len()]);
    }
    host.rsplit_once(':').map_or(host, |(h, _)| h)
}

/// Whether the `Host` header names an accepted host.
pub(super) fn host_allowed(headers: &HeaderMap, allowed: &[String]) -> bool {
    let Some(host) = headers
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
    else {
        return false;
    };
    let name = host_name(host);
    allowed
        .iter()
        .any(|a| a.eq_ignore_ascii_case(name) || a.eq_ignore_ascii_case(host))
}

/// Whether the request's `Origin` is the console's own (same scheme-less host and port as
/// `Host`) or matches one of `allowed` (`http://localhost:*` matches any port). A state
/// change without `Origin` is refused: every browser sends it on a `POST`.
pub(super) fn origin_allowed(headers: &HeaderMap, allowed: &[String]) -> bool {
    let (Some(origin), Some(host)) = (
        headers
            .get(http::header::ORIGIN)
            .and_then(|h| h.to_str().ok()),
        headers
            .get(http::header::HOST)
            .and_then(|h| h.to_str().ok()),
    ) else {
        return false;
    };
    let own = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .is_some_and(|rest| rest.eq_ignore_ascii_case(host));
    own || allowed
        .iter()
        .any(|pattern| match pattern.strip_suffix(":*") {
            Some(prefix) => origin.strip_prefix(prefix).is_some_and(|rest| {
                rest.is_empty()
                    || rest
                        .strip_prefix(':')
                        .is_some_and(|p| p.chars().all(|c| c.is_ascii_digit()))
            }),
            None => pattern == origin,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn the_session_cookie_is_found_among_others() {
        let h = headers(&[("cookie", "a=1; ravi_console=tok; b=2")]);
        assert_eq!(cookie(&h, COOKIE).as_deref(), Some("tok"));
        assert_eq!(
            cookie(&headers(&[("cookie", "ravi_consolex=1")]), COOKIE),
            None
        );
        let set = set_cookie(Some("v"), false);
        assert!(
            set.contains("HttpOnly") && set.contains("SameSite=Strict"),
            "{set}"
        );
        assert!(set_cookie(Some("v"), true).ends_with("; Secure"));
    }

    #[test]
    fn hosts_and_origins_are_checked() {
        let allowed = vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "[::1]".to_owned(),
        ];
        assert!(host_allowed(
            &headers(&[("host", "127.0.0.1:8765")]),
            &allowed
        ));
        assert!(host_allowed(&headers(&[("host", "[::1]:8765")]), &allowed));
        assert!(!host_allowed(
            &headers(&[("host", "evil.example:8765")]),
            &allowed
        ));
        assert!(!host_allowed(&HeaderMap::new(), &allowed));
        let origins = vec!["http://localhost:*".to_owned()];
        let same = headers(&[
            ("host", "127.0.0.1:8765"),
            ("origin", "http://127.0.0.1:8765"),
        ]);
        assert!(origin_allowed(&same, &origins));
        let other = headers(&[
            ("host", "127.0.0.1:8765"),
            ("origin", "http://evil.example"),
        ]);
        assert!(!origin_allowed(&other, &origins));
        let pattern = headers(&[
            ("host", "127.0.0.1:8765"),
            ("origin", "http://localhost:3000"),
        ]);
        assert!(origin_allowed(&pattern, &origins));
        let tricky = headers(&[
            ("host", "127.0.0.1:8765"),
            ("origin", "http://localhost:3000.evil"),
        ]);
        assert!(!origin_allowed(&tricky, &origins));
        assert!(!origin_allowed(
            &headers(&[("host", "127.0.0.1:8765")]),
            &origins
        ));
    }

    #[test]
    fn sessions_start_resolve_and_end() {
        let s = Sessions::default();
        let (cookie, session) = s.start(Principal::new("key:alice"));
        assert_eq!(s.get(&cookie).unwrap().csrf, session.csrf);
        assert_ne!(cookie, session.csrf);
        s.end(&cookie);
        assert!(s.get(&cookie).is_none());
    }
}
