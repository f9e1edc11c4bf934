-- 018: less for PostgreSQL to write per worked task (issue 40). The
-- history's row of an acked task carries the attempt that acked it
-- (package cluster, history.go), so that an ack writes one row where it
-- wrote two; the history is pruned in the order of seq, so that no
-- index on finished is kept for the pruner alone; and the tasks lose
-- hourglass_tasks_queue_job, which no statement reads since listings
-- page by hourglass_tasks_queue_due (015), and which every put and
-- every reservation (not a HOT update) wrote an entry in.
--
-- attempt_n is the attempt's number among the task's records (its
-- tries), attempt_started when its reservation began, attempt_outcome
-- and attempt_status its outcome (acked, or a push's) and HTTP status,
-- attempt_node the node that acked it. Its end is the row's finished,
-- its error '', its number as the task's attempts count it the row's
-- attempts, its queue the row's queue. NULL attempt_n: the row carries
-- no attempt (every row written before this migration, a row of a task
-- that did not leave by an ack, and an ack's past attempt 105, which
-- hourglass_attempts records so that migration 008's bound holds).
-- The new columns have no default: no row is rewritten.
ALTER TABLE hourglass_history
    ADD COLUMN attempt_n       bigint,
    ADD COLUMN attempt_started bigint,
    ADD COLUMN attempt_outcome text,
    ADD COLUMN attempt_status  integer,
    ADD COLUMN attempt_node    text;

-- The pruner takes the oldest rows by seq (the primary key): rows are
-- numbered as they are written, each finished at its writing by the
-- database's clock.
DROP INDEX hourglass_history_finished;

-- A queue's tasks by job id: read by no statement; a statement on a
-- queue's tasks finds them by hourglass_tasks_queue_due or _queue_id.
DROP INDEX hourglass_tasks_queue_job;
