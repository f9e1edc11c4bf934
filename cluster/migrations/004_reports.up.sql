-- 004: each node's report of what it served (package cluster,
-- report.go): per queue the puts, deliveries and acks since the node
-- started, and its delivery lateness over the last 15 minutes as
-- histograms, so that any node answers for the whole cluster.
CREATE TABLE hourglass_node_reports (
    node     text   PRIMARY KEY,
    started  bigint NOT NULL, -- hourglass_now() when the node started
    updated  bigint NOT NULL, -- hourglass_now() at the last report
    queues   jsonb  NOT NULL, -- {"queue": [puts, deliveries, acks]}
    lateness jsonb  NOT NULL  -- [service.LatenessCounts, ...]
);
