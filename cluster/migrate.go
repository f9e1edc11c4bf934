package cluster

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The schema's migrations are numbered SQL files embedded in the binary:
// migrations/NNN_name.up.sql, applied in order, each once. The table
// hourglass_migrations records which are applied: the schema's version is
// its highest number.
//
//go:embed migrations/*.up.sql
var migrationFiles embed.FS

// Migration is one numbered step of the schema.
type Migration struct {
	Version int
	Name    string // the file's name
	SQL     string
}

// ErrSchemaNewer is returned by [Migrate] when the database's schema is
// newer than every migration this binary knows: an older binary must not
// write to it.
var ErrSchemaNewer = errors.New("hourglass: database schema is newer than this binary")

// Migrations returns the embedded migrations in version order.
func Migrations() []Migration {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		panic(err) // embedded at build time
	}
	var out []Migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			panic("hourglass: migration without a number: " + e.Name())
		}
		sql, err := migrationFiles.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			panic(err)
		}
		out = append(out, Migration{Version: v, Name: e.Name(), SQL: string(sql)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			panic(fmt.Sprintf("hourglass: migration %s out of sequence", m.Name))
		}
	}
	return out
}

// migrateLock is the key of the advisory lock that serialises migrations
// of one database, so that nodes starting together migrate once.
const migrateLock = 0x686f7572676c6173 // "hourglas"

// Migrate brings the schema of db to the newest embedded version, in one
// transaction: nodes that start together wait for each other, and a
// failing migration leaves the schema as it was. It returns the versions
// before and after; ErrSchemaNewer when the database is ahead of this
// binary.
func Migrate(ctx context.Context, db *pgxpool.Pool) (from, to int, err error) {
	ms := Migrations()
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrateLock)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS hourglass_migrations (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM hourglass_migrations").Scan(&from); err != nil {
			return err
		}
		if from > len(ms) {
			return fmt.Errorf("%w: version %d, this binary knows up to %d", ErrSchemaNewer, from, len(ms))
		}
		for _, m := range ms[from:] {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("hourglass: migration %s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO hourglass_migrations (version, name) VALUES ($1, $2)", m.Version, m.Name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return from, from, err
	}
	return from, len(ms), nil
}
