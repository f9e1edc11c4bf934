-- 012: a placeholder on branch h-dedupe only, so that 013 (dedupe) applies
-- in order here: another branch owns migration 012. Delete this file when
-- merging that branch (two files of one version fail Migrations).
SELECT 1;
