-- 012: a task's key (task.Task.Key), by which reserves take a queue's
-- ready tasks in turn across keys (reserve.go). '' for a task put
-- without one; a constant default adds the column without rewriting
-- existing rows.
ALTER TABLE hourglass_tasks ADD COLUMN task_key text NOT NULL DEFAULT '';

-- A key's ready tasks in delivery order, and a key's live tasks (the
-- prune of its turn); tasks without a key are in neither, so that a
-- queue that uses no keys pays nothing for them.
CREATE INDEX hourglass_tasks_key_ready ON hourglass_tasks (queue, task_key, priority, due, job_id)
    WHERE state = 1 AND fire_at IS NULL AND task_key <> '';
CREATE INDEX hourglass_tasks_keyed ON hourglass_tasks (queue, task_key) WHERE task_key <> '';

-- The turn of each key of a queue that uses keys: when it was last
-- served (or came in), from one sequence; the reserve serves the key of
-- the oldest turn among those with a ready task of the first priority.
-- seen is when the row was last written (Unix ns): a row is pruned once
-- its key has no live task and it was not written for a while.
CREATE SEQUENCE hourglass_key_turn;
CREATE TABLE hourglass_key_turns (
    queue    text   NOT NULL,
    task_key text   NOT NULL,
    turn     bigint NOT NULL,
    seen     bigint NOT NULL,
    PRIMARY KEY (queue, task_key)
);
CREATE INDEX hourglass_key_turns_turn ON hourglass_key_turns (queue, turn);
CREATE INDEX hourglass_key_turns_seen ON hourglass_key_turns (seen);
