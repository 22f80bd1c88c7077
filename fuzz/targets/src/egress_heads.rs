use ravi_confine::egress::{MAX_HEAD, host_matches, parse_head};

/// The egress proxy's request-head parser on the bytes a confined process sends it: never a
/// panic; a parsed destination has a non-zero port and a lowercase host of host-name
/// characters that matches itself as a pattern; a plain HTTP request is forwarded with an
/// origin-form target, ending in exactly one blank line and carrying no `Proxy-*` header.
pub fn egress_heads(data: &[u8]) {
    if data.len() > MAX_HEAD {
        return;
    }
    let Ok(req) = parse_head(data) else {
        return;
    };
    assert_ne!(req.port, 0, "port 0 accepted");
    assert!(!req.host.is_empty(), "an empty host accepted");
    assert_eq!(req.host, req.host.to_ascii_lowercase());
    assert!(
        req.host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._:".contains(&b)),
        "host {:?}",
        req.host
    );
    assert!(host_matches(&req.host, &req.host));
    if req.tunnel {
        assert!(req.upstream_head.is_empty());
        return;
    }
    let head = String::from_utf8(req.upstream_head).expect("a UTF-8 head stays UTF-8");
    let first = head.split("\r\n").next().unwrap_or_default();
    let target = first.split(' ').nth(1).unwrap_or_default();
    assert!(
        target.starts_with('/'),
        "target {target:?} is not origin-form"
    );
    assert!(head.ends_with("\r\n\r\n"), "{head:?}");
    assert!(!head[..head.len() - 4].contains("\r\n\r\n"), "{head:?}");
    assert!(
        !head
            .split("\r\n")
            .any(|l| l.to_ascii_lowercase().starts_with("proxy-")),
        "{head:?}"
    );
}
