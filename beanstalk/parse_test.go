package beanstalk

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		line string
		want command
		err  error
	}{
		{"put 1 2 3 4", command{op: opPut, pri: 1, delay: 2, ttr: 3, bytes: 4}, nil},
		{"put  1  2  3  4", command{op: opPut, pri: 1, delay: 2, ttr: 3, bytes: 4}, nil},
		{"put 4294967295 0 0 0", command{op: opPut, pri: 1<<32 - 1}, nil},
		{"put 4294967296 0 0 0", command{}, errBadFormat},
		{"put 1 2 3", command{}, errBadFormat},
		{"put 1 2 3 4 ", command{op: opPut}, errBadFormat},
		{"put 1 2 3 65536 x", command{op: opPut, pri: 1, delay: 2, ttr: 3, bytes: 65536}, errJobTooBig},
		{"put -1 2 3 4", command{}, errBadFormat},
		{"put", command{}, errUnknownCommand},
		{"peek 7", command{op: opPeek, id: 7}, nil},
		{"peek 18446744073709551615", command{op: opPeek, id: 1<<64 - 1}, nil},
		{"peek 18446744073709551616", command{}, errBadFormat},
		{"peek 7 ", command{}, errBadFormat},
		{"peek +7", command{}, errBadFormat},
		{"peek", command{}, errUnknownCommand},
		{"peek-ready", command{op: opPeekReady}, nil},
		{"peek-readyx", command{}, errBadFormat},
		{"reserve", command{op: opReserve}, nil},
		{"reserve ", command{}, errBadFormat},
		{"reserve-job 3", command{op: opReserveJob, id: 3}, nil},
		{"reserve-job", command{}, errBadFormat}, // a malformed reserve
		{"reserve-with-timeout 5", command{op: opReserveWithTimeout, timeout: 5}, nil},
		{"reserve-with-timeout 5x", command{op: opReserveWithTimeout, timeout: 5}, nil},
		{"reserve-with-timeout x", command{op: opReserveWithTimeout}, nil},
		{"reserve-with-timeout -1", command{op: opReserveWithTimeout, timeout: -1}, nil},
		{"reserve-with-timeout 4294967296", command{op: opReserveWithTimeout}, nil},
		{"reserve-with-timeout 9223372036854775807", command{op: opReserveWithTimeout, timeout: -1}, nil},
		{"reserve-with-timeout 9223372036854775808", command{}, errBadFormat},
		{"reserve-with-timeout -9223372036854775808", command{op: opReserveWithTimeout}, nil},
		{"release 1 2 3", command{op: opRelease, id: 1, pri: 2, delay: 3}, nil},
		{"release 1 2", command{}, errBadFormat},
		{"bury 1 2", command{op: opBury, id: 1, pri: 2}, nil},
		{"bury 1 2 3", command{}, errBadFormat},
		{"kick 5", command{op: opKick, bound: 5}, nil},
		{"kick \t5abc", command{op: opKick, bound: 5}, nil},
		{"kick -1", command{op: opKick, bound: 1<<32 - 1}, nil},
		{"kick 4294967301", command{op: opKick, bound: 5}, nil},
		{"kick 18446744073709551616", command{}, errBadFormat},
		{"kick -", command{}, errBadFormat},
		{"kick-job 9", command{op: opKickJob, id: 9}, nil},
		{"stats", command{op: opStats}, nil},
		{"stats-job 1", command{op: opStatsJob, id: 1}, nil},
		{"stats-job", command{}, errBadFormat},
		{"stats-tube a(b)", command{op: opStatsTube, tube: "a(b)"}, nil},
		{"use " + strings.Repeat("x", 200), command{op: opUse, tube: strings.Repeat("x", 200)}, nil},
		{"use " + strings.Repeat("x", 201), command{}, errBadFormat},
		{"use -x", command{}, errBadFormat},
		{"use x-", command{op: opUse, tube: "x-"}, nil},
		{"use a b", command{}, errBadFormat},
		{"watch +/;.$_()", command{op: opWatch, tube: "+/;.$_()"}, nil},
		{"ignore default", command{op: opIgnore, tube: "default"}, nil},
		{"list-tubes", command{op: opListTubes}, nil},
		{"list-tube-used", command{op: opListTubeUsed}, nil},
		{"list-tubes-watched", command{op: opListTubesWatched}, nil},
		{"list-tubes-watchedx", command{}, errBadFormat},
		{"quit", command{op: opQuit}, nil},
		{"quitnow", command{op: opQuit}, nil},
		{"pause-tube t 10", command{op: opPauseTube, tube: "t", delay: 10}, nil},
		{"pause-tubet 10", command{op: opPauseTube, tube: "t", delay: 10}, nil},
		{"pause-tube -t 10", command{op: opPauseTube}, errBadFormat},
		{"pause-tube t", command{}, errBadFormat},
		{"pause-tube", command{}, errBadFormat},
		{"", command{}, errUnknownCommand},
		{"stats\x00", command{}, errBadFormat},
		{"PUT 1 2 3 4", command{}, errUnknownCommand},
	} {
		got, err := parse([]byte(tc.line), 65535)
		if got != tc.want || err != tc.err {
			t.Errorf("parse(%q) = %+v, %v; want %+v, %v", tc.line, got, err, tc.want, tc.err)
		}
	}
}

// format writes c as a command line that parses back to c.
func format(c command) string {
	name := c.op.String()
	switch c.op {
	case opPut:
		return fmt.Sprintf("put %d %d %d %d", c.pri, c.delay, c.ttr, c.bytes)
	case opPeek, opReserveJob, opDelete, opKickJob, opTouch, opStatsJob:
		return fmt.Sprintf("%s %d", name, c.id)
	case opReserveWithTimeout:
		return fmt.Sprintf("%s %d", name, c.timeout)
	case opRelease:
		return fmt.Sprintf("release %d %d %d", c.id, c.pri, c.delay)
	case opBury:
		return fmt.Sprintf("bury %d %d", c.id, c.pri)
	case opKick:
		return fmt.Sprintf("kick %d", c.bound)
	case opStatsTube, opUse, opWatch, opIgnore:
		return name + " " + c.tube
	case opPauseTube:
		return fmt.Sprintf("pause-tube %s %d", c.tube, c.delay)
	}
	return name
}

// FuzzParse checks that parse never panics, that what it accepts is well
// formed (names valid, puts within the limit), and that a command it
// accepts, written back canonically, parses to the same command.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"put 1 2 3 4", "put 0 0 0 65536", "peek 1", "peek-ready", "reserve",
		"reserve-with-timeout 3", "reserve-job 2", "delete 5", "release 1 2 3",
		"bury 4 5", "kick 10", "kick-job 3", "touch 9", "stats", "stats-job 4",
		"stats-tube a", "use b", "watch c", "ignore d", "list-tubes",
		"list-tube-used", "list-tubes-watched", "quit", "pause-tube e 7",
		"use a+b", "kick -3", "reserve-with-timeout -2", "\x00",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		c, err := parse(line, 65535)
		switch err {
		case nil, errBadFormat, errUnknownCommand:
		case errJobTooBig:
			if c.op != opPut || c.bytes <= 65535 {
				t.Fatalf("JOB_TOO_BIG for %+v", c)
			}
			return
		default:
			t.Fatalf("parse(%q): unexpected error %v", line, err)
		}
		if err != nil {
			if c.op != opUnknown && c.op != opPut && c.op != opPauseTube {
				t.Fatalf("parse(%q) failed but counts %v", line, c.op)
			}
			return
		}
		if c.op == opUnknown || c.op >= numOps {
			t.Fatalf("parse(%q) accepted op %d", line, c.op)
		}
		if c.tube != "" && !validTube([]byte(c.tube)) {
			t.Fatalf("parse(%q) accepted tube %q", line, c.tube)
		}
		if c.op == opQuit {
			return // quit ignores what follows
		}
		again, err := parse([]byte(format(c)), 65535)
		if err != nil || again != c {
			t.Fatalf("parse(%q) = %+v; written back as %q it parses to %+v, %v", line, c, format(c), again, err)
		}
	})
}

// FuzzNames checks that tube and queue names map to each other both
// ways, and only onto valid names.
func FuzzNames(f *testing.F) {
	for _, s := range []string{"default", "a+b", "a_b", "-a_pb", "-a__b", "-ab", "x/y;z$()", "-", "_", ".", "..", "-.", "-..", "..."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if validTube([]byte(s)) {
			q, ok := queueName(s)
			if ok {
				if !validQueue(q) {
					t.Fatalf("queueName(%q) = %q, not a queue name", s, q)
				}
				if back, ok := tubeName(q); !ok || back != s {
					t.Fatalf("tubeName(queueName(%q) = %q) = %q, %v", s, q, back, ok)
				}
			} else if len(s) < maxTubeName/2 {
				t.Fatalf("queueName(%q) failed", s)
			}
		}
		if validQueue(s) {
			if tube, ok := tubeName(s); ok {
				if !validTube([]byte(tube)) {
					t.Fatalf("tubeName(%q) = %q, not a tube name", s, tube)
				}
				if back, ok := queueName(tube); !ok || back != s {
					t.Fatalf("queueName(tubeName(%q) = %q) = %q, %v", s, tube, back, ok)
				}
			} else if s[0] != '-' {
				t.Fatalf("tubeName(%q) failed", s)
			}
		}
	})
}

// validQueue is the broker's rule for queue names.
func validQueue(q string) bool {
	if len(q) == 0 || len(q) > maxTubeName || q == "." || q == ".." {
		return false
	}
	for i := 0; i < len(q); i++ {
		c := q[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// FuzzReadLine checks the line reader against a model: a line ends at
// the first CR-LF, and a line over maxLine bytes with its CR-LF is
// reported too long; read through a 16-byte buffer, so that lines and
// CR-LFs straddle reads.
func FuzzReadLine(f *testing.F) {
	f.Add([]byte("stats\r\nuse a\r\n"))
	f.Add([]byte(strings.Repeat("a", maxLine-2) + "\r\n" + strings.Repeat("b", maxLine-1) + "\r\nx\r\n"))
	f.Add([]byte(strings.Repeat("a", maxLine-1) + "\r\n\r\n"))
	f.Add([]byte("a\rb\nc\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		c := &conn{r: bufio.NewReaderSize(bytes.NewReader(in), 16), line: make([]byte, 0, maxLine)}
		rest := in
		for {
			i := bytes.Index(rest, []byte("\r\n"))
			line, tooLong, err := c.readLine()
			if i < 0 {
				if err == nil {
					t.Fatalf("read %q, tooLong %v, from %q without CR-LF", line, tooLong, rest)
				}
				return
			}
			if err != nil {
				t.Fatalf("error %v before %q", err, rest[:i+2])
			}
			wantLong := i+2 > maxLine
			if tooLong != wantLong || !wantLong && !bytes.Equal(line, rest[:i]) {
				t.Fatalf("read %q, tooLong %v; want %q, tooLong %v", line, tooLong, rest[:i], wantLong)
			}
			rest = rest[i+2:]
		}
	})
}
