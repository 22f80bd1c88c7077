
-- SQLite only: a journal row carries its newest audit record's columns, and a trigger appends
-- that record to `ravi_audit` within the row's own statement. The journal's write stays one
-- statement (sqlx runs SQLite on a thread of its own and hands each statement's result back
-- across threads: a `BEGIN; INSERT; upsert; COMMIT` text cost three more hand-offs than the
-- write itself). PostgreSQL writes the record in a `WITH` clause of the same statement.
ALTER TABLE ravi_calls ADD COLUMN audit_n BIGINT;
ALTER TABLE ravi_calls ADD COLUMN audit_record TEXT;
ALTER TABLE ravi_calls ADD COLUMN audit_prev TEXT;
ALTER TABLE ravi_calls ADD COLUMN audit_hash TEXT;

CREATE TRIGGER ravi_calls_audit_insert AFTER INSERT ON ravi_calls
WHEN NEW.audit_hash IS NOT NULL
BEGIN
    INSERT INTO ravi_audit (run_id, n, kind, subject, at_ms, record, prev, hash)
    VALUES (NEW.run_id, NEW.audit_n, 'call', CAST(NEW.seq AS TEXT), NEW.updated_ms,
            NEW.audit_record, NEW.audit_prev, NEW.audit_hash);
END;

CREATE TRIGGER ravi_calls_audit_update AFTER UPDATE ON ravi_calls
WHEN NEW.audit_hash IS NOT NULL AND NEW.audit_hash IS NOT OLD.audit_hash
BEGIN
    INSERT INTO ravi_audit (run_id, n, kind, subject, at_ms, record, prev, hash)
    VALUES (NEW.run_id, NEW.audit_n, 'call', CAST(NEW.seq AS TEXT), NEW.updated_ms,
            NEW.audit_record, NEW.audit_prev, NEW.audit_hash);
END;
