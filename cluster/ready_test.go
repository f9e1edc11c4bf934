package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hourglass-go/hourglass/task"
)

// TestDBErr_Unreachable: a connection that cannot be made answers
// "hourglass: database unreachable: cannot connect: ..." as
// task.ErrClosed (a 503), once prefixed, without the address, user or
// database that pgx's error quotes.
func TestDBErr_Unreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // a port nobody listens on: connection refused
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, cerr := pgconn.Connect(ctx, fmt.Sprintf("postgres://someone@%s/somedb?sslmode=disable", addr))
	if cerr == nil {
		t.Fatal("connected to a closed port")
	}
	got := dbErr(cerr)
	msg := got.Error()
	if !errors.Is(got, task.ErrClosed) || !strings.HasPrefix(msg, "hourglass: database unreachable: cannot connect") || strings.Count(msg, "hourglass") != 1 {
		t.Errorf("dbErr(%v) = %q, want hourglass: database unreachable: cannot connect..., task.ErrClosed", cerr, msg)
	}
	for _, secret := range []string{addr, "someone", "somedb"} {
		if strings.Contains(msg, secret) {
			t.Errorf("dbErr(...) = %q quotes %q", msg, secret)
		}
	}
}
