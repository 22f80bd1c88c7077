-- Version 2: API keys of the gateway (`ravi keys`). Only the SHA-256 digest of a secret is
-- kept; the rule is JSON text.

CREATE TABLE IF NOT EXISTS ravi_keys (
    name        TEXT PRIMARY KEY,
    hash        TEXT NOT NULL UNIQUE,
    rule        TEXT,
    created_ms  BIGINT NOT NULL,
    revoked_ms  BIGINT
);
