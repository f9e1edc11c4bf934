-- 015: number kept for a migration of another branch (the lead merges
-- it); this placeholder does nothing and goes when that one lands.
SELECT 1;
