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

    fn add(&mut self, name: &str, value: &str) {
        if value.len() >= MIN_REDACTED && !self.secrets.iter().any(|(_, v)| v == value) {
            self.secrets.push((name.to_owned(), value.to_owned()));
            self.secrets
                .sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
        }
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
}
