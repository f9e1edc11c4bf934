package pipenet_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass/internal/pipenet"
)

// TestListener: a Dial reaches an Accept and the two ends talk, in a
// synctest bubble; a Dial that no Accept takes ends with its context;
// after Close, Accept and Dial fail with net.ErrClosed.
func TestListener(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := pipenet.Listen()
		go func() {
			c, err := l.Accept()
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			io.Copy(c, c)
		}()
		c, err := l.Dial(context.Background(), "tcp", "anywhere:80")
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("ping"))
		buf := make([]byte, 4)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("echo %q, %v", buf, err)
		}
		c.Close()

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := l.Dial(ctx, "tcp", "x"); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Dial with no Accept: %v, want the context's end", err)
		}
		l.Close()
		l.Close()
		if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept after Close: %v", err)
		}
		if _, err := l.Dial(context.Background(), "tcp", "x"); !errors.Is(err, net.ErrClosed) {
			t.Errorf("Dial after Close: %v", err)
		}
	})
}
