-- Version 9: the OAuth credentials Ravi holds for upstream MCP servers (client id, tokens,
-- granted scopes, issuer), so a restarted process or another replica uses them instead of
-- asking the user again.

CREATE TABLE ravi_credentials (
    id          TEXT   PRIMARY KEY,
    state       TEXT   NOT NULL,
    updated_ms  BIGINT NOT NULL
);
