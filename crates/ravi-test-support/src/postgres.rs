//! A throwaway PostgreSQL server for tests: a cluster made with `initdb` in a temporary
//! directory, listening on a free port of 127.0.0.1, one per test process, stopped when the
//! process ends (even when it is killed: the server's supervisor waits on a pipe from it).
//!
//! PostgreSQL comes from the OS packages (`cargo xtask test` installs them when missing);
//! [`database`] fails with a message saying so when `initdb` is nowhere to be found. Running as
//! root, the server runs as the `postgres` user the package creates (PostgreSQL refuses root).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The server of this process.
struct Cluster {
    port: u16,
    /// Keeps the supervisor's stdin open; the server stops when it closes.
    _supervisor: Mutex<Child>,
    _dir: PathBuf,
}

static CLUSTER: OnceLock<Cluster> = OnceLock::new();

/// A fresh, empty database on this process's server, as a `postgres://` URL.
pub fn database() -> String {
    let cluster = CLUSTER.get_or_init(start);
    let name = format!(
        "t_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let out = psql(cluster.port, &format!("CREATE DATABASE {name}"));
    assert!(
        out.status.success(),
        "creating database {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    format!("postgres://postgres@127.0.0.1:{}/{name}", cluster.port)
}

static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// The directory of PostgreSQL's programs (`initdb`, `postgres`, `psql`).
pub fn bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|p| p.join("initdb").exists())
        .collect();
    versions.sort();
    versions.pop()
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `program args…` as the server's user.
fn as_server_user(bin: &Path, program: &str, root: bool) -> Command {
    if root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin.join(program));
        c
    } else {
        Command::new(bin.join(program))
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("finding a free port for PostgreSQL")
}

fn psql(port: u16, sql: &str) -> std::process::Output {
    let bin = bin_dir().expect("PostgreSQL's programs");
    Command::new(bin.join("psql"))
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-U",
            "postgres",
            "-d",
            "postgres",
        ])
        .args(["-v", "ON_ERROR_STOP=1", "-q", "-c", sql])
        .output()
        .expect("running psql")
}

fn start() -> Cluster {
    let bin = bin_dir().expect(
        "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb); `cargo xtask test` \
         installs it from the OS packages (apt-get install postgresql)",
    );
    let root = is_root();
    let dir = std::env::temp_dir().join(format!("ravi-pg-{}-{}", std::process::id(), free_port()));
    std::fs::create_dir_all(&dir).expect("creating the cluster directory");
    if root {
        let ok = Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "could not hand {} to the postgres user", dir.display());
    }
    let data = dir.join("data");
    let out = as_server_user(&bin, "initdb", root)
        .args(["-D"])
        .arg(&data)
        .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
        .output()
        .expect("running initdb");
    assert!(
        out.status.success(),
        "initdb failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let port = free_port();
    // The supervisor starts the server and stops it (fast shutdown) when its stdin closes,
    // which happens when this process ends, however it ends; then it removes the cluster.
    let script = format!(
        "'{postgres}' -D '{data}' -p {port} -k '{dir}' -c listen_addresses=127.0.0.1 \
         -c fsync=off -c max_connections=200 >'{dir}/log' 2>&1 & pid=$!; cat >/dev/null; \
         kill -INT $pid; wait $pid; rm -rf '{dir}'",
        postgres = bin.join("postgres").display(),
        data = data.display(),
        dir = dir.display(),
    );
    let mut supervisor = if root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--", "sh", "-c", &script]);
        c
    } else {
        let mut c = Command::new("sh");
        c.args(["-c", &script]);
        c
    };
    let supervisor = supervisor
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting PostgreSQL");
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        if psql(port, "SELECT 1").status.success() {
            break;
        }
        assert!(
            Instant::now() < until,
            "PostgreSQL did not start within 30 s: {}",
            std::fs::read_to_string(dir.join("log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Cluster {
        port,
        _supervisor: Mutex::new(supervisor),
        _dir: dir,
    }
}
