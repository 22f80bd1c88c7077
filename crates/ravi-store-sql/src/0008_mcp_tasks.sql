-- Version 8: MCP tasks (the io.modelcontextprotocol/tasks extension), so a task started on one
-- gateway replica is answered by any other and outlives the process: its state as JSON, its
-- owner, a version for compare-and-set updates, and when it may be collected.

CREATE TABLE ravi_mcp_tasks (
    id          TEXT   PRIMARY KEY,
    owner       TEXT,
    state       TEXT   NOT NULL,
    version     BIGINT NOT NULL,
    expires_ms  BIGINT NOT NULL
);

CREATE INDEX ravi_mcp_tasks_expiry ON ravi_mcp_tasks (expires_ms);
