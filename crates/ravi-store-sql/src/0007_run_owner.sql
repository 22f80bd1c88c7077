-- Version 7: the process running each run (`ravi run`, `ravi agent`): its pid, boot id, PID
-- namespace, start time and host as JSON text, so a reader can tell a run whose process died
-- from one still running.

ALTER TABLE ravi_runs ADD COLUMN owner TEXT;
