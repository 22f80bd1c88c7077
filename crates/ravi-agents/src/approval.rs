//! Approval handlers: who answers "may this call run?".
//!
//! | handler | answers |
//! |---|---|
//! | [`AutoApprovalHandler`] | a fixed decision, optionally after a delay (tests, trusted batch jobs) |
//! | [`DenyAllApprovalHandler`] | always `Denied` |
//! | [`ChannelApprovalHandler`] | whoever holds the receiving end: a terminal prompt, a web UI |
//!
//! Every decision is bound to one exact call: the request carries the tool name and the
//! argument digest, and a reply through the channel handler that names another request or
//! another digest counts as no answer (`Unanswered`, a denial that is not reported as a
//! human's). The invoker bounds every wait and fails closed.
//!
//! ```
//! use ravi_agents::approval::{ApprovalMessage, ChannelApprovalHandler};
//! # async fn demo(request: ravi_agents::kernel::ApprovalRequest) {
//! use ravi_agents::kernel::{ApprovalDecision, ApprovalHandler};
//! let (handler, mut inbox) = ChannelApprovalHandler::new(8);
//! tokio::spawn(async move {
//!     while let Some(ApprovalMessage::Request(pending)) = inbox.recv().await {
//!         pending.approve(); // a UI would ask a human here
//!     }
//! });
//! assert_eq!(handler.request(&request).await, ApprovalDecision::Approved);
//! # }
//! ```

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use ravi_kernel::{ApprovalDecision, ApprovalHandler, ApprovalRequest};
use tokio::sync::{mpsc, oneshot};

/// Answers every request with a fixed decision, optionally after a delay, and remembers the
/// requests it saw. Meant for tests and for runs where a human has approved in advance.
#[derive(Debug, Clone)]
pub struct AutoApprovalHandler {
    decision: ApprovalDecision,
    delay: Option<Duration>,
    seen: Arc<Mutex<Vec<ApprovalRequest>>>,
}

impl Default for AutoApprovalHandler {
    fn default() -> Self {
        Self::approving()
    }
}

impl AutoApprovalHandler {
    /// Approves everything.
    pub fn approving() -> Self {
        Self::with_decision(ApprovalDecision::Approved)
    }

    /// Answers `decision` to everything.
    pub fn with_decision(decision: ApprovalDecision) -> Self {
        Self {
            decision,
            delay: None,
            seen: Arc::default(),
        }
    }

    /// Waits `delay` before answering (to exercise approval timeouts).
    #[must_use]
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }

    /// Every request received so far (notifications included), oldest first.
    pub fn requests(&self) -> Vec<ApprovalRequest> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn remember(&self, request: &ApprovalRequest) {
        if let Ok(mut seen) = self.seen.lock() {
            seen.push(request.clone());
        }
    }
}

#[async_trait]
impl ApprovalHandler for AutoApprovalHandler {
    async fn request(&self, request: &ApprovalRequest) -> ApprovalDecision {
        self.remember(request);
        if let Some(delay) = self.delay {
            tokio::time::sleep(delay).await;
        }
        self.decision
    }

    async fn notify(&self, request: &ApprovalRequest) {
        self.remember(request);
    }
}

/// Denies everything: for runs where no risky call may happen.
#[derive(Debug, Clone, Copy, Default)]
pub struct DenyAllApprovalHandler;

#[async_trait]
impl ApprovalHandler for DenyAllApprovalHandler {
    async fn request(&self, _request: &ApprovalRequest) -> ApprovalDecision {
        ApprovalDecision::Denied
    }

    /// Nobody stands behind it: its denials are the policy's, and a `FireAndContinue` call
    /// is denied like any other instead of running on a notification nobody reads.
    fn attended(&self, _request: &ApprovalRequest) -> bool {
        false
    }
}

/// A reply to one approval request, as a UI sends it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalReply {
    /// The request being answered.
    pub request_id: String,
    /// The argument digest the human saw; must equal the request's.
    pub args_digest: String,
    /// The decision.
    pub decision: ApprovalDecision,
}

/// A request waiting for an answer, as received from a [`ChannelApprovalHandler`].
///
/// Dropping it without answering counts as a denial.
#[derive(Debug)]
pub struct PendingApproval {
    /// What is being asked.
    pub request: ApprovalRequest,
    reply: oneshot::Sender<ApprovalReply>,
}

impl PendingApproval {
    /// Approves exactly this request.
    pub fn approve(self) {
        self.decide(ApprovalDecision::Approved);
    }

    /// Denies this request.
    pub fn deny(self) {
        self.decide(ApprovalDecision::Denied);
    }

    /// Answers this request with `decision`.
    pub fn decide(self, decision: ApprovalDecision) {
        let reply = ApprovalReply {
            request_id: self.request.id.clone(),
            args_digest: self.request.args_digest.clone(),
            decision,
        };
        self.respond(reply);
    }

    /// Sends a reply built elsewhere (a web UI posting back ids). A reply whose request id or
    /// digest does not match this request is treated as a denial by the handler.
    pub fn respond(self, reply: ApprovalReply) {
        // The invoker may have stopped waiting (timeout); then nobody needs the answer.
        let _ = self.reply.send(reply);
    }
}

/// What a [`ChannelApprovalHandler`] sends to its receiver.
#[derive(Debug)]
#[non_exhaustive]
pub enum ApprovalMessage {
    /// A decision is needed.
    Request(PendingApproval),
    /// A call proceeds without waiting (`FireAndContinue`); show it, no answer expected.
    Notice(ApprovalRequest),
}

/// Sends each request over a channel and waits for the reply: the building block for
/// terminal prompts and web approval cards.
///
/// Fails closed: a closed or full channel (at most `buffer` requests wait unread; the next is
/// denied at once rather than waiting for room), a dropped request or a reply for a different
/// request or different arguments all yield `Denied`.
#[derive(Debug, Clone)]
pub struct ChannelApprovalHandler {
    tx: mpsc::Sender<ApprovalMessage>,
}

impl ChannelApprovalHandler {
    /// A handler and the receiver its requests arrive on; `buffer` requests may wait unread
    /// (more are denied at once).
    pub fn new(buffer: usize) -> (Self, mpsc::Receiver<ApprovalMessage>) {
        let (tx, rx) = mpsc::channel(buffer.max(1));
        (Self { tx }, rx)
    }
}

#[async_trait]
impl ApprovalHandler for ChannelApprovalHandler {
    async fn request(&self, request: &ApprovalRequest) -> ApprovalDecision {
        let (reply_tx, reply_rx) = oneshot::channel();
        let pending = PendingApproval {
            request: request.clone(),
            reply: reply_tx,
        };
        // Never wait for room in the channel: a UI that stopped reading must not hold calls
        // (and their approval timeouts) hostage. A full channel denies at once.
        match self.tx.try_send(ApprovalMessage::Request(pending)) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::warn!(
                    request = %request.id,
                    tool = %request.tool,
                    "approval channel is full (nobody is answering); denying"
                );
                return ApprovalDecision::Unanswered;
            }
            Err(mpsc::error::TrySendError::Closed(_)) => return ApprovalDecision::Unanswered,
        }
        match reply_rx.await {
            Ok(reply)
                if reply.request_id == request.id && reply.args_digest == request.args_digest =>
            {
                reply.decision
            }
            Ok(reply) => {
                tracing::warn!(
                    request = %request.id,
                    replied_to = %reply.request_id,
                    "approval reply does not match the request's id and argument digest; denying"
                );
                ApprovalDecision::Unanswered
            }
            Err(_) => ApprovalDecision::Unanswered,
        }
    }

    async fn notify(&self, request: &ApprovalRequest) {
        // Notices are informational: dropped rather than waited for when the channel is full.
        if self
            .tx
            .try_send(ApprovalMessage::Notice(request.clone()))
            .is_err()
        {
            tracing::warn!(tool = %request.tool, "approval notice dropped: the channel is full or closed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ravi_kernel::{HitlMode, ToolRisk};

    fn request() -> ApprovalRequest {
        let now = chrono::Utc::now();
        ApprovalRequest::new(
            "apr_1",
            &ravi_kernel::ToolCall::new("c1", "delete", serde_json::json!({"path": "a"})),
            ToolRisk::Critical,
            HitlMode::Blocking,
            "critical",
            now,
            now,
        )
    }

    #[tokio::test]
    async fn channel_round_trip() {
        let (h, mut rx) = ChannelApprovalHandler::new(1);
        let task = tokio::spawn(async move {
            while let Some(ApprovalMessage::Request(p)) = rx.recv().await {
                assert_eq!(p.request.tool, "delete");
                p.approve();
            }
        });
        assert_eq!(h.request(&request()).await, ApprovalDecision::Approved);
        drop(h);
        task.await.unwrap();
    }

    #[tokio::test]
    async fn reply_for_other_arguments_denies() {
        let (h, mut rx) = ChannelApprovalHandler::new(1);
        tokio::spawn(async move {
            if let Some(ApprovalMessage::Request(p)) = rx.recv().await {
                let reply = ApprovalReply {
                    request_id: p.request.id.clone(),
                    args_digest: ravi_kernel::args_digest(&serde_json::json!({"path": "b"})),
                    decision: ApprovalDecision::Approved,
                };
                p.respond(reply);
            }
        });
        assert_eq!(h.request(&request()).await, ApprovalDecision::Unanswered);
    }

    #[tokio::test]
    async fn dropped_request_or_closed_channel_denies() {
        let (h, mut rx) = ChannelApprovalHandler::new(1);
        tokio::spawn(async move {
            let _ = rx.recv().await; // dropped unanswered
        });
        assert_eq!(h.request(&request()).await, ApprovalDecision::Unanswered);
        let (h, rx) = ChannelApprovalHandler::new(1);
        drop(rx);
        assert_eq!(h.request(&request()).await, ApprovalDecision::Unanswered);
    }

    #[tokio::test]
    async fn a_full_channel_denies_at_once_instead_of_waiting() {
        let (h, rx) = ChannelApprovalHandler::new(1);
        // The first request waits in the channel, unread and unanswered.
        let first = tokio::spawn({
            let h = h.clone();
            async move { h.request(&request()).await }
        });
        while rx.is_empty() {
            tokio::task::yield_now().await;
        }
        let answer = tokio::time::timeout(Duration::from_secs(2), h.request(&request())).await;
        assert_eq!(
            answer,
            Ok(ApprovalDecision::Unanswered),
            "blocked on a full channel"
        );
        // Notices never block either.
        tokio::time::timeout(Duration::from_secs(2), h.notify(&request()))
            .await
            .unwrap();
        drop(rx);
        assert_eq!(first.await.unwrap(), ApprovalDecision::Unanswered);
    }

    #[tokio::test]
    async fn auto_and_deny_all() {
        let a = AutoApprovalHandler::with_decision(ApprovalDecision::Skipped);
        assert_eq!(a.request(&request()).await, ApprovalDecision::Skipped);
        assert_eq!(a.requests().len(), 1);
        assert_eq!(
            DenyAllApprovalHandler.request(&request()).await,
            ApprovalDecision::Denied
        );
    }
}
