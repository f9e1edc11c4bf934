-- 002: what many nodes on one database need (package cluster): partition
-- leases with fencing epochs, node heartbeats, a job id sequence, the
-- database's clock in Unix nanoseconds, and the indexes of the owners'
-- timers and of the ready tasks reservers take.

CREATE TABLE hourglass_partitions (
    partition   integer     PRIMARY KEY,
    owner       text,                    -- node name; NULL: free
    epoch       bigint      NOT NULL DEFAULT 0,
    lease_until timestamptz NOT NULL DEFAULT '-infinity'
);
INSERT INTO hourglass_partitions (partition)
    SELECT generate_series(0, partitions - 1) FROM hourglass_meta;

-- A node's heartbeat; instance tells a restarted process from the one
-- before it under the same name.
CREATE TABLE hourglass_nodes (
    name        text        PRIMARY KEY,
    instance    text        NOT NULL,
    alive_until timestamptz NOT NULL,
    started     timestamptz NOT NULL
);

-- Job ids of tasks put by cluster nodes. It starts above the ids a single
-- node may have written already.
CREATE SEQUENCE hourglass_job_ids;
SELECT setval('hourglass_job_ids',
    greatest((SELECT next_job_id FROM hourglass_meta),
             (SELECT coalesce(max(job_id), 0) + 1 FROM hourglass_tasks)), false);

-- hourglass_now is the one clock of the cluster: the database server's
-- wall clock in Unix nanoseconds (microsecond resolution).
CREATE FUNCTION hourglass_now() RETURNS bigint
    LANGUAGE sql VOLATILE PARALLEL SAFE
    AS $$ SELECT (extract(epoch FROM clock_timestamp()) * 1000000000)::bigint $$;

-- An owner loads its partitions' timers due within a window.
CREATE INDEX hourglass_tasks_timers ON hourglass_tasks (partition, fire_at)
    WHERE fire_at IS NOT NULL;
-- Reserve takes the first ready task of a queue in delivery order.
CREATE INDEX hourglass_tasks_ready ON hourglass_tasks (queue, priority, due, job_id)
    WHERE state = 1 AND fire_at IS NULL;
