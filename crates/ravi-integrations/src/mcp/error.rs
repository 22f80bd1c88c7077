//! The MCP layer's error type.

/// What can go wrong while attaching, talking to or serving MCP.
///
/// Errors that a model could act on (a tool call that failed, timed out or hit a dead server)
/// never surface as this type: `McpTool` turns them into error results. This type is for the
/// operator: bad configuration, a server that cannot be started, a port that cannot be bound.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// A server specification (`--mcp`, `--mcp-url`, config entry) is malformed.
    #[error("invalid MCP server spec `{spec}`: {reason}")]
    InvalidSpec {
        /// The specification as given.
        spec: String,
        /// What is wrong and what was expected.
        reason: String,
    },
    /// The server process could not be started or the URL could not be reached.
    #[error("could not connect to MCP server `{server}`: {reason}")]
    Connect {
        /// The server's name.
        server: String,
        /// The underlying failure.
        reason: String,
    },
    /// A request to the server failed (transport closed, protocol error, timeout).
    #[error("MCP server `{server}` failed {what}: {reason}")]
    Request {
        /// The server's name.
        server: String,
        /// The request that failed (`tools/list`, `tools/call get-sum` …).
        what: String,
        /// The underlying failure.
        reason: String,
    },
    /// Serving failed (bind, accept, transport).
    #[error("MCP server error: {0}")]
    Serve(String),
    /// An I/O failure with context.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}
