-- 014: limits per key (task.Policy.PerKey, issue 42; package cluster's
-- part in limits.go).
--
-- hourglass_queues.per_key_concurrency is the most tasks of one key
-- reserved at once (0: no limit); per_key_rate_* the rate per key, as
-- rate_* (NULL per_key_rate_limit: none). A queue with either is limited
-- (its reserves take its tasks in takeLimited's transaction, under its
-- row's lock), and one with a per-key concurrency has its expired leases
-- settled by the owner, which wakes a waiting reserver: the two
-- generated columns of 005 are made again with them.
ALTER TABLE hourglass_queues
    ADD COLUMN per_key_concurrency bigint NOT NULL DEFAULT 0,
    ADD COLUMN per_key_rate_limit  bigint,
    ADD COLUMN per_key_rate_per    bigint NOT NULL DEFAULT 0,
    ADD COLUMN per_key_rate_burst  bigint NOT NULL DEFAULT 0,
    DROP COLUMN limited,
    DROP COLUMN on_failure;
ALTER TABLE hourglass_queues
    ADD COLUMN limited boolean GENERATED ALWAYS AS (rate_limit IS NOT NULL OR concurrency > 0
        OR per_key_concurrency > 0 OR per_key_rate_limit IS NOT NULL) STORED,
    ADD COLUMN on_failure boolean GENERATED ALWAYS AS (retry_initial IS NOT NULL OR dead_letter <> ''
        OR concurrency > 0 OR per_key_concurrency > 0) STORED;

-- A reserve under a per-key concurrency counts a key's reserved tasks;
-- the index serves the queue-wide count too, and replaces 005's, so that
-- a reservation still maintains one index of reserved tasks.
CREATE INDEX hourglass_tasks_key_reserved ON hourglass_tasks (queue, task_key) WHERE state = 2;
DROP INDEX hourglass_tasks_reserved;
