//! A gateway's life while it serves: its run in the store (every call journaled there), the
//! lease that tells replicas it is alive (and finds the ones that died), artifact collection,
//! upstream retries, `/readyz`, and the drain and end on shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ravi_agents::access::RateLimits;
use ravi_agents::durable::RunJournal;
use ravi_integrations::mcp::McpClient;
use ravi_kernel::{Abandoned, RunKind, RunRecord, RunStatus, Store, StoreError};
use serde_json::json;

use super::{
    BLOB_RETENTION, EventSink, Gateway, GatewayError, GatewayEvent, MountContext,
    SHARED_BLOB_RETENTION, SharedBlobs,
};
use crate::{HttpOptions, HttpServerHandle, McpServer, ReadyCheck, ServerTools, serve_metrics};

/// How often the collector runs.
const BLOB_GC_EVERY: Duration = Duration::from_secs(60);

/// What a gateway's serving ended with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServeReport {
    /// The run every call was journaled in (with a store).
    pub run_id: Option<String>,
    /// Calls still running when it stopped, marked `in_doubt` (whether they took effect is
    /// unknown).
    pub in_doubt: u32,
    /// Pending approvals that expired as it stopped.
    pub expired_approvals: u32,
}

/// The background work of a serving gateway, ended by [`Serving::end`].
struct Serving {
    store: Option<Arc<dyn Store>>,
    journal: Option<Arc<RunJournal>>,
    upstreams: Vec<McpClient>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    metrics_server: Option<HttpServerHandle>,
    events: EventSink,
}

impl Gateway {
    /// Serves one client over stdin/stdout until it closes them.
    pub async fn serve_stdio(self) -> Result<ServeReport, GatewayError> {
        let (server, serving) = self.start("stdio", None).await?;
        let served = server.serve_stdio().await;
        let report = serving.end(0).await;
        served?;
        Ok(report)
    }

    /// Serves streamable HTTP at `http://ADDR/mcp` (with `/healthz`, `/readyz` and the
    /// mounted routes). A non-loopback address is refused unless callers authenticate and an
    /// allowed host names it (what a DNS-rebinding attack and an open port would exploit).
    pub async fn bind_http(mut self, addr: SocketAddr) -> Result<ServedHttp, GatewayError> {
        if !addr.ip().is_loopback() {
            if self.auth.is_none() {
                return Err(GatewayError::Exposed {
                    addr,
                    why: "anyone who can reach it could call the served tools; authenticate \
                          callers (API keys or access tokens)",
                });
            }
            if self.allowed_hosts.is_empty() {
                return Err(GatewayError::Exposed {
                    addr,
                    why: "name the host clients will use (an allowed host) to serve beyond \
                          loopback on purpose",
                });
            }
        }
        let mut opts = HttpOptions::default();
        opts.auth.clone_from(&self.auth);
        opts.resource_metadata = self.resource_metadata.take();
        opts.upstreams.clone_from(&self.upstreams);
        opts.allowed_hosts
            .extend(self.allowed_hosts.iter().cloned());
        opts.allowed_origins
            .extend(self.allowed_origins.iter().cloned());
        opts.sessions.clone_from(&self.sessions);
        opts.limits = self.limits.clone();
        let draining = Arc::new(AtomicBool::new(false));
        opts.readiness = readiness(self.store.as_ref(), self.blobs.as_ref(), &draining);
        let mounts = std::mem::take(&mut self.mounts);
        if !mounts.is_empty() {
            let ctx = MountContext {
                store: self.store.as_ref(),
                auth: self.auth.as_ref(),
                allowed_hosts: &opts.allowed_hosts,
                allowed_origins: &opts.allowed_origins,
                upstreams: &self.upstreams,
                metrics: &self.metrics,
                addr,
                blobs: self.blobs.as_ref().map(|b| b.store()),
            };
            let mut routes = axum::Router::new();
            for mount in mounts {
                routes = routes.merge(mount.router(&ctx)?);
            }
            opts.routes = Some(routes);
        }
        let metrics = Arc::clone(&self.metrics);
        let drain = self.drain;
        let (server, serving) = self.start("http", Some(addr)).await?;
        let handle = match server.bind_http(addr, opts).await {
            Ok(handle) => handle,
            Err(e) => {
                serving.end(0).await;
                return Err(e.into());
            }
        };
        Ok(ServedHttp {
            handle,
            serving,
            metrics,
            draining,
            drain,
        })
    }

    /// Opens the run, starts the background work and assembles the MCP server.
    async fn start(
        self,
        transport: &str,
        addr: Option<SocketAddr>,
    ) -> Result<(McpServer, Serving), GatewayError> {
        let mut tasks = Vec::new();
        // Every served call is journaled in a run of this process.
        let journal = match &self.store {
            Some(store) => {
                let record = RunRecord::new(
                    new_run_id(),
                    RunKind::Serve,
                    ravi_agents::blob::new_scope_id(),
                    json!({"transport": transport, "address": addr.map(|a| a.to_string())}),
                );
                store.create_run(&record).await?;
                (self.events)(&GatewayEvent::Journaling {
                    run_id: record.id.clone(),
                });
                Some(RunJournal::open(Arc::clone(store), record.id).await?)
            }
            None => None,
        };
        let tools: Arc<dyn ServerTools> = Arc::new(match &journal {
            Some(j) => self.tools.with_journal(Arc::clone(j)),
            None => self.tools,
        });
        tasks.push(tokio::spawn(collect(self.memory_blobs, self.blobs.clone())));
        // The lease: renewed while this process serves; a replica that stops renewing has
        // died, and its calls still running are marked in doubt by whichever replica notices.
        if let (Some(store), Some(j)) = (&self.store, &journal) {
            tasks.push(tokio::spawn(keep_lease(
                Arc::clone(store),
                j.run_id().to_owned(),
                self.lease,
                self.shared_store.then(|| Arc::clone(&self.rate_limits)),
                Arc::clone(&self.events),
            )));
        }
        self.metrics.watch_upstreams(self.upstreams.iter().cloned());
        if let Some(store) = &self.store {
            self.metrics.watch_store(Arc::clone(store));
        }
        // Upstreams that go down are retried with backoff; their tools are re-listed (and
        // clients told) when they come back.
        tasks.extend(
            self.upstreams
                .iter()
                .map(|c| c.keep_alive(self.upstream_probe)),
        );
        let mut serving = Serving {
            store: self.store,
            journal,
            upstreams: self.upstreams,
            tasks,
            metrics_server: None,
            events: self.events,
        };
        if let Some(addr) = self.metrics_addr {
            match serve_metrics(addr, Arc::clone(&self.metrics)).await {
                Ok(handle) => {
                    (serving.events)(&GatewayEvent::MetricsAt(handle.local_addr()));
                    serving.metrics_server = Some(handle);
                }
                Err(e) => {
                    serving.end(0).await;
                    return Err(e.into());
                }
            }
        }
        // Tasks live in the store, where every replica reads them; without one, in memory.
        let task_store: Arc<dyn Store> = match &serving.store {
            Some(store) => Arc::clone(store),
            None => Arc::new(ravi_agents::durable::MemoryStore::new()),
        };
        let mut server = McpServer::new(tools)
            .with_metrics(self.metrics)
            .with_tasks_if(task_store, self.tasks);
        if let Some(dir) = &self.skills {
            server = match server.with_skills_dir(dir) {
                Ok(s) => s,
                Err(e) => {
                    serving.end(0).await;
                    return Err(e);
                }
            };
        }
        if !serving.upstreams.is_empty() {
            // Clients hear when an attached server's tools change.
            server = server.with_list_changes(serving.upstreams.iter().map(|c| c.watch_tools()));
        }
        Ok((server, serving))
    }
}

impl Serving {
    /// Stops the background work, closes the upstreams and ends the run: what was still
    /// running did not finish here (in doubt, beside the `doubted` already marked), and
    /// approvals still pending can no longer be acted on (they expire).
    async fn end(self, doubted: u32) -> ServeReport {
        self.tasks.iter().for_each(tokio::task::JoinHandle::abort);
        if let Some(m) = self.metrics_server {
            let _ = m.shutdown().await;
        }
        for c in self.upstreams {
            c.close().await;
        }
        let mut report = ServeReport {
            in_doubt: doubted,
            ..ServeReport::default()
        };
        let (Some(j), Some(store)) = (&self.journal, &self.store) else {
            return report;
        };
        report.run_id = Some(j.run_id().to_owned());
        j.flush().await;
        let ended = store
            .abandon_run(
                j.run_id(),
                "the gateway that held this approval stopped before it was decided",
            )
            .await;
        // A store that failed here leaves the run `running`: `ravi runs recover` (or a
        // replica's lease check) then ends what this server could not.
        let ended = match ended {
            Ok(ended) => ended,
            Err(e) => {
                (self.events)(&GatewayEvent::EndFailed {
                    run_id: j.run_id().to_owned(),
                    error: e.to_string(),
                });
                return report;
            }
        };
        if ended.expired_approvals > 0 {
            (self.events)(&GatewayEvent::ApprovalsExpired(ended.expired_approvals));
        }
        report.expired_approvals = ended.expired_approvals;
        report.in_doubt += ended.in_doubt;
        let (status, output) = if report.in_doubt == 0 {
            (RunStatus::Succeeded, None)
        } else {
            (self.events)(&GatewayEvent::InDoubt(report.in_doubt));
            (
                RunStatus::Failed,
                Some(json!({
                    "error": format!(
                        "the server stopped with {} call(s) running; they are in_doubt",
                        report.in_doubt
                    ),
                })),
            )
        };
        let _ = store.update_run(j.run_id(), status, output.as_ref()).await;
        report
    }
}

/// A gateway serving streamable HTTP; [`run_until`](Self::run_until) a shutdown is asked.
pub struct ServedHttp {
    handle: HttpServerHandle,
    serving: Serving,
    metrics: Arc<crate::GatewayMetrics>,
    draining: Arc<AtomicBool>,
    drain: Duration,
}

impl std::fmt::Debug for ServedHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServedHttp")
            .field("url", &self.handle.url())
            .finish_non_exhaustive()
    }
}

impl ServedHttp {
    /// The MCP endpoint, e.g. `http://127.0.0.1:8765/mcp`.
    pub fn url(&self) -> String {
        self.handle.url()
    }

    /// The bound address (useful after binding port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.handle.local_addr()
    }

    /// The run every call is journaled in (with a store).
    pub fn run_id(&self) -> Option<&str> {
        self.serving.journal.as_ref().map(|j| j.run_id())
    }

    /// Serves until the server fails or `shutdown` completes. Then it drains: `/readyz` says
    /// "not ready" (a load balancer stops sending), running calls get the drain limit to
    /// finish, and the run ends. Calls still running at the limit are marked `in_doubt` and
    /// left to the process's exit, not cancelled (a cancelled call would be recorded as failed,
    /// which nobody knows).
    pub async fn run_until(
        mut self,
        shutdown: impl Future<Output = ()>,
    ) -> Result<ServeReport, GatewayError> {
        let stopped = tokio::select! {
            r = self.handle.stopped() => Some(r),
            () = shutdown => None,
        };
        if let Some(r) = stopped {
            let report = self.serving.end(0).await;
            r?;
            return Ok(report);
        }
        self.draining.store(true, Ordering::SeqCst);
        let until = Instant::now() + self.drain;
        let running = self.metrics.in_flight();
        if running > 0 {
            (self.serving.events)(&GatewayEvent::Draining {
                running,
                limit: self.drain,
            });
        }
        while self.metrics.in_flight() > 0 && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut doubted = 0;
        match (&self.serving.journal, &self.serving.store) {
            // Calls still running at the deadline are left as they are and marked in doubt.
            // (One that finishes before the process exits records its outcome over the mark.)
            (Some(j), Some(store)) if self.metrics.in_flight() > 0 => {
                j.flush().await;
                doubted = store.mark_in_doubt(j.run_id()).await.unwrap_or(0);
            }
            _ => {
                let _ = self.handle.shutdown().await;
            }
        }
        Ok(self.serving.end(doubted).await)
    }

    /// Stops now: [`run_until`](Self::run_until) a shutdown that has already come.
    pub async fn stop(self) -> Result<ServeReport, GatewayError> {
        self.run_until(std::future::ready(())).await
    }
}

/// A fresh run id: `run_` and 16 random hex digits.
pub fn new_run_id() -> String {
    let scope = ravi_agents::blob::new_scope_id();
    let hex = scope.trim_start_matches("ses_");
    format!("run_{}", hex.get(..16).unwrap_or(hex))
}

/// Bounded memory: a client session's artifacts are unpinned when it ends (or idles out);
/// what is unpinned and older than the retention is collected here. A shared store is
/// collected by age (its pins are per process), listed whole: once an hour is enough for a
/// 24-hour retention.
async fn collect(
    memory: Arc<ravi_agents::blob::MemoryBlobStore>,
    shared: Option<Arc<dyn SharedBlobs>>,
) {
    let mut tick = tokio::time::interval(BLOB_GC_EVERY);
    let mut ticks: u64 = 0;
    loop {
        tick.tick().await;
        memory.gc(BLOB_RETENTION);
        ticks += 1;
        if ticks % 60 == 1
            && let Some(shared) = &shared
            && let Err(e) = shared.gc(SHARED_BLOB_RETENTION).await
        {
            tracing::warn!(error = %e, "collecting old artifacts failed");
        }
    }
}

/// Renews this server's lease on `run_id` every third of `lease`, shares the rate limits among
/// the live replicas, and ends the serve runs whose lease ran out (their replica died).
async fn keep_lease(
    store: Arc<dyn Store>,
    run_id: String,
    lease: Duration,
    limits: Option<Arc<RateLimits>>,
    events: EventSink,
) {
    let mut tick = tokio::time::interval(lease / 3);
    loop {
        tick.tick().await;
        if let Err(e) = store.touch_run(&run_id).await {
            tracing::warn!(error = %e, "could not renew this server's lease in the store");
        }
        // Rates are shared among the live replicas: each enforces its share.
        if let Some(limits) = &limits {
            let since = ravi_kernel::now_ms() - ravi_kernel::ms_i64(lease);
            if let Ok(live) = store.live_runs(RunKind::Serve, since).await {
                let n = u32::try_from(live.len()).unwrap_or(u32::MAX).max(1);
                if n != limits.replicas() {
                    events(&GatewayEvent::Replicas(n));
                    limits.set_replicas(n);
                }
            }
        }
        match recover_runs(&*store, lease).await {
            Ok(recovered) => {
                for (run_id, ended) in recovered {
                    events(&GatewayEvent::LeaseLost {
                        run_id,
                        in_doubt: ended.in_doubt,
                    });
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not look for dead replicas"),
        }
    }
}

/// Ends the serve runs whose lease ran out more than `lease` ago (their replica died): their
/// running calls are marked `in_doubt`, their pending approvals expire, and the run fails
/// saying so. Returns each run ended with what was ended in it.
pub async fn recover_runs(
    store: &dyn Store,
    lease: Duration,
) -> Result<Vec<(String, Abandoned)>, StoreError> {
    let before = ravi_kernel::now_ms() - ravi_kernel::ms_i64(lease);
    let mut out = Vec::new();
    for run in store.expired_runs(RunKind::Serve, before).await? {
        let last = chrono::DateTime::from_timestamp_millis(run.updated_ms)
            .map_or_else(|| run.updated_ms.to_string(), |t| t.to_rfc3339());
        let reason = format!(
            "the gateway replica that waited for it died (run {} stopped renewing its lease at \
             {last})",
            run.id
        );
        let ended = store.abandon_run(&run.id, &reason).await?;
        if ended.expired_approvals > 0 {
            tracing::warn!(
                run = %run.id, approvals = ended.expired_approvals,
                "a dead replica's pending approvals expired"
            );
        }
        let output = json!({
            "error": format!(
                "the server stopped renewing its lease (last at {last}); {} call(s) it was \
                 running are in_doubt, {} approval(s) it waited for expired",
                ended.in_doubt, ended.expired_approvals
            ),
        });
        store
            .update_run(&run.id, RunStatus::Failed, Some(&output))
            .await?;
        out.push((run.id, ended));
    }
    Ok(out)
}

/// What `/readyz` checks: the store answers, the shared blob store answers, and the server is
/// not draining.
fn readiness(
    store: Option<&Arc<dyn Store>>,
    blobs: Option<&Arc<dyn SharedBlobs>>,
    draining: &Arc<AtomicBool>,
) -> Vec<(String, ReadyCheck)> {
    let mut checks: Vec<(String, ReadyCheck)> = Vec::new();
    let d = Arc::clone(draining);
    checks.push((
        "serving".into(),
        Arc::new(move || {
            let draining = d.load(Ordering::SeqCst);
            Box::pin(async move {
                if draining {
                    Err("draining: this server is shutting down".to_owned())
                } else {
                    Ok(())
                }
            })
        }),
    ));
    if let Some(store) = store {
        let store = Arc::clone(store);
        checks.push((
            "store".into(),
            Arc::new(move || {
                let store = Arc::clone(&store);
                Box::pin(async move { store.runs(1).await.map(|_| ()).map_err(|e| e.to_string()) })
            }),
        ));
    }
    if let Some(blobs) = blobs {
        let blobs = Arc::clone(blobs);
        checks.push((
            "blobs".into(),
            Arc::new(move || {
                let blobs = Arc::clone(&blobs);
                Box::pin(async move { blobs.check().await.map_err(|e| e.to_string()) })
            }),
        ));
    }
    checks
}
