-- 013: dedupe windows (task.Policy.Dedupe; the rule in service/dedupe.go,
-- package cluster's part in dedupe.go).
--
-- hourglass_queues.dedupe is the queue's window in ns; 0: none.
--
-- hourglass_dedupe holds one row per (queue, id) of a task that left a
-- queue with a window (acked, dead, deleted), written by the statement
-- that makes it leave, whether the history is kept or not: its outcome,
-- when it left (finished, the database's Unix ns) and when the row ends
-- (until: finished + the window then). A later finish of the same id
-- replaces the row. A put of an id with no live task is deduped by the
-- row while both until and finished + the queue's current window are
-- ahead. The rows past their end are pruned in bounded batches by the
-- node that owns partition 0, soonest end first.
ALTER TABLE hourglass_queues ADD COLUMN dedupe bigint NOT NULL DEFAULT 0;

CREATE TABLE hourglass_dedupe (
    queue      text   NOT NULL,
    id         text   NOT NULL,
    job_id     bigint NOT NULL,
    outcome    text   NOT NULL, -- task.Finished*
    finished   bigint NOT NULL, -- Unix ns
    until      bigint NOT NULL, -- Unix ns
    attempts   bigint NOT NULL,
    last_error text   NOT NULL,
    PRIMARY KEY (queue, id)
);
CREATE INDEX hourglass_dedupe_until ON hourglass_dedupe (until);
