-- 012: a task's key (task.Task.Key), by which reserves take a queue's
-- ready tasks in turn across keys. '' for a task put without one; a
-- constant default adds the column without rewriting existing rows.
ALTER TABLE hourglass_tasks ADD COLUMN task_key text NOT NULL DEFAULT '';
