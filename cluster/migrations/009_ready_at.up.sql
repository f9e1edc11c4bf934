-- 009: when the owner's flush made a delayed task ready (Unix ns, the
-- database's clock), so that delivery lateness splits into the server's
-- own (due to ready) and the wait for a worker (ready to hand-over):
-- service/lateness.go. Set by the flush (flush.go), read and cleared by
-- the reserves (reserve.go, limits.go); NULL: ready at its due time (put
-- due now, nacked, kicked, a lease run out).
ALTER TABLE hourglass_tasks ADD COLUMN ready_at bigint;
