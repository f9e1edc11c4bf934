-- 003: what the beanstalkd protocol needs of a cluster (package cluster,
-- cluster/jobs.go): when a task died, so that peek-buried and kick take
-- the oldest death first, and a row per paused queue, so that a pause
-- holds on every node.
--
-- died is the database's clock (Unix ns) when the task last became dead;
-- it means nothing unless state = 3 (NULL for tasks that died before this
-- migration, or were written dead by pgstore.Store: they come first).

ALTER TABLE hourglass_tasks ADD COLUMN died bigint;

-- A queue's pause: no reserve hands out its tasks while paused_until
-- (database Unix ns) is ahead of hourglass_now(); pauses counts the
-- pause commands, as beanstalkd's cmd-pause-tube.
CREATE TABLE hourglass_queues (
    queue        text   PRIMARY KEY,
    paused_until bigint NOT NULL DEFAULT 0,
    pauses       bigint NOT NULL DEFAULT 0
);
