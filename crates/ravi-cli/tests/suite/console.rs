//! The operator console through the real binary: `ravi serve --http --auth keys --console` on a
//! SQLite store, `ravi run --approve queue` scripts blocking on it, and a run left in doubt by
//! a crash. The browser part (`tests/console/e2e.cjs`) runs in headless Chromium with
//! Playwright; the HTTP checks a browser cannot make (hosts, origins, bearer tokens) run here.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use ravi_test_support::{mcp, text};
use serde_json::Value;

use super::gateway::serving;

/// Line 1 is a Critical call whose arguments hold markup that must stay text.
const APPROVE: &str = "r = shell(command='echo \"<script>window.__xss=1</script><img src=x onerror=window.__xss=2>\" > page.html')\n\
                       print('exit', r['exit_code'])\n";
const DENY: &str = "try:\n    shell(command='rm -rf build')\n    print('ran')\n\
                    except ToolDenied as e:\n    print('DENIED', e)\n";
const ALWAYS: &str = "big = read_file(path='big.txt')\n\
                      write_file(path='copy.txt', content=big)\n\
                      write_file(path='b.txt', content='two')\n\
                      print(read_file(path='b.txt'))\n";
const IN_DOUBT: &str = "shell(command='echo once >> counter.txt')\n";

struct Case {
    dir: tempfile::TempDir,
    store: String,
}

impl Case {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        for (name, body) in [
            ("approve.py", APPROVE),
            ("deny.py", DENY),
            ("always.py", ALWAYS),
            ("indoubt.py", IN_DOUBT),
        ] {
            std::fs::write(dir.path().join(name), body).unwrap();
        }
        // Large enough to be kept as an artifact, which the run's page offers for download.
        std::fs::write(
            dir.path().join("big.txt"),
            "0123456789abcdef\n".repeat(40_000),
        )
        .unwrap();
        let store = format!("sqlite:{}", dir.path().join("ravi.db").display());
        Self { dir, store }
    }

    fn ws(&self) -> &Path {
        self.dir.path()
    }

    fn ravi(&self, args: &[&str], failpoints: Option<&str>) -> std::process::Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ravi"));
        cmd.args(args)
            .args(["--store", &self.store])
            .env("XDG_STATE_HOME", self.ws().join(".state"))
            .current_dir(self.ws())
            .stdin(Stdio::null());
        if let Some(f) = failpoints {
            cmd.env("FAILPOINTS", f);
        }
        cmd.output().unwrap()
    }

    fn key(&self, name: &str) -> String {
        let out = self.ravi(&["keys", "create", name, "--json"], None);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["secret"].as_str().unwrap().to_owned()
    }

    /// A run whose Critical, non-idempotent call was running when the process died, then
    /// resumed: the call is in doubt.
    fn in_doubt_run(&self) -> String {
        let out = self.ravi(
            &["run", "indoubt.py", "--approve", "all"],
            Some("call.after_start=return"),
        );
        assert!(
            text(&out.stderr).contains("RAVI_CRASH_POINT"),
            "the run did not crash: {}",
            text(&out.stderr)
        );
        let list = self.ravi(&["runs", "list", "--json"], None);
        let runs: Value = serde_json::from_slice(&list.stdout).unwrap();
        let id = runs[0]["id"].as_str().unwrap().to_owned();
        let _ = self.ravi(&["runs", "resume", &id, "--approve", "all"], None);
        id
    }
}

#[test]
fn operators_decide_approvals_and_read_runs_in_the_browser() {
    if !mcp::browser_ready("the console's browser test") {
        return;
    }
    let case = Case::new();
    let alice = case.key("alice");
    let bob = case.key("bob");
    let in_doubt = case.in_doubt_run();

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ravi"));
    cmd.args([
        "serve",
        "--http",
        "127.0.0.1:0",
        "--auth",
        "keys",
        "--console",
    ])
    .args(["--console-operator", "key:alice", "--store", &case.store])
    .env("XDG_STATE_HOME", case.ws().join(".state"))
    .current_dir(case.ws())
    .stdout(Stdio::null());
    let (_served, port, _) = serving(cmd);
    let url = format!("http://127.0.0.1:{port}");

    http_checks(&url, &alice, &bob);

    // Screenshots go to docs/ when asked (RAVI_CONSOLE_SHOTS=1), else next to the test's files.
    let shots: PathBuf = if std::env::var("RAVI_CONSOLE_SHOTS").is_ok_and(|v| v == "1") {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/images")
    } else {
        case.ws().join("shots")
    };
    std::fs::create_dir_all(&shots).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/console/e2e.cjs");
    let out = Command::new(mcp::node())
        .arg(&script)
        .env("NODE_PATH", mcp::playwright_modules())
        .env("CHROMIUM", mcp::CHROMIUM)
        .env("CONSOLE_URL", &url)
        .env("KEY_ALICE", &alice)
        .env("KEY_BOB", &bob)
        .env("RAVI_BIN", env!("CARGO_BIN_EXE_ravi"))
        .env("RAVI_STORE_URL", &case.store)
        .env("WORKSPACE", case.ws())
        .env("IN_DOUBT_RUN", &in_doubt)
        .env("SHOTS_DIR", &shots)
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "the browser scenario failed:\n{stdout}\n{}",
        text(&out.stderr)
    );
    eprintln!("console e2e: {}", stdout.trim());
    assert!(shots.join("console-inbox.png").exists());
    // The scripts' effects: the approved command ran once, the denied one never.
    let page = std::fs::read_to_string(case.ws().join("page.html")).unwrap();
    assert!(page.contains("<script>window.__xss=1</script>"), "{page}");
    assert_eq!(
        std::fs::read_to_string(case.ws().join("b.txt")).unwrap(),
        "two"
    );
    assert_eq!(
        std::fs::read(case.ws().join("copy.txt")).unwrap(),
        std::fs::read(case.ws().join("big.txt")).unwrap(),
        "the approved copy of the artifact is exact"
    );
}

/// What a browser cannot be made to do: requests with a foreign `Host` or `Origin`, bearer
/// tokens, a body that is not a decision.
fn http_checks(url: &str, alice: &str, bob: &str) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let http = reqwest::Client::new();
        let get = |path: &str| http.get(format!("{url}{path}"));
        // The page carries a strict CSP and no inline script.
        let page = get("/console/").send().await.unwrap();
        let csp = page.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(
            csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"),
            "{csp}"
        );
        let html = page.text().await.unwrap();
        assert!(
            !html.contains("<script>") && !html.contains("style="),
            "{html}"
        );
        // DNS rebinding: another Host is refused.
        let r = get("/console/")
            .header("host", "evil.example")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403);
        // No credentials: 401; a non-operator's key: 403; an operator's: the data.
        assert_eq!(get("/console/api/runs").send().await.unwrap().status(), 401);
        let r = get("/console/api/runs")
            .bearer_auth(bob)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403);
        let r = get("/console/api/runs")
            .bearer_auth(alice)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let runs: Value = r.json().await.unwrap();
        assert!(runs.as_array().is_some_and(|a| !a.is_empty()), "{runs}");
        let r = get("/console/api/runs?limit=0")
            .bearer_auth(alice)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400);
        assert!(r.text().await.unwrap().contains("`limit`"));
        // Sign-in from another site's page is refused before the key is looked at.
        let r = http
            .post(format!("{url}/console/api/login"))
            .header("origin", "http://evil.example")
            .json(&serde_json::json!({"token": alice}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403);
        // A wrong key: 401, the key not echoed.
        let r = http
            .post(format!("{url}/console/api/login"))
            .header("origin", url)
            .json(&serde_json::json!({"token": "ravi_not_a_key"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401);
        assert!(!r.text().await.unwrap().contains("ravi_not_a_key"));
        // A decision on no approval, and a body that is not a decision.
        let r = http
            .post(format!("{url}/console/api/approvals/apr_missing"))
            .bearer_auth(alice)
            .json(&serde_json::json!({"approve": true, "digest": "x"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404);
        let r = http
            .post(format!("{url}/console/api/approvals/apr_missing"))
            .bearer_auth(alice)
            .json(&serde_json::json!({"approve": "yes"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 422);
        assert!(r.text().await.unwrap().contains("approve"));
    });
}

/// With `--auth jwt`, operators sign in with an access token: by the default operator group
/// or scope; a token with neither gets no session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_sign_in_with_access_tokens() {
    use super::gateway::{Jwks, fixture, now, token};
    let jwks = Jwks::serve(&fixture("jwks-a.json"));
    let case = Case::new();
    let config = case.ws().join("ravi.toml");
    std::fs::write(
        &config,
        format!(
            "[auth.jwt]\nissuer = \"https://idp.test\"\nresource = \"https://tools.test/mcp\"\n\
             jwks_url = \"{}\"\n",
            jwks.url
        ),
    )
    .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ravi"));
    cmd.args([
        "serve",
        "--http",
        "127.0.0.1:0",
        "--auth",
        "jwt",
        "--console",
    ])
    .args(["--store", &case.store, "--config"])
    .arg(&config)
    .env("XDG_STATE_HOME", case.ws().join(".state"))
    .current_dir(case.ws())
    .stdout(Stdio::null());
    let (_served, port, _) = serving(cmd);
    let url = format!("http://127.0.0.1:{port}");
    let t = now();
    let claims = |extra: Value| {
        let mut c = serde_json::json!({"iss": "https://idp.test", "aud": "https://tools.test/mcp",
            "exp": t + 600, "iat": t});
        c.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        c
    };
    let http = reqwest::Client::new();
    let login = |tok: String| {
        http.post(format!("{url}/console/api/login"))
            .header("origin", url.as_str())
            .json(&serde_json::json!({"token": tok}))
            .send()
    };
    let ops = token(
        "rsa-a",
        "a",
        &claims(serde_json::json!({"sub": "olga", "groups": ["operator"]})),
    );
    let r = login(ops.clone()).await.unwrap();
    assert_eq!(r.status(), 200);
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cookie.starts_with("ravi_console=") && cookie.contains("HttpOnly"),
        "{cookie}"
    );
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["principal"], "olga");
    // The session works; the same token works as a bearer for scripts.
    let session = cookie.split(';').next().unwrap().to_owned();
    let r = http
        .get(format!("{url}/console/api/session"))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = http
        .get(format!("{url}/console/api/approvals"))
        .bearer_auth(&ops)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // By scope.
    let scoped = token(
        "rsa-a",
        "a",
        &claims(serde_json::json!({"sub": "sam", "scope": "mcp ravi.operator"})),
    );
    assert_eq!(login(scoped).await.unwrap().status(), 200);
    // Neither: 403, no cookie.
    let plain = token(
        "rsa-a",
        "a",
        &claims(serde_json::json!({"sub": "pat", "scope": "mcp"})),
    );
    let r = login(plain).await.unwrap();
    assert_eq!(r.status(), 403);
    assert!(r.headers().get("set-cookie").is_none());
    assert!(r.text().await.unwrap().contains("`pat` is not an operator"));
    // An expired token: 401.
    let old = token(
        "rsa-a",
        "a",
        &claims(serde_json::json!({"sub": "olga", "groups": ["operator"], "exp": t - 3600})),
    );
    assert_eq!(login(old).await.unwrap().status(), 401);
    // Signing out ends the session.
    let r = http
        .post(format!("{url}/console/api/logout"))
        .header("cookie", &session)
        .header("origin", url.as_str())
        .header("x-csrf-token", body["csrf"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = http
        .get(format!("{url}/console/api/session"))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
}
