-- Version 3: who made each journaled call (the gateway's authenticated principal), for
-- `ravi audit`.

ALTER TABLE ravi_calls ADD COLUMN principal TEXT;

CREATE INDEX IF NOT EXISTS ravi_calls_updated ON ravi_calls (updated_ms);
