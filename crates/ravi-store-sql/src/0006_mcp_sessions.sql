-- Version 6: MCP sessions (protocol 2025-11-25 and earlier), so any gateway replica can take a
-- session over: the client's `initialize` parameters, replayed to a fresh session worker.

CREATE TABLE ravi_mcp_sessions (
    id          TEXT   PRIMARY KEY,
    state       TEXT   NOT NULL,
    created_ms  BIGINT NOT NULL,
    updated_ms  BIGINT NOT NULL
);
