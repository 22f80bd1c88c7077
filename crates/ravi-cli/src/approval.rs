//! Terminal approvals: `CliApprovalHandler` asks the person at the terminal whether a risky
//! call may run, showing the tool, its risk, why approval is needed and the arguments
//! pretty-printed, and accepts approve / deny / always-for-this-tool.
//!
//! Prompts go to stderr (or `/dev/tty`) so stdout stays clean for JSON output. One prompt is
//! shown at a time: concurrent requests wait their turn. The invoker bounds the wait: if
//! nobody answers before the request's deadline the call is denied, and an answer typed after
//! the deadline is discarded and said to be — it never approves anything, never records
//! "always", and is never taken as the answer to the next prompt. "Always" is remembered for
//! the handler's lifetime and never offered for Critical tools, which are asked about every
//! time.
//!
//! `--approve ask` uses it: `ravi serve --http` (on the terminal running the server), `ravi run`
//! (on `/dev/tty`), `ravi agent` and `ravi tools call`.

use std::collections::HashSet;
use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};

use ravi_agents::kernel::{
    ApprovalDecision, ApprovalHandler, ApprovalRequest, CallSource, HitlMode, ToolRisk, async_trait,
};

/// How many unreadable answers are tolerated before the request is denied.
const MAX_PROMPTS: usize = 3;

type Output = Arc<Mutex<Box<dyn Write + Send>>>;

/// Called with `true` before a prompt is shown and `false` once it is answered (a UI pauses
/// its spinner meanwhile).
type PromptHook = Arc<dyn Fn(bool) + Send + Sync>;

/// Decides without reading the terminal, saying so on the output.
#[derive(Debug, Clone)]
enum Unattended {
    /// Approve everything; the text says why (e.g. `--yes`).
    Approve(String),
    /// Deny everything; the text says why and what to do instead.
    Deny(String),
}

/// Asks on the terminal (or any reader/writer pair, for tests and scripted sessions).
#[derive(Clone)]
pub struct CliApprovalHandler {
    /// Held for a whole question and answer, so prompts never interleave and an answer is
    /// read by the prompt it belongs to.
    input: Arc<Mutex<Box<dyn BufRead + Send>>>,
    /// Taken briefly per write, so a notice can be printed while a prompt waits for input.
    output: Output,
    always: Arc<Mutex<HashSet<String>>>,
    on_prompt: Option<PromptHook>,
    unattended: Option<Unattended>,
}

impl std::fmt::Debug for CliApprovalHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CliApprovalHandler")
            .field("unattended", &self.unattended)
            .finish_non_exhaustive()
    }
}

impl CliApprovalHandler {
    /// Prompts on stderr and reads answers from stdin.
    pub fn terminal() -> Self {
        Self::with_io(std::io::BufReader::new(std::io::stdin()), std::io::stderr())
    }

    /// Prompts on and reads from the controlling terminal (`/dev/tty`), so the answers do not
    /// compete with data piped on stdin.
    pub fn tty() -> std::io::Result<Self> {
        let tty = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")?;
        let output = tty.try_clone()?;
        Ok(Self::with_io(std::io::BufReader::new(tty), output))
    }

    /// Prompts on `output` and reads answers from `input`.
    pub fn with_io(
        input: impl BufRead + Send + 'static,
        output: impl Write + Send + 'static,
    ) -> Self {
        Self {
            input: Arc::new(Mutex::new(Box::new(input))),
            output: Arc::new(Mutex::new(Box::new(output))),
            always: Arc::default(),
            on_prompt: None,
            unattended: None,
        }
    }

    /// Calls `hook(true)` before each prompt and `hook(false)` after it is answered.
    #[must_use]
    pub fn on_prompt(mut self, hook: impl Fn(bool) + Send + Sync + 'static) -> Self {
        self.on_prompt = Some(Arc::new(hook));
        self
    }

    /// Approves every request without asking, printing "approved `tool` (why)".
    #[must_use]
    pub fn approve_without_asking(mut self, why: impl Into<String>) -> Self {
        self.unattended = Some(Unattended::Approve(why.into()));
        self
    }

    /// Denies every request without asking, printing "`tool` needs approval (risk); why".
    #[must_use]
    pub fn deny_without_asking(mut self, why: impl Into<String>) -> Self {
        self.unattended = Some(Unattended::Deny(why.into()));
        self
    }

    /// Whether calls to `tool` are approved without asking.
    pub fn always_approves(&self, tool: &str) -> bool {
        self.always.lock().is_ok_and(|a| a.contains(tool))
    }

    fn say(&self, text: &str) {
        if let Ok(mut out) = self.output.lock() {
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        }
    }

    fn ask(&self, request: &ApprovalRequest) -> ApprovalDecision {
        let offer_always = request.risk != ToolRisk::Critical;
        let Ok(mut input) = self.input.lock() else {
            return ApprovalDecision::Denied;
        };
        // An earlier prompt may have held the terminal until after this request expired.
        if expired(request) {
            self.say(&format!(
                "approval for `{}` expired before it could be asked; denied\n",
                request.tool
            ));
            return ApprovalDecision::Denied;
        }
        let _prompting = Prompting::start(self.on_prompt.clone());
        self.say(&render(request, offer_always));
        for _ in 0..MAX_PROMPTS {
            self.say(&question(&request.tool, offer_always));
            let mut line = String::new();
            match input.read_line(&mut line) {
                Ok(0) | Err(_) => {
                    self.say("\nno answer; denied\n");
                    return ApprovalDecision::Denied;
                }
                Ok(_) => {}
            }
            // The invoker stopped waiting at the deadline and denied the call: whatever was
            // typed since cannot approve it (nor set "always").
            if expired(request) {
                self.say(&format!(
                    "answer ignored: the approval request for `{}` had already expired, so the \
                     call was denied\n",
                    request.tool
                ));
                return ApprovalDecision::Denied;
            }
            match parse(&line, offer_always) {
                Some(Answer::Approve) => return ApprovalDecision::Approved,
                Some(Answer::Deny) => return ApprovalDecision::Denied,
                Some(Answer::Always) => {
                    if let Ok(mut always) = self.always.lock() {
                        always.insert(request.tool.clone());
                    }
                    self.say(&format!(
                        "`{}` will run without asking from now on\n",
                        request.tool
                    ));
                    return ApprovalDecision::Approved;
                }
                None => self.say(&format!(
                    "please answer y, n{}\n",
                    if offer_always { " or a" } else { "" }
                )),
            }
        }
        self.say("no valid answer; denied\n");
        ApprovalDecision::Denied
    }
}

/// Whether the request's deadline has passed (compared in milliseconds since the epoch, so
/// this needs no date library of its own).
fn expired(request: &ApprovalRequest) -> bool {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, ravi_kernel::ms_i64);
    now_ms > request.deadline.timestamp_millis()
}

/// Tells the prompt hook a prompt started, and that it ended when dropped (on every path).
struct Prompting(Option<PromptHook>);

impl Prompting {
    fn start(hook: Option<PromptHook>) -> Self {
        if let Some(h) = &hook {
            h(true);
        }
        Self(hook)
    }
}

impl Drop for Prompting {
    fn drop(&mut self) {
        if let Some(h) = &self.0 {
            h(false);
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Approve,
    Deny,
    Always,
}

fn parse(line: &str, offer_always: bool) -> Option<Answer> {
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Some(Answer::Approve),
        // An empty answer is the safe default.
        "" | "n" | "no" => Some(Answer::Deny),
        "a" | "always" if offer_always => Some(Answer::Always),
        _ => None,
    }
}

/// " from a code-mode script, line N" for a script's call; nothing for a direct one.
fn from_script(request: &ApprovalRequest) -> String {
    if request.source == CallSource::CodeMode {
        format!(" from {}", request.origin())
    } else {
        String::new()
    }
}

fn render(request: &ApprovalRequest, offer_always: bool) -> String {
    let args = serde_json::to_string_pretty(&request.arguments)
        .unwrap_or_else(|_| request.arguments.to_string());
    let mut out = format!(
        "\n── approval needed ──────────────────────────\n\
         tool:   {}\n\
         risk:   {}\n\
         from:   {}\n\
         reason: {}\n\
         wait:   {} s, then {}\n\
         arguments:\n",
        request.tool,
        request.risk,
        request.origin(),
        request.reason,
        (request.deadline - request.created_at).num_seconds(),
        if request.hitl_mode == HitlMode::ContinueOnTimeout {
            "it runs"
        } else {
            "it is denied"
        }
    );
    for line in args.lines() {
        out.push_str("  ");
        out.push_str(line);
        out.push('\n');
    }
    out.push_str(&format!("digest: {}\n", request.args_digest));
    if !offer_always {
        out.push_str("(critical: asked every time)\n");
    }
    out
}

fn question(tool: &str, offer_always: bool) -> String {
    if offer_always {
        format!("approve? [y]es / [N]o / [a]lways for `{tool}`: ")
    } else {
        "approve? [y]es / [N]o: ".to_owned()
    }
}

#[async_trait]
impl ApprovalHandler for CliApprovalHandler {
    async fn request(&self, request: &ApprovalRequest) -> ApprovalDecision {
        match &self.unattended {
            Some(Unattended::Approve(why)) => {
                self.say(&format!(
                    "ravi: approved `{}`{} ({why})\n",
                    request.tool,
                    from_script(request)
                ));
                return ApprovalDecision::Approved;
            }
            Some(Unattended::Deny(why)) => {
                self.say(&format!(
                    "ravi: `{}`{} needs approval ({}); {why}\n",
                    request.tool,
                    from_script(request),
                    request.risk
                ));
                return ApprovalDecision::Denied;
            }
            None => {}
        }
        if request.risk != ToolRisk::Critical && self.always_approves(&request.tool) {
            return ApprovalDecision::Approved;
        }
        // Reading the terminal blocks; do it off the async threads so the invoker's approval
        // timeout can still fire. A read still blocked when the invoker gives up finishes
        // later, sees the request expired and discards what it read.
        let this = self.clone();
        let request = request.clone();
        tokio::task::spawn_blocking(move || this.ask(&request))
            .await
            .unwrap_or(ApprovalDecision::Denied)
    }

    async fn notify(&self, request: &ApprovalRequest) {
        self.say(&format!(
            "running `{}` (risk {}) without waiting for approval, arguments {}\n",
            request.tool, request.risk, request.arguments
        ));
    }

    /// Nobody is at a terminal that denies without asking: its denials are the policy's,
    /// and a `FireAndContinue` call is denied rather than run on an unread notice.
    fn attended(&self, _request: &ApprovalRequest) -> bool {
        !matches!(self.unattended, Some(Unattended::Deny(_)))
    }

    fn approver(&self, _request: &ApprovalRequest) -> String {
        "the person at the terminal".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ravi_agents::kernel::HitlMode;
    use serde_json::json;

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    impl Shared {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    fn request(tool: &str, risk: ToolRisk) -> ApprovalRequest {
        expiring(tool, risk, std::time::Duration::from_secs(3600))
    }

    /// A request whose deadline is `within` from now.
    fn expiring(tool: &str, risk: ToolRisk, within: std::time::Duration) -> ApprovalRequest {
        let args = json!({"to": "ops@example.com", "subject": "deploy"});
        let now = chrono::Utc::now();
        ApprovalRequest::new(
            "apr_1",
            &ravi_kernel::ToolCall::new("c1", tool, args),
            risk,
            HitlMode::Blocking,
            "risk high is above the policy's unapproved maximum (sensitive)",
            now,
            now + chrono::Duration::from_std(within).unwrap(),
        )
    }

    /// Input that arrives line by line when the test sends it, like a person typing.
    struct Typed(std::sync::mpsc::Receiver<String>, Vec<u8>);
    impl std::io::Read for Typed {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.1.is_empty() {
                match self.0.recv() {
                    Ok(line) => self.1 = line.into_bytes(),
                    Err(_) => return Ok(0),
                }
            }
            let n = buf.len().min(self.1.len());
            buf[..n].copy_from_slice(&self.1[..n]);
            self.1.drain(..n);
            Ok(n)
        }
    }

    async fn wait_for(out: &Shared, what: &str, times: usize) {
        let started = std::time::Instant::now();
        while out.text().matches(what).count() < times {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(5),
                "never printed {what:?} {times} times: {}",
                out.text()
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    fn handler(input: &str) -> (CliApprovalHandler, Shared) {
        let out = Shared::default();
        let h = CliApprovalHandler::with_io(
            std::io::Cursor::new(input.to_owned().into_bytes()),
            out.clone(),
        );
        (h, out)
    }

    #[tokio::test]
    async fn shows_tool_risk_and_pretty_arguments_then_approves() {
        let (h, out) = handler("y\n");
        assert_eq!(
            h.request(&request("send_email", ToolRisk::High)).await,
            ApprovalDecision::Approved
        );
        let text = out.text();
        assert!(
            text.contains("tool:   send_email\nrisk:   high\n"),
            "{text}"
        );
        assert!(text.contains("arguments:\n  {\n    \"subject\": \"deploy\",\n    \"to\": \"ops@example.com\"\n  }\n"), "{text}");
        assert!(text.contains("digest: sha256:"), "{text}");
        assert!(
            text.ends_with("approve? [y]es / [N]o / [a]lways for `send_email`: "),
            "{text}"
        );
    }

    #[tokio::test]
    async fn deny_empty_and_eof_all_deny() {
        for input in ["n\n", "\n", ""] {
            let (h, _) = handler(input);
            assert_eq!(
                h.request(&request("send_email", ToolRisk::High)).await,
                ApprovalDecision::Denied,
                "{input:?}"
            );
        }
    }

    #[tokio::test]
    async fn always_is_remembered_per_tool_but_never_for_critical() {
        let (h, out) = handler("a\n");
        assert_eq!(
            h.request(&request("send_email", ToolRisk::High)).await,
            ApprovalDecision::Approved
        );
        assert!(h.always_approves("send_email"));
        // No more input needed for the same tool.
        assert_eq!(
            h.request(&request("send_email", ToolRisk::High)).await,
            ApprovalDecision::Approved
        );
        assert!(!h.always_approves("delete_repo"));
        assert!(
            out.text()
                .contains("`send_email` will run without asking from now on")
        );

        let (h, out) = handler("a\na\nyes\n");
        assert_eq!(
            h.request(&request("delete_repo", ToolRisk::Critical)).await,
            ApprovalDecision::Approved
        );
        let text = out.text();
        assert!(text.contains("(critical: asked every time)"), "{text}");
        assert_eq!(text.matches("please answer y, n\n").count(), 2, "{text}");
        assert!(!h.always_approves("delete_repo"));
    }

    #[tokio::test]
    async fn too_many_bad_answers_deny() {
        let (h, out) = handler("maybe\nlater\nhmm\ny\n");
        assert_eq!(
            h.request(&request("send_email", ToolRisk::High)).await,
            ApprovalDecision::Denied
        );
        assert!(out.text().ends_with("no valid answer; denied\n"));
    }

    /// The invoker gave up on a request (its deadline passed); the person then types `a`. The
    /// late answer must not approve anything, must not set "always", and must not be taken as
    /// the answer to the next prompt.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_late_answer_is_ignored_and_never_recorded_as_always() {
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let out = Shared::default();
        let h = CliApprovalHandler::with_io(
            std::io::BufReader::new(Typed(rx, Vec::new())),
            out.clone(),
        );
        let first = expiring(
            "send_email",
            ToolRisk::High,
            std::time::Duration::from_millis(100),
        );
        // The invoker's bounded wait.
        let answer =
            tokio::time::timeout(std::time::Duration::from_millis(100), h.request(&first)).await;
        assert!(answer.is_err(), "nobody had answered yet");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        tx.send("a\n".into()).unwrap();
        wait_for(&out, "answer ignored", 1).await;
        assert!(
            out.text().contains(
                "answer ignored: the approval request for `send_email` had already expired, so \
                 the call was denied\n"
            ),
            "{}",
            out.text()
        );
        assert!(!h.always_approves("send_email"));

        // The next request is asked afresh and answered by what is typed for it.
        let second = request("send_email", ToolRisk::High);
        let h2 = h.clone();
        let pending = tokio::spawn(async move { h2.request(&second).await });
        wait_for(
            &out,
            "approve? [y]es / [N]o / [a]lways for `send_email`: ",
            2,
        )
        .await;
        tx.send("n\n".into()).unwrap();
        assert_eq!(pending.await.unwrap(), ApprovalDecision::Denied);
        assert!(!h.always_approves("send_email"));
    }

    #[tokio::test]
    async fn a_request_that_expired_while_waiting_its_turn_is_not_asked() {
        let (h, out) = handler("y\n");
        let stale = expiring("send_email", ToolRisk::High, std::time::Duration::ZERO);
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        assert_eq!(h.request(&stale).await, ApprovalDecision::Denied);
        assert_eq!(
            out.text(),
            "approval for `send_email` expired before it could be asked; denied\n"
        );
    }

    #[tokio::test]
    async fn unattended_modes_decide_without_reading_and_say_so() {
        let (h, out) = handler("");
        let h = h.approve_without_asking("--yes");
        assert_eq!(
            h.request(&request("send_email", ToolRisk::High)).await,
            ApprovalDecision::Approved
        );
        assert_eq!(out.text(), "ravi: approved `send_email` (--yes)\n");
        let (h, out) = handler("y\n");
        let h = h.deny_without_asking("no terminal to ask on, denied (use --yes to approve)");
        assert_eq!(
            h.request(&request("send_email", ToolRisk::High)).await,
            ApprovalDecision::Denied
        );
        assert_eq!(
            out.text(),
            "ravi: `send_email` needs approval (high); no terminal to ask on, denied (use --yes \
             to approve)\n"
        );
    }

    #[tokio::test]
    async fn the_prompt_hook_brackets_each_prompt() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let (h, _) = handler("y\nmaybe\n");
        let h = h.on_prompt(move |on| log.lock().unwrap().push(on));
        h.request(&request("send_email", ToolRisk::High)).await;
        h.request(&request("send_email", ToolRisk::High)).await; // EOF after a bad answer
        assert_eq!(*seen.lock().unwrap(), [true, false, true, false]);
    }
}
