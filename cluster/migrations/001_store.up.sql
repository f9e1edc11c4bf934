-- 001: the record of the tasks, the schedules and the job id high-water
-- mark.
--
-- Times are Unix nanoseconds (bigint) as in store.Task; uint32 fields are
-- bigint. fire_at is the task's next timer: its due time while it waits
-- for it, its lease's end while reserved, NULL when no timer runs (ready,
-- or dead). partition is job_id modulo hourglass_meta.partitions.

CREATE TABLE hourglass_meta (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    next_job_id bigint  NOT NULL DEFAULT 1,
    partitions  integer NOT NULL DEFAULT 64 CHECK (partitions > 0)
);
INSERT INTO hourglass_meta DEFAULT VALUES;

CREATE TABLE hourglass_tasks (
    job_id       bigint   PRIMARY KEY,
    partition    integer  NOT NULL,
    queue        text     NOT NULL,
    id           text     NOT NULL,
    state        smallint NOT NULL, -- store.State: 1 waiting, 2 reserved, 3 dead
    priority     bigint   NOT NULL,
    due          bigint   NOT NULL,
    fire_at      bigint,
    created      bigint   NOT NULL,
    ttr          bigint   NOT NULL,
    attempts     bigint   NOT NULL,
    max_attempts bigint   NOT NULL,
    lease        text     NOT NULL,
    lease_until  bigint   NOT NULL,
    timeouts     bigint   NOT NULL,
    releases     bigint   NOT NULL,
    buries       bigint   NOT NULL,
    kicks        bigint   NOT NULL,
    payload      bytea    NOT NULL,
    CONSTRAINT hourglass_tasks_queue_id UNIQUE (queue, id)
);
-- List pages a queue in job id order.
CREATE INDEX hourglass_tasks_queue_job ON hourglass_tasks (queue, job_id);

CREATE TABLE hourglass_schedules (
    name     text   PRIMARY KEY,
    cron     text   NOT NULL,
    queue    text   NOT NULL,
    timezone text   NOT NULL,
    payload  bytea  NOT NULL,
    created  bigint NOT NULL,
    last     bigint NOT NULL
);
