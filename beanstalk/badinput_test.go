package beanstalk_test

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/beanstalk"
)

// TestBadInput sends what a broken or hostile client sends. Each must get
// the protocol's error or a closed connection, and leave the server
// serving and the jobs as they were.
func TestBadInput(t *testing.T) {
	t.Parallel()
	ts := start(t, beanstalk.Options{})
	keeper := dial(t, ts.addr)
	id := keeper.put(5, 0, 60, "precious")
	before := stable(keeper.do(fmt.Sprintf("stats-job %d", id)))
	t.Cleanup(func() {
		after := stable(keeper.do(fmt.Sprintf("stats-job %d", id)))
		if after != before {
			t.Errorf("the job changed:\nbefore %q\nafter  %q", before, after)
		}
		if got := keeper.do("stats"); yamlField(got, "current-jobs-ready") != "1" {
			t.Errorf("stats after the bad input: %q", got)
		}
	})

	t.Run("LongLine", func(t *testing.T) {
		t.Parallel()
		c := dial(t, ts.addr)
		c.send(strings.Repeat("x", 1<<20) + "\r\n" + "use ok\r\n")
		if got := c.read(5 * time.Second); got != "BAD_FORMAT\r\n" {
			t.Fatalf("1 MiB line: %q", got)
		}
		if got := c.read(5 * time.Second); got != "USING ok\r\n" {
			t.Fatalf("after it: %q", got)
		}
		// 224 bytes with CR-LF is a line; 225 is not.
		c.must("pause-tube "+strings.Repeat("n", 200)+" 4294967295", "NOT_FOUND")
		c.must("pause-tube "+strings.Repeat("n", 200)+" 04294967295", "BAD_FORMAT")
	})

	t.Run("BodyLongerThanDeclared", func(t *testing.T) {
		t.Parallel()
		c := dial(t, ts.addr)
		c.must("use longer", "USING longer")
		c.send("put 0 0 1 3\r\nabcdef\r\n")
		if got := c.read(5 * time.Second); got != "EXPECTED_CRLF\r\n" {
			t.Fatalf("got %q", got)
		}
		// "def\r\n" was a command line.
		if got := c.read(5 * time.Second); got != "UNKNOWN_COMMAND\r\n" {
			t.Fatalf("got %q", got)
		}
		c.must("peek-ready", "NOT_FOUND")
	})

	t.Run("TooBig", func(t *testing.T) {
		t.Parallel()
		c := dial(t, ts.addr)
		c.send("put 0 0 1 65536\r\n" + strings.Repeat("\r\n", 32769))
		if got := c.read(5 * time.Second); got != "JOB_TOO_BIG\r\n" {
			t.Fatalf("got %q", got)
		}
		c.must("list-tube-used", "USING default")
		// A declared size of 4 GiB is refused before any of it is read.
		c.send("put 0 0 1 4294967295\r\n")
		c.nc.Close()
	})

	t.Run("Garbage", func(t *testing.T) {
		t.Parallel()
		// Bytes that can spell no command (no letters), lines of any
		// length.
		alphabet := []byte("0123456789 \r\n\r\n\x00\x01\xff-+/;.$_()!\"#%&'*,:<=>?@[\\]^`{|}~\t")
		rng := rand.New(rand.NewPCG(1, 2))
		for range 20 {
			nc, err := net.DialTimeout("tcp", ts.addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, rng.IntN(4096))
			for i := range buf {
				buf[i] = alphabet[rng.IntN(len(alphabet))]
			}
			nc.SetDeadline(time.Now().Add(5 * time.Second))
			nc.Write(buf)
			nc.(*net.TCPConn).CloseWrite()
			all, err := io.ReadAll(nc)
			nc.Close()
			if err != nil {
				t.Fatalf("reading the replies to garbage: %v", err)
			}
			for _, l := range strings.Split(strings.TrimSuffix(string(all), "\r\n"), "\r\n") {
				switch l {
				case "", "BAD_FORMAT", "UNKNOWN_COMMAND":
				default:
					t.Fatalf("reply to garbage: %q", l)
				}
			}
		}
		dial(t, ts.addr).must("list-tube-used", "USING default")
	})

	t.Run("GoneMidBody", func(t *testing.T) {
		t.Parallel()
		c := dial(t, ts.addr)
		c.must("use midbody", "USING midbody")
		c.send("put 0 0 1 100\r\n" + strings.Repeat("z", 50))
		time.Sleep(50 * time.Millisecond)
		c.nc.Close()
		d := dial(t, ts.addr)
		d.must("use midbody", "USING midbody")
		d.must("peek-ready", "NOT_FOUND")
	})

	t.Run("IdleConnections", func(t *testing.T) {
		t.Parallel()
		n := 2000 // HOURGLASS_BEANSTALK_IDLE sets another count (mind ulimit -n: two descriptors each)
		if v, err := strconv.Atoi(os.Getenv("HOURGLASS_BEANSTALK_IDLE")); err == nil && v > 0 {
			n = v
		}
		conns := make([]net.Conn, 0, n)
		t.Cleanup(func() {
			for _, nc := range conns {
				nc.Close()
			}
		})
		for range n {
			nc, err := net.DialTimeout("tcp", ts.addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, nc)
		}
		c := dial(t, ts.addr)
		start := time.Now()
		got := c.do("stats")
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("stats took %v with %d idle connections", took, n)
		}
		var open int
		fmt.Sscan(yamlField(got, "current-connections"), &open)
		if open < n {
			t.Fatalf("current-connections %d, want at least %d", open, n)
		}
	})
}

// stable drops the fields of a stats-job reply that move with the clock.
func stable(reply string) string {
	var keep []string
	for _, l := range strings.Split(reply, "\n") {
		if !strings.HasPrefix(l, "age:") && !strings.HasPrefix(l, "OK ") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
