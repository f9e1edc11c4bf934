-- 017: where a queue that uses keys is in its round across them (issue
-- 42; cluster/reserve.go's sqlReserveFair). The reserves of a queue
-- without limits take its keys in a cycle, in the order of their names
-- (the key "" between the last and the first), starting after the key
-- of the row's task_key, the last key served; each reserve, and each
-- flush that hands tasks over, writes the row once, whatever the number
-- of keys it served (the turns of hourglass_key_turns cost a row write
-- a key served). No row: the round starts at the first key. A row per
-- queue that used keys; it has no index but its key, so that its writes
-- are HOT updates, in place.
CREATE TABLE hourglass_key_cursors (
    queue    text NOT NULL PRIMARY KEY,
    task_key text NOT NULL
) WITH (fillfactor = 50);
