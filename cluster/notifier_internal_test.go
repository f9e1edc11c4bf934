package cluster

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hourglass-go/hourglass/internal/pgtest"
)

// listenTo returns a pool on a new database and a connection of its
// own that listens to channels there, closed when t ends.
func listenTo(t *testing.T, channels ...string) (*pool, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	url := pgtest.Start(t).CreateDatabase(t)
	db := &pool{raw: pgtest.Pool(t, url, 4, ConfigurePool), timeout: 10 * time.Second}
	listen, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { listen.Close(context.Background()) })
	for _, ch := range channels {
		if _, err := listen.Exec(ctx, "LISTEN "+ch); err != nil {
			t.Fatal(err)
		}
	}
	return db, listen
}

// TestNotifier_TimersLater: timers a second or more ahead, announced over
// a while, share one statement, sent once their linger is over (here at
// close, the linger being long), and arrive whole; with a short linger
// they go by themselves; a timer due sooner goes at once.
func TestNotifier_TimersLater(t *testing.T) {
	ctx := context.Background()
	db, listen := listenTo(t, partitionChannel(1), partitionChannel(2))
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// receive returns the lines of the notifications until it has n.
	receive := func(n int) []string {
		var lines []string
		for len(lines) < n {
			note, err := listen.WaitForNotification(wctx)
			if err != nil {
				t.Fatalf("after %v: %v", lines, err)
			}
			lines = append(lines, strings.Split(note.Payload, "\n")...)
		}
		return lines
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	now := int64(1e18)

	nt := newNotifierLinger(db, "a", log, nil, time.Hour)
	for job := range uint64(5) {
		nt.timerLater(1+int(job%2), 10+job, now+int64(lazyAhead), now)
		time.Sleep(5 * time.Millisecond)
	}
	if got := nt.sent.Load(); got != 0 {
		t.Errorf("%d statements sent for timers that may wait", got)
	}
	nt.close()
	if got := nt.sent.Load(); got != 1 {
		t.Errorf("%d statements sent, want 1 for the five timers", got)
	}
	if lines := receive(5); len(lines) != 5 {
		t.Errorf("lines %v, want the five timers", lines)
	}

	nt = newNotifierLinger(db, "a", log, nil, 20*time.Millisecond)
	defer nt.close()
	nt.timerLater(1, 20, now+int64(lazyAhead), now)
	if lines := receive(1); len(lines) != 1 || lines[0] != "20 "+strconv.FormatInt(now+int64(lazyAhead), 10) {
		t.Errorf("lines %v, want the timer after its linger", lines)
	}
	nt.timerLater(2, 30, now+int64(lazyAhead)-1, now)
	if lines := receive(1); len(lines) != 1 || lines[0] != "30 "+strconv.FormatInt(now+int64(lazyAhead)-1, 10) {
		t.Errorf("lines %v, want the timer due sooner at once", lines)
	}
}

// TestNotifier_CancelLater: the lease timers of tasks acked while their
// announcement lingers are never sent (cancelLater), the others are; a
// batch whose every timer was cancelled sends no statement.
func TestNotifier_CancelLater(t *testing.T) {
	ctx := context.Background()
	db, listen := listenTo(t, partitionChannel(1), partitionChannel(2))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	now := int64(1e18)
	at := strconv.FormatInt(now+int64(lazyAhead), 10)

	nt := newNotifierLinger(db, "a", log, nil, time.Hour)
	for job := range uint64(5) {
		nt.timerLater(1+int(job%2), 10+job, now+int64(lazyAhead), now)
	}
	nt.cancelLater([]int64{11, 13, 99})
	nt.close()
	if got := nt.sent.Load(); got != 1 {
		t.Errorf("%d statements sent, want 1 for the three timers left", got)
	}
	// Every notification was sent by close; those on the connection are
	// read until none comes for half a second.
	var lines []string
	for {
		wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		note, err := listen.WaitForNotification(wctx)
		cancel()
		if err != nil {
			break
		}
		lines = append(lines, strings.Split(note.Payload, "\n")...)
	}
	got := map[string]bool{}
	for _, l := range lines {
		got[l] = true
	}
	for _, job := range []string{"10", "12", "14"} {
		if !got[job+" "+at] {
			t.Errorf("lines %v: no timer of job %s", lines, job)
		}
	}
	if len(lines) != 3 {
		t.Errorf("lines %v, want the timers of jobs 10, 12 and 14 only", lines)
	}

	nt = newNotifierLinger(db, "a", log, nil, time.Hour)
	nt.timerLater(1, 20, now+int64(lazyAhead), now)
	nt.cancelLater([]int64{20})
	nt.close()
	if got := nt.sent.Load(); got != 0 {
		t.Errorf("%d statements sent for a batch of timers all cancelled, want none", got)
	}
}
