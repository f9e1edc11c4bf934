-- 006: the history (package cluster, history.go): every attempt of a
-- task and the tasks that left their queues, kept for the retention
-- (Options.History), and a push queue's endpoint.
--
-- hourglass_tasks.reserved is when the current reservation began
-- (hourglass_now(), written by every reservation): the running attempt's
-- start, and its Started when it ends. tries counts the task's
-- reservations, counted or not (a release gives its attempt back, so
-- attempts can repeat a number): the N of the running attempt. Tasks
-- reserved when this migration runs are taken as reserved a ttr before
-- their lease's end.
--
-- hourglass_attempts holds one row per ended attempt, written by the
-- statement that ends it (ack, nack, release, bury, a lease that ran
-- out), under the task's job id: node is the node that ran that
-- statement, error the nack's or bury's text (task.LeaseExpired for an
-- expiry). Its rows go with the last history row of their job.
--
-- hourglass_history holds one row per task that left its queue (acked,
-- dead, deleted), written by the statement that makes it leave; seq
-- orders a queue's history and is the cursor of its pages. A job can
-- leave more than once (dead, kicked, acked): one row each.
--
-- hourglass_queues.push is a push queue's endpoint (task.Push) as JSON:
-- {"url", "timeout_ns", "headers", "secret"}; NULL: workers pull. The
-- secret is stored as given: whoever reads the database reads it.
ALTER TABLE hourglass_tasks
    ADD COLUMN reserved bigint NOT NULL DEFAULT 0,
    ADD COLUMN tries    bigint NOT NULL DEFAULT 0;
UPDATE hourglass_tasks SET tries = attempts, reserved = CASE WHEN state = 2 THEN lease_until - ttr ELSE 0 END
    WHERE attempts > 0 OR state = 2;

CREATE TABLE hourglass_attempts (
    job_id  bigint  NOT NULL,
    n       bigint  NOT NULL,
    started bigint  NOT NULL, -- Unix ns
    ended   bigint  NOT NULL, -- Unix ns
    outcome text    NOT NULL, -- task.Attempt*
    error   text    NOT NULL,
    status  integer NOT NULL, -- a push's HTTP status; 0 for none
    node    text    NOT NULL,
    PRIMARY KEY (job_id, n)
);

CREATE TABLE hourglass_history (
    seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id     bigint NOT NULL,
    queue      text   NOT NULL,
    id         text   NOT NULL,
    outcome    text   NOT NULL, -- task.Finished*
    finished   bigint NOT NULL, -- Unix ns
    attempts   bigint NOT NULL,
    last_error text   NOT NULL
);
-- A queue's pages, newest first, by outcome (a page of any outcome
-- merges the three ranges: one index less for every write to keep).
CREATE INDEX hourglass_history_outcome ON hourglass_history (queue, outcome, seq DESC);
-- The newest incarnation of an id (Attempts of a task no longer live),
-- and the other rows of a job (a job keeps its id), which pruning looks
-- for: it keeps a job's attempts while the job has a newer row.
CREATE INDEX hourglass_history_id ON hourglass_history (id, queue, seq DESC);
-- Pruning takes the oldest first.
CREATE INDEX hourglass_history_finished ON hourglass_history (finished);

ALTER TABLE hourglass_queues ADD COLUMN push jsonb;
