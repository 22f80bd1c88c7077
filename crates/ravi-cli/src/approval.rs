//! Terminal approvals: `CliApprovalHandler` asks the person at the terminal whether a risky
//! call may run, showing the tool, its risk, why approval is needed and the arguments
//! pretty-printed, and accepts approve / deny / always-for-this-tool.
//!
//! Prompts go to stderr so stdout stays clean for JSON output. The invoker bounds the wait:
//! if nobody answers within the approval timeout the call is denied, and a late answer is
//! discarded. "Always" is remembered for the handler's lifetime and never offered for
//! Critical tools, which are asked about every time.

// `ravi serve --approve terminal` uses it; `with_io` and `always_approves` serve the tests.
#![allow(dead_code)]

use std::collections::HashSet;
use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};

use ravi_agents::kernel::{
    ApprovalDecision, ApprovalHandler, ApprovalRequest, ToolRisk, async_trait,
};

/// How many unreadable answers are tolerated before the request is denied.
const MAX_PROMPTS: usize = 3;

type Io = (Box<dyn BufRead + Send>, Box<dyn Write + Send>);

/// Asks on the terminal (or any reader/writer pair, for tests and scripted sessions).
#[derive(Clone)]
pub struct CliApprovalHandler {
    io: Arc<Mutex<Io>>,
    always: Arc<Mutex<HashSet<String>>>,
}

impl std::fmt::Debug for CliApprovalHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CliApprovalHandler").finish_non_exhaustive()
    }
}

impl CliApprovalHandler {
    /// Prompts on stderr and reads answers from stdin.
    pub fn terminal() -> Self {
        Self::with_io(std::io::BufReader::new(std::io::stdin()), std::io::stderr())
    }

    /// Prompts on `output` and reads answers from `input`.
    pub fn with_io(
        input: impl BufRead + Send + 'static,
        output: impl Write + Send + 'static,
    ) -> Self {
        Self {
            io: Arc::new(Mutex::new((Box::new(input), Box::new(output)))),
            always: Arc::default(),
        }
    }

    /// Whether calls to `tool` are approved without asking.
    pub fn always_approves(&self, tool: &str) -> bool {
        self.always.lock().is_ok_and(|a| a.contains(tool))
    }

    fn ask(&self, request: &ApprovalRequest) -> ApprovalDecision {
        let offer_always = request.risk != ToolRisk::Critical;
        let Ok(mut io) = self.io.lock() else {
            return ApprovalDecision::Denied;
        };
        let (input, output) = &mut *io;
        let _ = output.write_all(render(request, offer_always).as_bytes());
        for _ in 0..MAX_PROMPTS {
            let _ = output.write_all(question(&request.tool, offer_always).as_bytes());
            let _ = output.flush();
            let mut line = String::new();
            match input.read_line(&mut line) {
                Ok(0) | Err(_) => {
                    let _ = writeln!(output, "\nno answer; denied");
                    return ApprovalDecision::Denied;
                }
                Ok(_) => {}
            }
            match parse(&line, offer_always) {
                Some(Answer::Approve) => return ApprovalDecision::Approved,
                Some(Answer::Deny) => return ApprovalDecision::Denied,
                Some(Answer::Always) => {
                    if let Ok(mut always) = self.always.lock() {
                        always.insert(request.tool.clone());
                    }
                    let _ = writeln!(
                        output,
                        "`{}` will run without asking from now on",
                        request.tool
                    );
                    return ApprovalDecision::Approved;
                }
                None => {
                    let _ = writeln!(
                        output,
                        "please answer y, n{}",
                        if offer_always { " or a" } else { "" }
                    );
                }
            }
        }
        let _ = writeln!(output, "no valid answer; denied");
        ApprovalDecision::Denied
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

fn render(request: &ApprovalRequest, offer_always: bool) -> String {
    let args = serde_json::to_string_pretty(&request.arguments)
        .unwrap_or_else(|_| request.arguments.to_string());
    let mut out = format!(
        "\n── approval needed ──────────────────────────\n\
         tool:   {}\n\
         risk:   {}\n\
         reason: {}\n\
         arguments:\n",
        request.tool, request.risk, request.reason
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
        if request.risk != ToolRisk::Critical && self.always_approves(&request.tool) {
            return ApprovalDecision::Approved;
        }
        // Reading the terminal blocks; do it off the async threads so the invoker's approval
        // timeout can still fire.
        let this = self.clone();
        let request = request.clone();
        tokio::task::spawn_blocking(move || this.ask(&request))
            .await
            .unwrap_or(ApprovalDecision::Denied)
    }

    async fn notify(&self, request: &ApprovalRequest) {
        if let Ok(mut io) = self.io.lock() {
            let _ = writeln!(
                io.1,
                "running `{}` (risk {}) without waiting for approval, arguments {}",
                request.tool, request.risk, request.arguments
            );
        }
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
        let args = json!({"to": "ops@example.com", "subject": "deploy"});
        let now = chrono_now();
        ApprovalRequest::new(
            "apr_1",
            &ravi_kernel::ToolCall::new("c1", tool, args),
            risk,
            HitlMode::Blocking,
            "risk high is above the policy's unapproved maximum (sensitive)",
            now,
            now,
        )
    }

    fn chrono_now() -> chrono::DateTime<chrono::Utc> {
        chrono::DateTime::from_timestamp(0, 0).unwrap_or_default()
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
}
