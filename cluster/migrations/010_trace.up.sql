-- 010: a task's W3C trace context (task.Trace): the traceparent and
-- tracestate it was put with, handed on with every delivery. NULL for a
-- task put without one, so existing rows need no rewrite.
ALTER TABLE hourglass_tasks ADD COLUMN trace_parent text, ADD COLUMN trace_state text;
