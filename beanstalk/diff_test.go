package beanstalk_test

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/beanstalk"
)

// The differential test runs one script of commands against real
// beanstalkd and against hourglass, over each backend (a broker and a
// cluster node), and compares the replies, after
// masking what may differ without being wrong: times (age, time-left,
// uptime), the process (pid, version, rusage, host), and the order of
// list-tubes. Job ids are named by put order ({1} is the first INSERTED),
// since beanstalkd spends an id on a put it then refuses (EXPECTED_CRLF)
// and hourglass does not.
//
// A step whose hourglass reply differs on purpose says so in
// hourglass/why: those are the documented differences of package doc.

// step is one command of the script, on connection conn.
type step struct {
	conn int
	// send is written as is ("{k}" becomes the k-th job's id); empty
	// sends nothing and reads the reply of an earlier noRead step.
	send   string
	noRead bool
	// pause is slept before sending.
	pause time.Duration
	mask  mask
	// hourglass, when set, is the reply hourglass must give instead of
	// beanstalkd's; why says why they differ.
	hourglass, why string
}

type mask uint8

const (
	exact  mask = iota
	fields      // a YAML document: volatile fields are masked
	sorted      // a YAML list: its items are sorted
)

// volatile are the YAML fields masked by fields: clocks, the process,
// and what hourglass does not measure (see stats.go).
var volatile = map[string]bool{
	"age": true, "time-left": true, "uptime": true, "pid": true, "version": true,
	"rusage-utime": true, "rusage-stime": true, "hostname": true,
	"os": true, "platform": true, "binlog-oldest-index": true,
	"binlog-current-index": true, "binlog-records-migrated": true,
	"binlog-records-written": true, "binlog-max-size": true, "job-timeouts": true,
	"pause-time-left": true,
}

// script covers every command, its replies and its errors. Jobs: {1}
// hello (diff, pri 10), {2} abc (diff, pri 5), {3} x (diff, delayed).
func script() []step {
	long := strings.Repeat("a", 300)
	name201 := strings.Repeat("n", 201)
	return []step{
		// Tubes and puts.
		{send: "list-tube-used\r\n"},
		{send: "use diff\r\n"},
		{send: "put 10 0 60 5\r\nhello\r\n"},
		{send: "put 5 0 60 3\r\nabc\r\n"},
		{send: "put 5 100 60 1\r\nx\r\n"},
		{send: "put 0 0 60 4\r\n\x00\r\n\xff\r\n"}, // binary body, CR-LF inside
		{send: "peek-ready\r\n"},
		{send: "peek-delayed\r\n"},
		{send: "peek-buried\r\n"},
		{send: "peek {1}\r\n"},
		{send: "peek {4}\r\n"},
		{send: "peek 999\r\n"},
		{send: "reserve-job {4}\r\n"},
		{send: "delete {4}\r\n"},
		{send: "stats-job {3}\r\n", mask: fields},
		{send: "stats-job 999\r\n"},
		{send: "stats-tube diff\r\n", mask: fields},
		{send: "stats-tube nosuch\r\n"},
		{send: "list-tube-used\r\n"},
		{send: "list-tubes-watched\r\n"},
		{send: "watch diff\r\n"},
		{send: "watch diff\r\n"},
		{send: "watch other\r\n"},
		{send: "list-tubes-watched\r\n"},
		{send: "ignore default\r\n"},
		{send: "list-tubes-watched\r\n"},
		{send: "ignore other\r\n"},
		{send: "ignore diff\r\n"},
		{send: "ignore nosuch\r\n"},
		{send: "list-tubes\r\n", mask: sorted},

		// The worker's commands.
		{send: "reserve\r\n"},
		{send: "stats-job {2}\r\n", mask: fields},
		{send: "touch {2}\r\n"},
		{send: "touch {1}\r\n"},
		{send: "bury {1} 0\r\n"},
		{send: "release {1} 0 0\r\n"},
		{send: "release {2} 7 0\r\n"},
		{send: "reserve-with-timeout 0\r\n"},
		{send: "bury {2} 3\r\n"},
		{send: "peek-buried\r\n"},
		{send: "stats-tube diff\r\n", mask: fields},
		{send: "kick 10\r\n"},
		{send: "kick-job {3}\r\n"},
		{send: "kick-job {3}\r\n"},
		{send: "kick-job 999\r\n"},
		{send: "stats-job {2}\r\n", mask: fields},
		{send: "stats-job {3}\r\n", mask: fields,
			hourglass: "delay: 0", why: "the broker records a kicked job's due time, not its delay"},
		{send: "reserve-job {1}\r\n"},
		{send: "reserve-job {1}\r\n"},
		{send: "delete {1}\r\n"},
		{send: "delete {1}\r\n"},
		{send: "reserve\r\n"},
		{send: "delete {2}\r\n"},
		{send: "reserve\r\n"},
		{send: "release {3} 1 100\r\n"},
		{send: "stats-job {3}\r\n", mask: fields,
			hourglass: "delay: 0", why: "the broker records a released job's due time, not its delay"},
		{send: "kick 5\r\n"},
		{send: "kick 5\r\n"},
		{send: "delete {3}\r\n"},
		{send: "reserve-with-timeout 0\r\n"},
		{send: "reserve-with-timeout 1\r\n"},

		// Kick's bound is read with C's strtoul.
		{send: "kick -1\r\n"},
		{send: "kick 5x\r\n"},
		{send: "kick x\r\n"},
		{send: "kick\r\n"},

		// Order: priority, then put order; a delayed job kicked.
		{send: "put 2 0 60 1\r\na\r\n"},  // {5}
		{send: "put 1 0 60 1\r\nb\r\n"},  // {6}
		{send: "put 1 50 60 1\r\nc\r\n"}, // {7}
		{send: "kick 1\r\n"},
		{send: "reserve\r\n"},
		{send: "delete {6}\r\n"},
		{send: "reserve\r\n"},
		{send: "delete {7}\r\n"},
		{send: "reserve\r\n"},
		{send: "delete {5}\r\n"},

		// Order after a release: beanstalkd orders equal priorities by
		// id, the broker by due time.
		{send: "put 3 0 60 1\r\nd\r\n"}, // {8}
		{send: "reserve\r\n"},
		{send: "put 3 0 60 1\r\ne\r\n"}, // {9}
		{send: "release {8} 3 0\r\n"},
		{send: "reserve\r\n", hourglass: "RESERVED {9} 1\r\ne\r\n",
			why: "the broker hands out equal priorities by due time (a release makes it now), beanstalkd by job id"},
		{send: "delete {8}\r\n"},
		{send: "delete {9}\r\n"},

		// Pause.
		{send: "pause-tube nosuch 1\r\n"},
		{send: "pause-tube -x 1\r\n"},
		{send: "pause-tube diff\r\n"},
		{send: "pause-tube diff x\r\n"},
		{send: "pause-tube diff 2\r\n"},
		{send: "put 0 0 60 1\r\np\r\n"}, // {10}
		{send: "stats-tube diff\r\n", mask: fields},
		{send: "reserve-with-timeout 0\r\n"},
		{send: "reserve-with-timeout 5\r\n"},
		{send: "delete {10}\r\n"},
		{send: "pause-tube diff 0\r\n"},

		// TTR and DEADLINE_SOON.
		{send: "put 0 0 1 1\r\nt\r\n"}, // {11}
		{send: "reserve\r\n"},
		{send: "reserve-with-timeout 0\r\n"},
		{send: "reserve-with-timeout 5\r\n"},
		{send: "reserve\r\n"},
		// beanstalkd 1.12 may notice a timeout only at the holder's next
		// command (its tick can come early and is then dropped).
		{send: "list-tube-used\r\n", pause: 1500 * time.Millisecond},
		{send: "stats-job {11}\r\n", mask: fields, pause: 100 * time.Millisecond},
		{send: "put 0 0 0 1\r\nu\r\n"}, // {12}: ttr 0 is 1
		{send: "stats-job {12}\r\n", mask: fields},
		{send: "reserve\r\n"},
		{send: "reserve\r\n"},
		{send: "delete {12}\r\n"},
		{send: "reserve\r\n"},
		{send: "delete {11}\r\n"},
		{send: "put 0 0 2 1\r\nv\r\n"}, // {13}: a waiting reserve reaches the margin
		{send: "reserve\r\n"},
		{send: "reserve\r\n"},
		{send: "touch {13}\r\n"},
		{send: "reserve-with-timeout 0\r\n"},
		{send: "delete {13}\r\n"},

		// Two connections.
		{conn: 1, send: "watch w2\r\n"},
		{conn: 1, send: "ignore default\r\n"},
		{conn: 1, send: "reserve\r\n", noRead: true},
		{send: "stats-tube w2\r\n", mask: fields, pause: 200 * time.Millisecond},
		{send: "use w2\r\n"},
		{send: "put 0 0 60 2\r\nw2\r\n"}, // {14}
		{conn: 1},
		{send: "delete {14}\r\n"},
		{send: "release {14} 0 0\r\n"},
		{send: "stats-job {14}\r\n", mask: fields},
		{conn: 1, send: "quit\r\n"},
		{send: "stats-job {14}\r\n", mask: fields, pause: 200 * time.Millisecond,
			hourglass: "releases: 1", why: "the broker counts the release of a closed connection's job"},
		{send: "reserve-job {14}\r\n"},
		{send: "delete {14}\r\n"},
		{send: "stats-tube w2\r\n", mask: fields},

		// Tube names beyond the broker's characters.
		{send: "use a+b/c;d$e(f)_g\r\n"},
		{send: "put 0 0 60 1\r\ns\r\n"}, // {15}
		{send: "list-tubes\r\n", mask: sorted},
		{send: "stats-tube a+b/c;d$e(f)_g\r\n", mask: fields},
		{send: "stats-job {15}\r\n", mask: fields},
		{send: "delete {15}\r\n"},
		{send: "use ..\r\n"},
		{send: "put 0 0 60 1\r\nd\r\n"}, // {16}
		{send: "list-tubes\r\n", mask: sorted},
		{send: "stats-job {16}\r\n", mask: fields},
		{send: "peek-ready\r\n"},
		{send: "delete {16}\r\n"},
		{send: "use default\r\n"},
		{send: "list-tubes\r\n", mask: sorted},

		// Errors.
		{send: "foo\r\n"},
		{send: "\r\n"},
		{send: "reservex\r\n"},
		{send: "reserve \r\n"},
		{send: "reserve-with-timeout\r\n"},
		{send: "reserve-with-timeout 0x\r\n"},
		{send: "reserve-with-timeout x\r\n"},
		{send: "reserve-with-timeout 4294967296\r\n"},
		{send: "reserve-with-timeout 9223372036854775808\r\n"},
		{send: "peek\r\n"},
		{send: "peek-readyx\r\n"},
		{send: "delete\r\n"},
		{send: "delete abc\r\n"},
		{send: "delete -1\r\n"},
		{send: "delete +1\r\n"},
		{send: "delete 1 \r\n"},
		{send: "delete  999\r\n"},
		{send: "delete 18446744073709551616\r\n"},
		{send: "release 1 2\r\n"},
		{send: "release 1 4294967296 0\r\n"},
		{send: "bury 1\r\n"},
		{send: "stats-job\r\n"},
		{send: "stats-jobs 1\r\n"},
		{send: "statsx\r\n"},
		{send: "list-tubesx\r\n"},
		{send: "list-tube\r\n"},
		{send: "use -foo\r\n"},
		{send: "use a b\r\n"},
		{send: "use  foo\r\n"},
		{send: "use " + name201 + "\r\n"},
		{send: "use a:b\r\n"},
		{send: "watch\r\n"},
		{send: "stats-tube \r\n"},
		{send: "put 1 0 1\r\n"},
		{send: "put 1 0 1 x\r\n"},
		{send: "put -1 0 1 1\r\n"},
		{send: "put 4294967296 0 1 1\r\n"},
		{send: "put 1 0 1 3 \r\n"},
		{send: "put 0 0 1 70000\r\n" + strings.Repeat("z", 70002)},
		{send: "put 0 0 1 70000 trailing\r\n" + strings.Repeat("z", 70002)},
		{send: "put 0 0 1 3\r\nabcd\r\n"},
		{send: "list-tube-used\r\n"}, // after the "\n" left over
		{send: "put 0 0 1 3\r\nabcxy"},
		{send: "stats\x00\r\n"},
		{send: long + "\r\n"},
		{send: "list-tube-used\r\n"},
		{send: "use x\nlist-tube-used\r\n"},
		{send: "stats\r\n", mask: fields},
		{send: "quit\r\n"},
	}
}

func TestDifferential(t *testing.T) {
	bin := lookPath(t, "beanstalkd", "beanstalkd")
	t.Parallel()
	addr := startBeanstalkd(t, bin)
	ref := runScript(t, addr)
	eachBackend(t, func(t *testing.T, start func(testing.TB, beanstalk.Options) *testServer) {
		ts := start(t, beanstalk.Options{})
		probe(t, ts.addr) // as startBeanstalkd probed beanstalkd: total-connections
		ours := runScript(t, ts.addr)
		steps := script()
		for i, s := range steps {
			want := ref[i]
			if s.hourglass != "" {
				want = expectDifference(t, i, s, want, ours[i])
			}
			if ours[i] != want {
				t.Errorf("step %d, conn %d, %q:\nbeanstalkd: %q\nhourglass:  %q", i, s.conn, trim(s.send), want, ours[i])
			}
		}
	})
}

// expectDifference checks that a documented difference is still there:
// that beanstalkd's reply is not hourglass's, and that hourglass's
// contains s.hourglass (a whole reply, or one YAML line). It returns the
// reply hourglass must give.
func expectDifference(t *testing.T, i int, s step, ref, ours string) string {
	t.Helper()
	if ref == ours {
		t.Errorf("step %d, %q: the documented difference (%s) is gone: both answer %q", i, trim(s.send), s.why, ref)
		return ours
	}
	if strings.HasSuffix(s.hourglass, "\r\n") {
		return s.hourglass
	}
	key, _, _ := strings.Cut(s.hourglass, ": ")
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + `: .*$`)
	return re.ReplaceAllString(ref, s.hourglass)
}

// runScript runs script() against addr and returns the masked replies,
// one per step ("" for noRead steps).
func runScript(t *testing.T, addr string) []string {
	steps := script()
	conns := map[int]*scriptConn{}
	defer func() {
		for _, c := range conns {
			c.nc.Close()
		}
	}()
	ids := &jobIDs{byID: map[string]string{}}
	out := make([]string, len(steps))
	pending := map[int]int{} // conn -> step whose reply is unread
	for i, s := range steps {
		c := conns[s.conn]
		if c == nil {
			nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			c = &scriptConn{nc: nc, r: bufio.NewReaderSize(nc, 1<<17)}
			conns[s.conn] = c
		}
		time.Sleep(s.pause)
		if s.send == "" {
			j, ok := pending[s.conn]
			if !ok {
				t.Fatalf("step %d reads connection %d, which has no reply pending", i, s.conn)
			}
			delete(pending, s.conn)
			out[j] = ids.mask(c.read(t), steps[j].mask)
			out[i] = out[j]
			continue
		}
		c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.nc.Write([]byte(ids.expand(s.send))); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if s.noRead {
			pending[s.conn] = i
			continue
		}
		out[i] = ids.mask(c.read(t), s.mask)
	}
	return out
}

type scriptConn struct {
	nc net.Conn
	r  *bufio.Reader
}

func (c *scriptConn) read(t *testing.T) string {
	s, err := readReply(c.nc, c.r, 8*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// jobIDs names job ids by put order.
type jobIDs struct {
	n    int
	byK  []string          // k-1 -> id
	byID map[string]string // id -> "{k}"
}

var idRe = regexp.MustCompile(`^(INSERTED|RESERVED|FOUND) (\d+)`)

func (j *jobIDs) expand(s string) string {
	for k := len(j.byK); k >= 1; k-- {
		s = strings.ReplaceAll(s, "{"+strconv.Itoa(k)+"}", j.byK[k-1])
	}
	return s
}

// mask names ids, and masks a YAML document as m says.
func (j *jobIDs) mask(reply string, m mask) string {
	if g := idRe.FindStringSubmatch(reply); g != nil {
		if g[1] == "INSERTED" {
			j.n++
			j.byK = append(j.byK, g[2])
			j.byID[g[2]] = "{" + strconv.Itoa(j.n) + "}"
		}
		if k, ok := j.byID[g[2]]; ok {
			reply = g[1] + " " + k + reply[len(g[0]):]
		}
	}
	if m == exact || !strings.HasPrefix(reply, "OK ") {
		return reply
	}
	_, body, _ := strings.Cut(reply, "\r\n")
	lines := strings.Split(strings.TrimSuffix(body, "\n\r\n"), "\n")
	for i, l := range lines {
		k, v, ok := strings.Cut(l, ": ")
		switch {
		case !ok:
		case volatile[k]:
			lines[i] = k + ": #"
		case k == "id":
			if n, ok := j.byID[v]; ok {
				lines[i] = k + ": " + n
			} else {
				lines[i] = k + ": #" // the server's random id
			}
		}
	}
	if m == sorted {
		slices.Sort(lines[1:])
	}
	return "OK #\r\n" + strings.Join(lines, "\n") + "\n\r\n"
}

// startBeanstalkd runs beanstalkd on a free loopback port until the test
// ends and returns its address.
func startBeanstalkd(t *testing.T, bin string, args ...string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, append([]string{"-l", "127.0.0.1", "-p", strconv.Itoa(port)}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	probe(t, addr)
	return addr
}

// probe waits until addr accepts a connection, and closes it.
func probe(t *testing.T, addr string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		nc, err := net.Dial("tcp", addr)
		if err == nil {
			nc.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
