-- Version 5: standing grants ("always for this tool in this run", decided in the console).
-- Each later call still gets its own single-use approval record, approved in the grant's name.

CREATE TABLE ravi_grants (
    run_id      TEXT   NOT NULL,
    tool        TEXT   NOT NULL,
    granted_by  TEXT   NOT NULL,
    approval_id TEXT   NOT NULL,
    created_ms  BIGINT NOT NULL,
    PRIMARY KEY (run_id, tool)
);
