//! A throwaway S3-protocol server for tests: moto's server (`moto[server]` from PyPI, which
//! `cargo xtask test` installs into `~/.cache/ravi-services/moto`), on a free port of
//! 127.0.0.1, one per test process, stopped when the process ends (a supervisor shell waits
//! on a pipe from it, as for PostgreSQL). Each [`bucket`] is a fresh bucket on it.

use std::io::{Read as _, Write as _};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Credentials the tests use (moto accepts any).
pub const ACCESS_KEY: &str = "ravi-test";
/// See [`ACCESS_KEY`].
pub const SECRET_KEY: &str = "ravi-test-secret";

struct Server {
    port: u16,
    _supervisor: Mutex<Child>,
}

static SERVER: OnceLock<Server> = OnceLock::new();
static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Where `cargo xtask test` installs moto's server.
pub fn moto_server() -> PathBuf {
    std::env::var_os("RAVI_MOTO_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/ravi-services/moto/bin/moto_server")
        })
}

/// True when the S3 server is installed; otherwise prints why `what` is skipped, or panics
/// when the test services are required (`RAVI_REQUIRE_MCP_HARNESS`, as `cargo xtask test`
/// sets it).
pub fn ready(what: &str) -> bool {
    if moto_server().exists() {
        return true;
    }
    assert!(
        !crate::mcp::harness_required(),
        "{what}: {} is missing; `cargo xtask test` installs it",
        moto_server().display()
    );
    eprintln!("SKIP {what}: {} is missing", moto_server().display());
    false
}

/// The server's endpoint, `http://127.0.0.1:PORT`.
pub fn endpoint() -> String {
    format!("http://127.0.0.1:{}", SERVER.get_or_init(start).port)
}

/// A fresh bucket on this process's server; returns the `s3://` URL that
/// `ravi-blobs-s3` and `ravi --blobs` take (credentials: set [`env()`] first).
pub fn bucket() -> String {
    let port = SERVER.get_or_init(start).port;
    let name = format!(
        "t{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let status = http(port, "PUT", &format!("/{name}"));
    assert!(status == 200, "creating bucket {name}: HTTP {status}");
    format!("s3://{name}/ravi?endpoint=http://127.0.0.1:{port}&region=us-east-1&allow_http=true")
}

/// The environment a process needs to reach the server: credentials and region.
pub fn env() -> [(&'static str, &'static str); 3] {
    [
        ("AWS_ACCESS_KEY_ID", ACCESS_KEY),
        ("AWS_SECRET_ACCESS_KEY", SECRET_KEY),
        ("AWS_REGION", "us-east-1"),
    ]
}

/// One plain HTTP request; the status code.
fn http(port: u16, method: &str, path: &str) -> u16 {
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return 0;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    if s.write_all(req.as_bytes()).is_err() {
        return 0;
    }
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    String::from_utf8_lossy(&buf)
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

fn start() -> Server {
    let bin = moto_server();
    assert!(
        bin.exists(),
        "the S3 test server is not installed ({}); `cargo xtask test` installs it (pip install \
         'moto[server]' in ~/.cache/ravi-services/moto)",
        bin.display()
    );
    let port = crate::mcp::free_port();
    let log = std::env::temp_dir().join(format!("ravi-s3-{}-{port}.log", std::process::id()));
    let script = format!(
        "'{bin}' -H 127.0.0.1 -p {port} >'{log}' 2>&1 & pid=$!; cat >/dev/null; kill $pid; \
         wait $pid; rm -f '{log}'",
        bin = bin.display(),
        log = log.display(),
    );
    let supervisor = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting the S3 test server");
    let until = Instant::now() + Duration::from_secs(30);
    while http(port, "GET", "/") == 0 {
        assert!(
            Instant::now() < until,
            "the S3 test server did not start within 30 s: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Server {
        port,
        _supervisor: Mutex::new(supervisor),
    }
}
