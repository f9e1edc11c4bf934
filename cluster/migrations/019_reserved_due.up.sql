-- 019: a reservation writes one index entry less (issue 40). An update
-- of a task is never a HOT one (its state is in the partial indexes'
-- predicates), so every index of hourglass_tasks takes an entry at
-- every reservation: the primary key, (queue, id), the timers (the
-- lease's end), hourglass_tasks_queue_due and the index of reserved
-- tasks. The last two now share the work for tasks without a key:
--
--   - hourglass_tasks_queue_due leaves out reserved tasks without a
--     key;
--   - the index of reserved tasks orders a key's tasks by (due,
--     job_id), so that those of the key '' (every reserved task of a
--     queue that uses no keys) read in due order from it.
--
-- The console's pages in due order (cluster/bulk.go) read both, merged:
-- still at most service.FindScan entries whatever the queue's size. The
-- counts of a queue's or a key's reserved tasks, and the give-back of a
-- lease's tasks, read the index of reserved tasks by its prefix as
-- before. A reservation of a task with a key still writes both.
DROP INDEX hourglass_tasks_queue_due;
CREATE INDEX hourglass_tasks_queue_due ON hourglass_tasks (queue, due, job_id)
    WHERE state <> 2 OR task_key <> '';
DROP INDEX hourglass_tasks_key_reserved;
CREATE INDEX hourglass_tasks_key_reserved ON hourglass_tasks (queue, task_key, due, job_id)
    WHERE state = 2;
