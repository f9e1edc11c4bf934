// Package pgstore is a [store.Store] on PostgreSQL, through
// github.com/jackc/pgx/v5: the record of a broker kept in a database that
// is already operated, backed up and replicated, rather than in a local
// directory.
//
// # Schema
//
// The store creates and migrates its tables itself ([Migrate]): numbered
// SQL files embedded in the binary (migrations/001_store.up.sql, ...),
// applied in one transaction under an advisory lock and recorded in
// hourglass_migrations. A task is one row of hourglass_tasks (payload
// included, as bytea), a schedule one row of hourglass_schedules, and the
// job id high-water mark a column of the one row of hourglass_meta. The
// tables are shared with package cluster, which runs many nodes on the
// same database; see migrations/002_cluster.up.sql.
//
// # Durability
//
// [Store.Commit] runs its batch as one transaction: the writes are
// pipelined to the server in one round trip, and COMMIT returns once the
// server has flushed the commit record to its WAL (with the server's
// default synchronous_commit=on; with synchronous standbys configured,
// once they have it too). A crash of either process after Commit returns
// loses nothing of the batch; a crash before leaves all of it or none,
// since PostgreSQL rolls back a transaction that did not commit. The
// server groups the WAL flushes of transactions that commit together
// (commit_delay, commit_siblings), and the broker groups the writes of
// concurrent requests into one batch, so one flush carries many requests.
//
// A store that runs with synchronous_commit=off or fsync=off promises
// nothing of the kind: Open refuses fsync=off and logs nothing of the
// other, which is the operator's choice per role or database.
package pgstore
