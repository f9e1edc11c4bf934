-- 008: a task's attempt records are bounded (task.AttemptsKeptFirst,
-- task.AttemptsKeptLast; package cluster, history.go): recording attempt
-- n of a job past its 105th removes attempt n - 100, so a task that
-- fails for ever keeps its first 5 and its last 100. Every statement that
-- records an attempt (sqlAck, sqlSettle, sqlFlush, ReleaseJob) inserts
-- into hourglass_attempts, and the trigger prunes after each row it
-- inserts: one probe of the primary key. Attempts are numbered without
-- gaps (tries: a reservation given back unanswered takes its number back,
-- giveBack), so each record past the first 5 is removed once 100 more
-- are recorded.
CREATE FUNCTION hourglass_attempts_bound() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.n > 105 THEN
        DELETE FROM hourglass_attempts WHERE job_id = NEW.job_id AND n = NEW.n - 100;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER hourglass_attempts_bound AFTER INSERT ON hourglass_attempts
    FOR EACH ROW EXECUTE FUNCTION hourglass_attempts_bound();
