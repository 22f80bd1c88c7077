//! [`LiveToolbox`]: a tool registry whose attached MCP servers' tools follow their lists.
//!
//! [`McpTool::from_client`] is a snapshot: tools a server adds later are missing from it and
//! tools it removes stay in it. A `LiveToolbox` is a [`ToolRegistry`] over fixed tools plus the
//! current tools of each attached [`McpClient`]: when a client fetched its list again (after
//! `notifications/tools/list_changed` or a reconnect; see [`McpClient::tools_generation`]),
//! the next lookup rebuilds the toolbox, so an invoker over it can call a new tool at once
//! and no longer finds a removed one. Between changes a lookup costs a read lock and one
//! atomic load per server.

use std::collections::HashSet;
use std::sync::{Arc, RwLock};

use ravi_agents::{Toolbox, ToolboxError};
use ravi_kernel::{AnyTool, ToolRegistry};

use super::client::McpClient;
use super::tool::McpTool;

/// What a rebuild does to the combined tool list before it becomes the toolbox: apply
/// configured risk overrides, add tools built over the registry (e.g. `tool_chain`), …
pub type FinishTools = dyn Fn(Vec<AnyTool>) -> Vec<AnyTool> + Send + Sync;

struct Snapshot {
    generations: Vec<u64>,
    toolbox: Toolbox,
}

/// Fixed tools plus the current tools of attached MCP servers, as a [`ToolRegistry`].
///
/// Names never shadow a fixed tool or a tool of a server attached earlier (see
/// [`McpTool::from_client_avoiding`]).
pub struct LiveToolbox {
    base: Vec<AnyTool>,
    clients: Vec<McpClient>,
    finish: Option<Arc<FinishTools>>,
    snapshot: RwLock<Arc<Snapshot>>,
}

impl std::fmt::Debug for LiveToolbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveToolbox")
            .field("base", &self.base.len())
            .field("clients", &self.clients)
            .finish_non_exhaustive()
    }
}

impl LiveToolbox {
    /// `base` (which must form a valid toolbox) plus every tool of `clients`.
    pub fn new(base: Vec<AnyTool>, clients: Vec<McpClient>) -> Result<Self, ToolboxError> {
        Toolbox::try_from_tools(base.clone())?;
        let mut live = Self {
            base,
            clients,
            finish: None,
            snapshot: RwLock::new(Arc::new(Snapshot {
                generations: Vec::new(),
                toolbox: Toolbox::new(),
            })),
        };
        live.rebuild_now();
        Ok(live)
    }

    /// Applies `finish` to the combined tool list on every rebuild (from now on).
    #[must_use]
    pub fn with_finish(mut self, finish: Arc<FinishTools>) -> Self {
        self.finish = Some(finish);
        self.rebuild_now();
        self
    }

    /// The attached servers.
    pub fn clients(&self) -> &[McpClient] {
        &self.clients
    }

    /// The tools as they are now (rebuilt first if a server's list changed).
    pub fn toolbox(&self) -> Toolbox {
        self.current().toolbox.clone()
    }

    fn generations(&self) -> impl Iterator<Item = u64> + '_ {
        self.clients.iter().map(McpClient::tools_generation)
    }

    fn current(&self) -> Arc<Snapshot> {
        let snap = match self.snapshot.read() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        if snap.generations.iter().copied().eq(self.generations()) {
            return snap;
        }
        // Built outside the lock: `finish` may look tools up in another registry.
        let fresh = Arc::new(self.build());
        let mut slot = match self.snapshot.write() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        // Another thread may have stored a newer one meanwhile; keep the newest.
        let newer = fresh
            .generations
            .iter()
            .zip(&slot.generations)
            .all(|(a, b)| a >= b);
        if newer || slot.generations.len() != fresh.generations.len() {
            *slot = fresh.clone();
        }
        fresh
    }

    fn rebuild_now(&mut self) {
        let fresh = Arc::new(self.build());
        match self.snapshot.get_mut() {
            Ok(s) => *s = fresh,
            Err(poisoned) => *poisoned.into_inner() = fresh,
        }
    }

    fn build(&self) -> Snapshot {
        // Read the generations first: a change that lands while building shows as a newer
        // generation on the next lookup, never as a lost one.
        let generations: Vec<u64> = self.generations().collect();
        let mut toolbox: Toolbox = self.base.iter().cloned().collect();
        for client in &self.clients {
            let taken: HashSet<String> = toolbox.names().into_iter().collect();
            for tool in McpTool::from_client_avoiding(client, &taken) {
                if let Err(e) = toolbox.try_add(AnyTool::Function(tool)) {
                    tracing::warn!(server = %client.name(), error = %e, "MCP tool left out");
                }
            }
        }
        if let Some(finish) = &self.finish {
            let finished = finish(toolbox.all());
            match Toolbox::try_from_tools(finished) {
                Ok(t) => toolbox = t,
                Err(e) => {
                    tracing::warn!(error = %e, "finishing the tool list failed; kept it as listed")
                }
            }
        }
        Snapshot {
            generations,
            toolbox,
        }
    }
}

impl ToolRegistry for LiveToolbox {
    fn get(&self, name: &str) -> Option<AnyTool> {
        self.current().toolbox.get(name)
    }

    fn all(&self) -> Vec<AnyTool> {
        self.current().toolbox.all()
    }

    fn names(&self) -> Vec<String> {
        self.current().toolbox.names()
    }

    fn contains(&self, name: &str) -> bool {
        self.current().toolbox.contains(name)
    }

    fn len(&self) -> usize {
        self.current().toolbox.len()
    }
}
