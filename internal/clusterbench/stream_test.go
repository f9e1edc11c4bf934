package clusterbench

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/internal/pgtest"
)

// TestStream_PutterBehind has the stream's putter fall behind its
// schedule, as one putter does on a loaded machine: each of the 10
// batches (one every 100 ms) waits 400 ms before its put, so the last is
// put about 2 s after the stream's last due time, past a wait for
// stragglers of 1 s counted from that due time. Every task is still
// delivered, as the wait counts from the last put; the lag is reported.
func TestStream_PutterBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and runs a stream for a few seconds")
	}
	srv := pgtest.Start(t)
	ctx := context.Background()
	c, err := Start(ctx, srv.CreateDatabase(t), 1, 8, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.straggle = time.Second
	c.beforePut = func() { time.Sleep(400 * time.Millisecond) }
	l, err := c.Lateness(ctx, "putter-behind", 1000, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(l)
	if l.Delivered != l.Due || l.Due != 1000 {
		t.Errorf("%d of %d delivered, want 1000 of 1000", l.Delivered, l.Due)
	}
	if l.PutLag < 2*time.Second {
		t.Errorf("put lag %v, want about 3 s", l.PutLag)
	}
	if l.Stragglers != "" {
		t.Errorf("stragglers described though none: %s", l.Stragglers)
	}
}
