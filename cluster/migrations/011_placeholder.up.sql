-- 011: a placeholder for the migration of another branch (issue 42's
-- dedupe window), so that 012 is in sequence on this branch alone. It
-- changes nothing; the merge replaces it with that branch's 011.
SELECT 1;
