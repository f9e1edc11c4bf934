-- 007: a schedule's options and its last run (package cluster,
-- schedule.go; the rules in service/schedule.go).
--
-- misfire ('skip', 'one', 'all') and catch_up (ns) say what a new owner
-- puts for the occurrences missed while no node owned the schedule;
-- overlap ('allow', 'skip') whether an occurrence is put while the
-- schedule's previous task is still waiting or reserved; priority, ttr
-- (ns, 0: the queue's or the server's) and max_attempts are its tasks';
-- a paused schedule puts nothing. last stays the misfire cursor (the
-- newest occurrence put or skipped); last_run (Unix ns) is the newest
-- occurrence or run put or skipped, last_id the id of the newest task put
-- (when it is not last_run's, last_run's was skipped:
-- service.LastSkipped). Schedules from before read with the defaults,
-- their last run their last occurrence.
ALTER TABLE hourglass_schedules
    ADD COLUMN misfire      text    NOT NULL DEFAULT 'one',
    ADD COLUMN overlap      text    NOT NULL DEFAULT 'allow',
    ADD COLUMN catch_up     bigint  NOT NULL DEFAULT 86400000000000,
    ADD COLUMN priority     bigint  NOT NULL DEFAULT 1024,
    ADD COLUMN ttr          bigint  NOT NULL DEFAULT 0,
    ADD COLUMN max_attempts bigint  NOT NULL DEFAULT 0,
    ADD COLUMN paused       boolean NOT NULL DEFAULT false,
    ADD COLUMN last_run     bigint  NOT NULL DEFAULT 0,
    ADD COLUMN last_id      text    NOT NULL DEFAULT '';
UPDATE hourglass_schedules
    SET last_run = last,
        last_id  = name || '@' || to_char(to_timestamp(last / 1000000000) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
    WHERE last <> 0;
