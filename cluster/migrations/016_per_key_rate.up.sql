-- 016: the rate per key (task.PerKey.Rate, issue 42; package cluster's
-- part in limits.go).
--
-- hourglass_key_buckets holds one token bucket (service.Bucket) per key
-- of a queue with a per-key rate, and only while it is not full: tokens
-- left at tokens_at (database Unix ns), full_at, when it is full again,
-- and next_at, when it has a whole token again if it has none (NULL: it
-- has one). A key without a row has a full bucket. The rows are written by
-- the reserves that take the key's tokens (takeLimited, under the
-- queue's row lock, so that the rate holds across nodes), and the rows
-- past full_at are deleted by the queue's reserves, as many each as it
-- may write and more, soonest first: the rows are bounded by the keys
-- handed a task within one refill of a bucket, whatever the number of
-- keys. A change of the per-key rate deletes the queue's rows (full
-- buckets again), as a new queue-wide rate does tokens_at.
CREATE TABLE hourglass_key_buckets (
    queue     text             NOT NULL,
    task_key  text             NOT NULL,
    tokens    double precision NOT NULL,
    tokens_at bigint           NOT NULL,
    full_at   bigint           NOT NULL,
    next_at   bigint,
    PRIMARY KEY (queue, task_key)
);
-- The sweep of full rows, soonest first; and a reserve that took
-- nothing finds the first spent key to get a token, in the same way.
CREATE INDEX hourglass_key_buckets_full ON hourglass_key_buckets (queue, full_at);
CREATE INDEX hourglass_key_buckets_next ON hourglass_key_buckets (queue, next_at) WHERE next_at IS NOT NULL;
