-- Ravi's durable store, version 1: runs, their call journals, approvals.
-- One SQL text for SQLite and PostgreSQL: BIGINT for every integer and timestamp (ms since
-- the Unix epoch), TEXT for ids, states and JSON, no backend-specific types.

CREATE TABLE IF NOT EXISTS ravi_runs (
    id          TEXT PRIMARY KEY,
    kind        TEXT NOT NULL,
    status      TEXT NOT NULL,
    created_ms  BIGINT NOT NULL,
    updated_ms  BIGINT NOT NULL,
    scope       TEXT NOT NULL,
    input       TEXT NOT NULL,
    output      TEXT
);

CREATE INDEX IF NOT EXISTS ravi_runs_created ON ravi_runs (created_ms);

CREATE TABLE IF NOT EXISTS ravi_calls (
    run_id      TEXT NOT NULL,
    seq         BIGINT NOT NULL,
    call_id     TEXT NOT NULL,
    tool        TEXT NOT NULL,
    args_digest TEXT NOT NULL,
    state       TEXT NOT NULL,
    risk        TEXT NOT NULL,
    idempotent  BIGINT NOT NULL,
    updated_ms  BIGINT NOT NULL,
    started_ms  BIGINT,
    finished_ms BIGINT,
    result      TEXT,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE IF NOT EXISTS ravi_approvals (
    id          TEXT PRIMARY KEY,
    run_id      TEXT NOT NULL,
    seq         BIGINT NOT NULL,
    tool        TEXT NOT NULL,
    args_digest TEXT NOT NULL,
    state       TEXT NOT NULL,
    request     TEXT NOT NULL,
    requester   TEXT,
    created_ms  BIGINT NOT NULL,
    deadline_ms BIGINT NOT NULL,
    decided_ms  BIGINT,
    decided_by  TEXT,
    reason      TEXT
);

CREATE INDEX IF NOT EXISTS ravi_approvals_call ON ravi_approvals (run_id, seq, args_digest);
CREATE INDEX IF NOT EXISTS ravi_approvals_state ON ravi_approvals (state, created_ms);
