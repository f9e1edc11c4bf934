-- 005: queue policies (task.Policy; package cluster, policy.go and
-- limits.go) and a task's last error.
--
-- hourglass_tasks.last_error is why the task's last attempt failed (a
-- nack's or bury's text cut by service.CutError, or task.LeaseExpired).
--
-- A queue's policy is columns of its row in hourglass_queues (003), beside
-- its pause, so that the statements that need it read it by the primary
-- key in the same statement: durations are ns, NULL retry_initial is no
-- retry policy, NULL rate_limit no rate limit, 0 and '' the defaults of
-- the other fields. The default values are the zero Policy: a row with
-- only a pause has none. Two generated columns say which statements must
-- look further:
--
--   - limited: the queue has a rate or concurrency limit; the reservation
--     statement leaves it out and a reserve takes its tasks in a
--     transaction of its own that locks this row (limits.go); the flush
--     hands none of its tasks to waiting reservers.
--   - on_failure: the queue has a retry back-off or a dead-letter queue
--     (or a concurrency limit, whose waiting reservers a lease that runs
--     out wakes); the flush does not settle its expired leases in SQL but
--     returns them to the owner, which decides with service.AfterFailure
--     (failure.go).
--
-- tokens and tokens_at are the rate limit's token bucket (service.Bucket:
-- tokens left at tokens_at, database Unix ns; tokens_at 0: full), written
-- under the row's lock by each reserve of the queue.
ALTER TABLE hourglass_tasks ADD COLUMN last_error text NOT NULL DEFAULT '';

ALTER TABLE hourglass_queues
    ADD COLUMN retry_initial    bigint,
    ADD COLUMN retry_max        bigint           NOT NULL DEFAULT 0,
    ADD COLUMN retry_multiplier double precision NOT NULL DEFAULT 0,
    ADD COLUMN retry_jitter     double precision NOT NULL DEFAULT 0,
    ADD COLUMN max_attempts     bigint           NOT NULL DEFAULT 0,
    ADD COLUMN ttr              bigint           NOT NULL DEFAULT 0,
    ADD COLUMN rate_limit       bigint,
    ADD COLUMN rate_per         bigint           NOT NULL DEFAULT 0,
    ADD COLUMN rate_burst       bigint           NOT NULL DEFAULT 0,
    ADD COLUMN concurrency      bigint           NOT NULL DEFAULT 0,
    ADD COLUMN dead_letter      text             NOT NULL DEFAULT '',
    ADD COLUMN tokens           double precision NOT NULL DEFAULT 0,
    ADD COLUMN tokens_at        bigint           NOT NULL DEFAULT 0,
    ADD COLUMN limited    boolean GENERATED ALWAYS AS (rate_limit IS NOT NULL OR concurrency > 0) STORED,
    ADD COLUMN on_failure boolean GENERATED ALWAYS AS (retry_initial IS NOT NULL OR dead_letter <> '' OR concurrency > 0) STORED;

-- A concurrency-limited reserve counts the queue's reserved tasks.
CREATE INDEX hourglass_tasks_reserved ON hourglass_tasks (queue) WHERE state = 2;
