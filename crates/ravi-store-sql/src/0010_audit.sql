-- Version 10: the audit chain. Every write of a journal row (`ravi_calls`) and of an approval
-- (`ravi_approvals`) appends a record here, in the same transaction, carrying the hash of the
-- record before it in its run; each run's first record links to the run's entry in
-- `ravi_audit_runs`, which chains the runs of the store in the order they began. Checkpoints
-- sign the heads of the chains with an Ed25519 key. Nothing here is ever updated or deleted
-- by Ravi: `ravi audit verify` recomputes every hash and names the first record that does not
-- fit.
--
-- A record is the one B-tree its key orders (SQLite: `WITHOUT ROWID`, the marker below being
-- replaced for SQLite only; PostgreSQL keeps a heap and the key's index), and it has no other
-- index: each page a commit touches is a page SQLite writes to its WAL, and the journal's
-- durable write is the hot path. A checkpoint finds the runs that moved through
-- `ravi_calls (updated_ms)` instead.

CREATE TABLE ravi_audit_runs (
    n       BIGINT PRIMARY KEY,
    run_id  TEXT   NOT NULL UNIQUE,
    at_ms   BIGINT NOT NULL,
    prev    TEXT   NOT NULL,
    hash    TEXT   NOT NULL
);

CREATE TABLE ravi_audit (
    run_id  TEXT   NOT NULL,
    n       BIGINT NOT NULL,
    kind    TEXT   NOT NULL,
    subject TEXT   NOT NULL,
    at_ms   BIGINT NOT NULL,
    record  TEXT   NOT NULL,
    prev    TEXT   NOT NULL,
    hash    TEXT   NOT NULL,
    PRIMARY KEY (run_id, n)
)/*WITHOUT ROWID*/;

CREATE TABLE ravi_audit_checkpoints (
    n          BIGINT PRIMARY KEY,
    at_ms      BIGINT NOT NULL,
    body       TEXT   NOT NULL,
    prev       TEXT   NOT NULL,
    hash       TEXT   NOT NULL,
    public_key TEXT   NOT NULL,
    signature  TEXT   NOT NULL
);

-- The journal rows and approvals the store held when its chain began: they have no record,
-- and `verify` counts them rather than calling them inserted. The first checkpoint signs
-- their digest, so rows added here later show.
CREATE TABLE ravi_audit_baseline (
    kind    TEXT NOT NULL,
    run_id  TEXT NOT NULL,
    subject TEXT NOT NULL,
    PRIMARY KEY (kind, run_id, subject)
);

INSERT INTO ravi_audit_baseline (kind, run_id, subject)
    SELECT 'call', run_id, CAST(seq AS TEXT) FROM ravi_calls;
INSERT INTO ravi_audit_baseline (kind, run_id, subject)
    SELECT 'approval', run_id, id FROM ravi_approvals;
