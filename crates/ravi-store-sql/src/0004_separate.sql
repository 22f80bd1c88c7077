-- Version 4: approvals that only a principal other than the requester may approve
-- (separation of duties; `[access] separate_approvals = true`).

ALTER TABLE ravi_approvals ADD COLUMN separate BIGINT NOT NULL DEFAULT 0;
