//! Secrets a model can use but never see, through `ravi run`: `${secret:NAME}` in a call's
//! arguments reaches the granted tool and host only; the script, the trace, `ravi runs show`
//! and every byte of the store hold the placeholder; an echo of the value (plain, base64,
//! URL-encoded, hex) comes back scrubbed; a call to a tool or host outside the grant is refused.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use ravi_test_support::text;
use serde_json::Value;

const VALUE: &str = "tok_9f8e7d6c5b4a3210-very/secret+value";

/// A local HTTP server that records each request line and answers with the `token` query
/// parameter echoed back in several encodings.
fn echo_server() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming().map_while(Result::ok) {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap() == 0 || h == "\r\n" {
                    break;
                }
            }
            log.lock().unwrap().push(line.clone());
            let query = line
                .split('?')
                .nth(1)
                .unwrap_or("")
                .split(' ')
                .next()
                .unwrap_or("");
            let token = query.strip_prefix("token=").unwrap_or("");
            let decoded = token.replace("%2F", "/").replace("%2B", "+");
            let b64 = base64::engine::general_purpose::STANDARD.encode(&decoded);
            let hex: String = decoded.bytes().map(|b| format!("{b:02x}")).collect();
            let body = format!("plain={decoded}\nbase64={b64}\nurl={token}\nhex={hex}\n");
            let mut out = stream;
            let _ = write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (port, seen)
}

#[test]
fn a_granted_secret_reaches_only_its_host_and_never_the_script_or_the_store() {
    let (port, seen) = echo_server();
    let ws = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let config = ws.path().join("ravi.toml");
    std::fs::write(
        &config,
        "[http]\nallow_hosts = [\"127.0.0.1\"]\n\n\
         [secrets.RAVI_TEST_API_TOKEN]\ntools = [\"http_get\"]\nhosts = [\"127.0.0.1\"]\n",
    )
    .unwrap();
    let db = state.path().join("ravi.db");
    let store = format!("sqlite:{}", db.display());
    let script = format!(
        "r = http_get(url='http://127.0.0.1:{port}/echo?token=${{secret:RAVI_TEST_API_TOKEN}}')\n\
         print(r)\n\
         try:\n    shell(command='echo ${{secret:RAVI_TEST_API_TOKEN}}')\nexcept ToolError as e:\n    print('shell:', e.message)\n\
         try:\n    http_get(url='http://localhost:{port}/?token=${{secret:RAVI_TEST_API_TOKEN}}')\nexcept ToolError as e:\n    print('other host:', e.message)\n"
    );
    let out = crate::ravi()
        .args([
            "run",
            "-",
            "--json",
            "--approve",
            "all",
            "--store",
            &store,
            "--workspace",
        ])
        .arg(ws.path())
        .arg("--config")
        .arg(&config)
        .env("RAVI_TEST_API_TOKEN", VALUE)
        .env("XDG_STATE_HOME", state.path())
        .stdin(script.as_str())
        .output();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // The server received the real value, once: the other calls were refused before sending.
    let requests = seen.lock().unwrap().clone();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert!(
        requests[0].contains("token=tok_9f8e7d6c5b4a3210-very%2Fsecret%2Bvalue")
            || requests[0].contains(VALUE),
        "{requests:?}"
    );
    let stdout = text(&out.stdout);
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let printed = v["output_text"].as_str().unwrap();
    // The script sees the response's metadata, its URL scrubbed.
    assert!(
        printed.contains("/echo?token=[secret RAVI_TEST_API_TOKEN]"),
        "{printed}"
    );
    assert!(printed.contains("shell: the call passes ${secret:RAVI_TEST_API_TOKEN} to `shell`, which it is not granted to"), "{printed}");
    assert!(printed.contains("other host: the call passes ${secret:RAVI_TEST_API_TOKEN} to `http_get`, for the host localhost"), "{printed}");
    // Nothing the model, the script or an operator reads holds the value in any form.
    let forms = [
        VALUE.to_owned(),
        base64::engine::general_purpose::STANDARD.encode(VALUE),
        "tok_9f8e7d6c5b4a3210-very%2Fsecret%2Bvalue".to_owned(),
        VALUE
            .bytes()
            .map(|b| format!("{b:02x}"))
            .collect::<String>(),
    ];
    let run_id = v["run_id"].as_str().unwrap().to_owned();
    let shown = crate::ravi()
        .args(["runs", "show", &run_id, "--store", &store])
        .env("XDG_STATE_HOME", state.path())
        .output();
    assert_eq!(shown.status.code(), Some(0), "{}", text(&shown.stderr));
    let mut store_bytes = Vec::new();
    for entry in std::fs::read_dir(state.path())
        .unwrap()
        .map_while(Result::ok)
    {
        if entry.path().is_file() {
            store_bytes.extend(std::fs::read(entry.path()).unwrap());
        }
    }
    assert!(!store_bytes.is_empty());
    let store_text = String::from_utf8_lossy(&store_bytes);
    for form in &forms {
        assert!(!stdout.contains(form.as_str()), "stdout holds {form}");
        assert!(
            !text(&out.stderr).contains(form.as_str()),
            "stderr holds {form}"
        );
        assert!(
            !text(&shown.stdout).contains(form.as_str()),
            "runs show holds {form}"
        );
        assert!(
            !store_text.contains(form.as_str()),
            "the store holds {form}"
        );
    }
    assert!(store_text.contains("${secret:RAVI_TEST_API_TOKEN}"));

    // The whole body, as `ravi tools call` prints it: every echo of the value is scrubbed.
    let called = crate::ravi()
        .args(["tools", "call", "http_get", "--args"])
        .arg(format!(
            r#"{{"url": "http://127.0.0.1:{port}/echo?token=${{secret:RAVI_TEST_API_TOKEN}}"}}"#
        ))
        .arg("--config")
        .arg(&config)
        .env("RAVI_TEST_API_TOKEN", VALUE)
        .output();
    let body = text(&called.stdout);
    assert_eq!(
        called.status.code(),
        Some(0),
        "{body}{}",
        text(&called.stderr)
    );
    for line in ["plain=", "base64=", "url=", "hex="] {
        assert!(
            body.contains(&format!("{line}[secret RAVI_TEST_API_TOKEN]")),
            "{body}"
        );
    }
    for form in &forms {
        assert!(
            !body.contains(form.as_str()),
            "tools call printed {form}: {body}"
        );
    }
    assert_eq!(seen.lock().unwrap().len(), 2);
}
